"""Every MCP tool result stays within an agent's budget by default and says how to read on: a long
file comes in pages of 400 lines, gather packs 8,000 tokens unless asked for more, `explain`
says why a file is missing, and `index_status` can wait for the end instead of being polled.
Through the official SDK's client against a real API, worker and model (in process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from semsearch.limits import MCP_CAT_LINES, MCP_GATHER_TOKENS
from tests.conftest import Stack


@pytest.fixture(scope="module")
def project(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("budgets") / "ledger"
    root.mkdir()
    (root / "long.py").write_text("".join(f"def step_{i}(x):\n    return x + {i}\n\n" for i in range(400)))
    for n in range(30):  # many similar documents: a gather without a budget would return them all
        (root / f"note{n}.md").write_text(f"# Harbour note {n}\n\n" + "The harbour pilot boards ships. " * 60 + "\n")
    (root / ".indexignore").write_text("secret-plans.md\n")
    (root / "secret-plans.md").write_text("# Plans\n")
    stack.cli("add", str(root))
    stack.index()
    return root


def test_cat_file_pages_a_long_file_and_says_where_to_go_on(stack: Stack, project: Path) -> None:
    path = str(project / "long.py")
    first, second, ranged = stack.mcp(
        ("cat_file", {"filePath": path}),
        ("cat_file", {"filePath": path, "startLine": MCP_CAT_LINES + 1}),
        ("cat_file", {"filePath": path, "startLine": 10, "endLine": 12}),
    )
    header, body = first.content[0].text.split("\n", 1)
    assert header.endswith(f":1-{MCP_CAT_LINES} (of 1200 lines); more: cat_file with startLine={MCP_CAT_LINES + 1}")
    assert body.count("\n") == MCP_CAT_LINES + 1  # the lines and the closing fence
    assert f":{MCP_CAT_LINES + 1}-{2 * MCP_CAT_LINES} " in second.content[0].text.split("\n", 1)[0]
    assert ranged.content[0].text.split("\n", 1)[0].endswith(":10-12 (of 1200 lines)")  # what was asked: no hint


def test_gather_packs_a_default_budget_unless_asked_for_more(stack: Stack, project: Path) -> None:
    default, wider = stack.mcp(
        ("gather", {"query": "who boards the ships", "k": 50}),
        ("gather", {"query": "who boards the ships", "k": 50, "maxTokens": 40_000}),
    )
    small, large = default.content[0].text, wider.content[0].text
    assert len(small) < len(large)
    assert len(small) <= MCP_GATHER_TOKENS * 6  # tokens of English prose are ~4-5 characters
    assert small.count("### [") < large.count("### [")


def test_explain_says_why_a_file_is_not_found(stack: Stack, project: Path) -> None:
    ignored, indexed = stack.mcp(
        ("explain", {"filePath": str(project / "secret-plans.md")}),
        ("explain", {"filePath": str(project / "note3.md")}),
    )
    assert not ignored.is_error and "not indexed: indexignore" in ignored.content[0].text
    assert ignored.structured_content["indexed"] is False
    assert "indexed: included" in indexed.content[0].text and "chunks in the index" in indexed.content[0].text


def test_index_status_waits_for_the_end_instead_of_being_polled(stack: Stack, project: Path) -> None:
    (project / "late.md").write_text("# Late\n\nA note written after the first run.\n")
    started, waited = stack.mcp(("index", {"folder": "ledger", "force": True}), ("index_status", {"runId": "x"}))
    run = json.loads(started.content[0].text)
    assert waited.is_error and "x" in waited.content[0].text  # an unknown run is a clear error
    (final,) = stack.mcp(("index_status", {"runId": run["id"], "wait": 60}))
    assert json.loads(final.content[0].text)["state"] == "done"
