"""The coverage note through the real services: what, in a search's scope, the index does not
reflect — files changed since indexing, and what the last pass left out, by rule."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Stack
from tests.corpus import write_tree

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
    deadline = time.monotonic() + timeout
    while True:  # the answer is reused for a few seconds (COVERAGE_REUSE_S): poll, never sleep a guess
        found = coverage(stack, **body)
        if check(found) or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


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
