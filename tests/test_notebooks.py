"""Jupyter notebooks indexed as their cells: Markdown cells by heading (a heading's section runs on
into the cells after it), code cells as code (a `# comment` there is no heading), outputs left out;
a hit says its cell on REST, the CLI, MCP and gather, and `cat` shows the cells, not the JSON. Code
cells go through the kernel language's syntax chunker (their functions are symbols); text outputs
are indexed only when `SEMSEARCH_NOTEBOOK_OUTPUTS` is on. The notebooks are Jupyter's own "Running
Code" example and papermill's report-mode test notebook, as the papermill wheel carries them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import papermill
import pytest

NOTEBOOKS = Path(papermill.__file__).parent / "tests" / "notebooks"
NOTEBOOK = NOTEBOOKS / "gcs" / "gcs_in" / "gcs-simple_notebook.ipynb"
SUMS = NOTEBOOKS / "report_mode_test.ipynb"  # cell 2 defines `sum(x, y)`


@pytest.fixture(scope="module")
def lab(api_factory: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    return _lab(api_factory, tmp_path_factory)


def _lab(api_factory: Any, tmp_path_factory: pytest.TempPathFactory, **env: str) -> tuple[Any, Path]:
    folder = tmp_path_factory.mktemp("notebooks") / "lab"
    folder.mkdir()
    notebook = json.loads(NOTEBOOK.read_text())
    # An output no cell's text holds: outputs are results, not the notebook's text.
    notebook["cells"][18]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["zanzibar quokka\n"]}]
    (folder / "running-code.ipynb").write_text(json.dumps(notebook))
    (folder / "sums.ipynb").write_text(SUMS.read_text())
    (folder / "broken.ipynb").write_text('{"cells": [')
    stack = api_factory(**env)
    stack.cli("add", str(folder))
    summary = stack.index()
    assert summary["filesProcessed"] == 2 and summary["skippedBy"].get("corrupt") == 1, summary
    return stack, folder


def first(stack: Any, query: str, **extra: Any) -> dict[str, Any]:
    with stack.http() as http:
        hits = http.post("/v1/search", json={"query": query, "k": 1, "minScore": -1, **extra}).json()["hits"]
    return hits[0]  # type: ignore[no-any-return]


def test_a_hit_says_its_cell_and_the_section_it_is_in(lab: tuple[Any, Path]) -> None:
    stack, _ = lab
    dies = first(stack, "what happens when the kernel dies")
    assert (dies["location"], dies["page"]) == ("cell 11", 11)
    assert dies["heading"] == "Running Code > Managing the Kernel"
    reset = first(stack, "how do I reset the notebook's state")
    assert reset["location"] == "cell 16" and reset["heading"] == "Running Code > Restarting the kernels"
    code = first(stack, "CDLL", mode="lexical")
    assert code["location"] == "cell 12" and code["heading"] == "Running Code > Managing the Kernel"
    assert "# This will crash a Linux or Mac system" in code["text"]  # a comment in code, not a section
    with stack.http() as http:
        assert http.post("/v1/search", json={"query": "zanzibar quokka", "mode": "lexical"}).json()["hits"] == []


def test_cat_shows_the_cells_at_the_hits_lines_and_every_surface_says_the_cell(lab: tuple[Any, Path]) -> None:
    stack, folder = lab
    query = "what happens when the kernel dies"
    hit = first(stack, query)
    with stack.http() as http:
        shown = http.get("/v1/files", params={"path": hit["filePath"], "startLine": hit["startLine"],
                                              "endLine": hit["endLine"]}).json()["text"]  # fmt: skip
    assert "If the Kernel dies you will be prompted to restart it" in shown and '"cell_type"' not in shown
    whole = stack.cli("cat", str(folder / "running-code.ipynb")).stdout
    assert whole.startswith("# Running Code\n\nFirst and foremost") and "{" not in whole.splitlines()[0]
    cli = json.loads(stack.cli("search", query, "-k", "1", "--min-score", "-1", "--json").stdout)["hits"][0]
    assert cli["location"] == "cell 11"
    (found,) = stack.mcp(("search", {"query": query, "k": 1, "minScore": -1}))
    assert json.loads(found.content[0].text)[0]["location"] == "cell 11"
    gathered = stack.cli("gather", query, "-k", "1").stdout
    assert "cell 11, line" in gathered.splitlines()[0]
    path, line, _ = stack.cli("grep", "libc.time").stdout.splitlines()[0].split("\t")  # lines as cat counts them
    assert path == hit["filePath"] and hit["startLine"] <= int(line) <= hit["endLine"]


def test_code_cells_are_chunked_by_the_kernels_language_and_their_functions_are_symbols(
    lab: tuple[Any, Path],
) -> None:
    stack, folder = lab
    with stack.http() as http:
        found = http.get("/v1/symbols", params={"name": "sum"}).json()
    (symbol,) = [s for s in found["symbols"] if s["relPath"] == "sums.ipynb"]
    assert symbol["kind"] == "function" and symbol["signature"].startswith("def sum(x, y)")
    shown = stack.cli("cat", str(folder / "sums.ipynb")).stdout.splitlines()
    assert shown[symbol["startLine"] - 1] == "def sum(x, y):"  # the line as `cat` numbers the cells
    hit = first(stack, "sum", mode="lexical", pathGlob=["sums.ipynb"])
    assert (hit["kind"], hit["location"], hit["heading"]) == ("function", "cell 2", "sum")


def test_text_outputs_are_indexed_under_their_cell_when_asked(
    api_factory: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    stack, folder = _lab(api_factory, tmp_path_factory, SEMSEARCH_NOTEBOOK_OUTPUTS="true")
    hit = first(stack, "zanzibar quokka", mode="lexical")
    assert (hit["relPath"], hit["location"]) == ("running-code.ipynb", "cell 19")
    assert hit["text"].startswith("Out:\nzanzibar quokka")
    whole = stack.cli("cat", str(folder / "running-code.ipynb")).stdout.splitlines()
    assert whole[hit["startLine"] - 1 : hit["endLine"]] == hit["text"].splitlines()  # cat shows it too
