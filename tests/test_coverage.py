"""The coverage note through the real services: what, in a search's scope, the index does not
reflect — files changed since indexing, and what the last pass left out, by rule."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import semsearch
from semsearch.engine.coverage import CoverageCache
from semsearch.schemas import Coverage
from tests.conftest import Stack
from tests.corpus import write_tree
from tests.polling import until

FILES = {
    "docs/harbour.md": "# Harbour\n\nThe pilot boards incoming ships at the outer buoy.\n",
    "docs/tides.md": "# Tides\n\nSpring tides come twice a month, with the new and the full moon.\n",
    "src/berth.py": "def assign_berth(ship):\n    return ship.length < 200\n",
    ".env": "HARBOUR_TOKEN=not-for-the-index\n",
}


@pytest.fixture
def harbour(api_factory: Any, tmp_path: Path) -> tuple[Stack, Path]:
    stack = api_factory(SEMSEARCH_MAX_FILE_SIZE_BYTES="2000")
    root = write_tree(tmp_path / "harbour", FILES)
    (root / "docs" / "chart.bin").write_bytes(b"\x00\x01binary chart")
    (root / "docs" / "log.txt").write_text("ship sighted at dawn\n" * 200)  # over the 2,000-byte limit
    stack.cli("add", str(root))
    stack.index()
    return stack, root


def coverage(stack: Stack, **body: Any) -> dict[str, Any]:
    with stack.http() as http:
        response = http.post("/v1/search", json={"query": "who boards the ships", "minScore": -1, **body})
    assert response.status_code == 200, response.text
    return response.json()["coverage"]  # type: ignore[no-any-return]


def poll(stack: Stack, check: Any, timeout: float = 30, **body: Any) -> dict[str, Any]:
    """The first coverage note `check` accepts: a pass is reused for a few seconds (COVERAGE_REUSE_S)."""
    return until(lambda: coverage(stack, **body), timeout, 0.2, what="a coverage note the check accepts", accept=check)


def test_skipped_files_are_counted_by_rule_and_named_in_the_note(harbour: tuple[Stack, Path]) -> None:
    stack, _ = harbour
    found = coverage(stack)
    assert (found["files"], found["stale"]) == (3, 0)
    assert found["skipped"] == {"secret": 1, "binary": 1, "too-large": 1}
    assert found["indexedAt"] is not None
    assert found["note"].startswith("skipped: ")
    assert all(f"1 as {rule}" in found["note"] for rule in ("secret", "binary", "too-large"))
    assert "semsearch explain" in found["note"]


def test_a_file_changed_after_indexing_is_stale_in_scope_only(harbour: tuple[Stack, Path]) -> None:
    stack, root = harbour
    tides = root / "docs" / "tides.md"
    tides.write_text(tides.read_text() + "Neap tides fall between them.\n")
    os.utime(tides, ns=(time.time_ns(), time.time_ns() + 10**9))
    found = poll(stack, lambda c: c["stale"] == 1)
    assert found["stale"] == 1 and "1 file in scope changed since indexing" in found["note"]
    assert "semsearch index" in found["note"]
    only_code = coverage(stack, pathGlob=["src/**"])
    assert (only_code["files"], only_code["stale"]) == (1, 0)
    stack.index()
    assert poll(stack, lambda c: c["stale"] == 0)["stale"] == 0


def test_the_note_reaches_mcp_gather_and_the_cli(harbour: tuple[Stack, Path]) -> None:
    stack, _ = harbour

    found, gathered = stack.mcp(
        ("search", {"query": "who boards the ships", "minScore": -1}),
        ("gather", {"query": "who boards the ships", "k": 1}),
    )
    texts = [c.text for c in found.content]
    assert json.loads(texts[0])[0]["relPath"] == "docs/harbour.md"
    assert any(t.startswith("skipped:") for t in texts[1:]), texts
    assert found.structured_content["coverage"].startswith("skipped:")
    assert "_Coverage: skipped:" in gathered.content[0].text
    table = stack.cli("search", "who boards the ships", "--min-score", "-1")
    assert "coverage: skipped:" in table.stderr


@pytest.fixture
def harbour_engine(tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    """The harbour folder indexed through the library's engine: its real store and folders."""
    write_tree(tmp_path / "harbour", FILES)
    with semsearch.connect(tmp_path / "data", corpus_root=tmp_path) as db:
        db.add(tmp_path / "harbour")
        db.index()
        engine: Any = db._backend
        yield engine.store, engine.registry.all()


def test_searches_at_once_read_a_folders_pass_once(harbour_engine: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Eight searches needing the same folder's pass at the same moment (after a write, or when it
    expires) read it once and all get it; each reading it for itself made the slowest answers under
    load. Through the library's engine and the real store; the manifest read is only counted, and
    the first held until all eight have asked."""
    store, folders = harbour_engine
    real = store.manifest
    reads: list[str] = []
    asked: list[int] = []
    everyone = threading.Event()

    def counted(folder: str, paths: list[str] | None = None) -> Any:
        reads.append(folder)
        if len(reads) == 1:
            assert everyone.wait(30)
        return real(folder, paths)

    monkeypatch.setattr(store, "manifest", counted)
    cache = CoverageCache()
    answers: list[Coverage] = []

    def search() -> None:
        asked.append(1)
        if len(asked) == 8:
            everyone.set()
        answers.append(cache.coverage(store, folders))

    threads = [threading.Thread(target=search) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(answers) == 8 and reads == ["harbour"], reads
    assert all(answer == answers[0] for answer in answers) and answers[0].files == 3
    store.manifest_epoch += 1  # a write: the next search reads the pass again, once
    assert cache.coverage(store, folders) == answers[0] and len(reads) == 2


def test_a_pass_that_is_only_old_is_read_again_beside_the_answer(
    harbour_engine: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When a folder's pass has only aged (the manifest has not changed), the search that finds it
    so answers with it at once and the pass is read beside it; the next answers carry what it found
    (a file edited on disk meanwhile). The search finding it old used to wait for the pass."""
    from semsearch.engine import coverage as module

    store, folders = harbour_engine
    monkeypatch.setattr(module, "COVERAGE_REUSE_S", 0.0)  # every state is old as soon as it is read
    cache = CoverageCache()
    first = cache.coverage(store, folders)  # nothing held yet: this search reads the pass
    assert (first.files, first.stale) == (3, 0)
    real, reads, held = store.manifest, [], threading.Event()

    def slow(folder: str, paths: list[str] | None = None) -> Any:
        reads.append(folder)
        assert held.wait(30)
        return real(folder, paths)

    monkeypatch.setattr(store, "manifest", slow)
    edited = tmp_path / "harbour" / "docs" / "harbour.md"
    edited.write_text(edited.read_text() + "\nEdited on disk after the run.\n")
    os.utime(edited, ns=(edited.stat().st_atime_ns, edited.stat().st_mtime_ns + 10**9))
    assert cache.coverage(store, folders) == first  # at once, while the pass is held
    until(lambda: reads == ["harbour"], 30, 0.02, what="the pass read beside the answer")
    held.set()
    until(lambda: cache.coverage(store, folders).stale == 1, 30, 0.02, what="the new pass with the edit")
