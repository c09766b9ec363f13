"""Every search says where its time went: a `Server-Timing` header on search and gather, read back
by the CLI's `--timing` (and by the bench)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from semsearch.timing import Timings, parse

# `terms` too, when SEMSEARCH_LEXICAL_MAX_DOC_FREQ turns the term gate on (off as shipped).
SEARCH_STAGES = {
    *("refresh", "guard", "copy", "embed", "vector", "vectorWait", "lexicalWait", "lexical", "fuse", "select"),
    "coverage",
}


def test_the_header_round_trips_and_ignores_entries_without_a_duration() -> None:
    timings = Timings()
    with timings.stage("embed"):
        pass
    timings.add("fuse", 0.0015)
    timings.add("fuse", 0.0005)
    stages = parse(timings.header())
    assert list(stages) == ["embed", "fuse", "total"] and stages["fuse"] == 2.0
    assert stages["total"] >= stages["embed"] >= 0
    assert parse('cache;desc="hit", db;dur=53.2, app;dur=47.2;desc="x"') == {"db": 53.2, "app": 47.2}
    assert parse(None) == {} and parse("garbage;;,") == {}


def test_search_and_gather_send_their_stages_and_the_cli_prints_them(api_factory: Any, tmp_path: Path) -> None:
    stack = api_factory()
    folder = tmp_path / "orchard"
    folder.mkdir()
    (folder / "pruning.md").write_text("# Pruning\nPrune apple trees in late winter, before the buds swell.\n")
    stack.cli("add", str(folder))
    stack.index()
    with stack.http() as http:
        searched = http.post("/v1/search", json={"query": "when to prune apple trees"})
        gathered = http.post("/v1/gather", json={"query": "when to prune apple trees", "k": 1})
        lexical = http.post("/v1/search", json={"query": "prune", "mode": "lexical"})
    stages = parse(searched.headers["server-timing"])
    assert set(stages) >= SEARCH_STAGES and list(stages)[-1] == "total", stages
    assert all(ms >= 0 for ms in stages.values())
    assert stages["total"] >= stages["embed"] + stages["vector"] + stages["fuse"] + stages["select"]
    assert searched.json()["hits"][0]["relPath"] == "pruning.md"
    packed = parse(gathered.headers["server-timing"])
    assert {"embed", "pack", "total"} <= set(packed) and gathered.json()["hits"] == 1
    only_lexical = parse(lexical.headers["server-timing"])
    assert "lexical" in only_lexical and "vector" not in only_lexical  # the stages that ran, no others

    shown = stack.cli("search", "when to prune apple trees", "--timing")
    line = next(line for line in shown.stderr.splitlines() if line.startswith("timing: "))
    assert "embed " in line and line.rstrip().endswith(" ms") and " total " in line
    assert "timing" not in shown.stdout
