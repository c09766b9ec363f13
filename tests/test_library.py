"""`semsearch.connect`: the engine as a library — in one process with no server, and over a
running API with the same methods — and the same answers either way."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import semsearch
from semsearch.api.app import create_app
from semsearch.client import ApiError
from semsearch.config import Settings
from tests.corpus import RETRY_REPO, write_tree

TIDES = "# Tides\n\nThe spring tide comes two days after the full moon.\n"


def test_the_readme_example_runs_in_one_process(tmp_path: Path) -> None:
    repo = write_tree(tmp_path / "my-api", RETRY_REPO)
    with semsearch.connect(tmp_path / "data", corpus_root=tmp_path) as db:
        added = db.add(repo)
        assert added.name == "my-api" and db.folders()[0].files == 0
        summary = db.index()
        assert summary.files_processed == len(RETRY_REPO) and not summary.errors
        hits = db.search("retry with backoff", k=5)
        assert hits and hits[0].folder == "my-api" and hits[0].rel_path.endswith("retry.py")
        assert db.index().files_processed == 0  # nothing changed: nothing read again
        status = db.status()
        assert status.files == len(RETRY_REPO) and status.embedder.address == "in-process"
        block = db.gather("retry with backoff", k=2, contextLines=1)
        assert "retry" in block.markdown and block.hits >= 1


def test_options_are_the_search_requests_fields_and_bad_ones_say_so(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "tides.md").write_text(TIDES)
    with semsearch.connect(tmp_path / "data", corpus_root=tmp_path) as db:
        db.add(tmp_path / "notes")
        db.index()
        answer = db.query("when is the highest tide", mode="lexical", path_glob=["*.md"])
        assert answer.hits and answer.hits[0].rel_path == "tides.md"
        assert db.search("highest tide", folder=["notes"], minScore=-1)  # wire names work too
        with pytest.raises(ValueError, match="k"):
            db.search("tide", k=0)
        with pytest.raises(ApiError, match="no folder named 'nope'"):
            db.index("nope")


def test_the_library_and_the_api_answer_alike_over_one_index(tmp_path: Path, embedder_address: str) -> None:
    """What `connect` built, served by the REST API (the embedder over gRPC): the same hits."""
    repo = write_tree(tmp_path / "repo", RETRY_REPO)
    queries = ["retry with backoff", "how long to wait between attempts", "RetryPolicy"]
    with semsearch.connect(tmp_path / "data", corpus_root=tmp_path) as db:
        db.add(repo)
        db.index()
        local = {q: [(h.rel_path, h.start_line, round(h.score, 6)) for h in db.search(q, k=5)] for q in queries}
    settings = Settings(data_dir=tmp_path / "data", embedder_addr=embedder_address, corpus_root=tmp_path)
    with TestClient(create_app(settings), base_url="http://127.0.0.1:8765") as http:
        for query in queries:
            hits = http.post("/v1/search", json={"query": query, "k": 5}).json()["hits"]
            assert [(h["relPath"], h["startLine"], round(h["score"], 6)) for h in hits] == local[query], query


@pytest.mark.e2e  # a real API process, and the indexer worker it hands runs to
def test_connect_to_a_running_api_has_the_same_methods(api_factory: object, tmp_path: Path) -> None:
    stack = api_factory()  # type: ignore[operator]
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "tides.md").write_text(TIDES)
    with semsearch.connect(stack.url) as db:
        assert db.add(tmp_path / "notes").name == "notes"
        assert db.index().files_processed == 1
        assert db.search("when is the highest tide")[0].rel_path == "tides.md"
        assert db.status().embedder.address == stack.embedder_addr
        assert db.remove("notes").name == "notes" and db.folders() == []


EXIT_WHILE_LOADING = """
import sys, semsearch
db = semsearch.connect(sys.argv[2], corpus_root=sys.argv[1])
db.add(sys.argv[1] + "/my-api")
db.index()
# The search finds the copy out of date and begins loading it; the script ends without closing.
print(db.search("retry with backoff", k=5)[0].rel_path)
"""


def test_a_process_that_ends_while_the_copy_loads_exits_cleanly(tmp_path: Path) -> None:
    """The README's example ends right after its first search, which starts the in-memory copy's
    load: the interpreter must not finalize under it (LanceDB's threads then aborted the process,
    exit code 134, in a few runs of forty)."""
    import subprocess
    import sys

    write_tree(tmp_path / "my-api", RETRY_REPO)
    for attempt in range(3):
        data = str(tmp_path / f"data{attempt}")
        run = subprocess.run([sys.executable, "-c", EXIT_WHILE_LOADING, str(tmp_path), data], cwd=tmp_path,
                             capture_output=True, text=True, timeout=120)  # fmt: skip
        assert run.returncode == 0 and "Fatal Python error" not in run.stderr, run.stderr[-2000:]
        assert run.stdout.split()[0].endswith("retry.py")
