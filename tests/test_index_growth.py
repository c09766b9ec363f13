"""The index over many runs: versions are cleaned up as writes accumulate, and the ANN index is
built once, used after a restart and rebuilt once when an earlier release built another kind."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import httpx
import lancedb
import pytest
from lancedb.index import HnswSq

from tests.conftest import SEMSEARCH
from tests.oneshot import index, write_corpus
from tests.processes import start_api

# LanceDB's own ANN index answers (from 64 chunks), never the in-memory copy: see the restart test.
DISK_ONLY = {"SEMSEARCH_ANN_MIN_ROWS": "64", "SEMSEARCH_RESIDENT_ROWS": "0"}


def test_many_small_updates_do_not_grow_versions_without_bound(api_factory: Any, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    note = corpus / "note.md"
    note.write_text("# Note\nversion 0\n")
    stack = api_factory(SEMSEARCH_HOUSEKEEPING_EVERY_WRITES="10", SEMSEARCH_VERSION_RETENTION_S="0.5")
    stack.cli("add", str(corpus))
    for i in range(1, 31):
        note.write_text(f"# Note\nversion {i}\n")
        os.utime(note, ns=(i * 10**9, i * 10**9))
        stack.index()
    table = lancedb.connect(str(stack.data_dir / "index")).open_table("chunks")
    versions = len(table.list_versions())
    assert versions < 25, versions  # 30 runs x (write + optimize) would leave 60+ without cleanup
    with stack.http() as http:
        hits = http.post("/v1/search", json={"query": "version 30", "minScore": -1}).json()
    assert "version 30" in hits["hits"][0]["text"]


@pytest.mark.e2e
def test_ann_index_is_built_once_and_used_after_a_restart(tmp_path: Path, embedder_addr: str) -> None:
    """LanceDB's own index answers both times: an in-memory copy (tests/test_resident.py) would answer
    whenever its background load had finished, re-scoring from float16 — and this corpus's chunks
    repeat one sentence, so near-equal cosines swapped places between the two answers."""
    work = write_corpus(tmp_path / "corpus", files=40)
    api, env = start_api(tmp_path / "data", embedder_addr, **DISK_ONLY)
    subprocess.run([SEMSEARCH, "add", str(work)], env=env, check=True, capture_output=True)
    try:
        assert "Built the IVF_SQ index over" in index(env).stdout
        status = httpx.get(f"{env['SEMSEARCH_URL']}/v1/status").json()
        assert status["chunks"] >= 64 and status["vectorIndex"] == "IVF_SQ" and status["fullTextIndex"]
        query = {"query": "subject 99", "k": 5}
        hits = httpx.post(f"{env['SEMSEARCH_URL']}/v1/search", json=query).json()["hits"]
    finally:
        api.stop()
    api, env = start_api(tmp_path / "data", embedder_addr, **DISK_ONLY)
    try:
        assert httpx.get(f"{env['SEMSEARCH_URL']}/v1/status").json()["vectorIndex"] == "IVF_SQ"
        assert httpx.post(f"{env['SEMSEARCH_URL']}/v1/search", json=query).json()["hits"] == hits
        (work / "part03.md").write_text("# Part 3\nA rewritten part about tide tables.\n")
        run = index(env)  # an incremental run folds its rows into the index; it does not build a new one
        assert " 1 indexed " in run.stdout and "Built the" not in run.stdout
        assert httpx.get(f"{env['SEMSEARCH_URL']}/v1/status").json()["vectorIndex"] == "IVF_SQ"
    finally:
        api.stop()


@pytest.mark.e2e
def test_an_ann_index_an_earlier_version_built_is_used_then_rebuilt_once_by_the_next_run(
    tmp_path: Path, embedder_addr: str
) -> None:
    """Earlier versions built IVF_HNSW_SQ; an upgraded API queries it as it is (with the graph's
    own parameters) and the next run that changes files rebuilds it as today's kind, once."""
    work = write_corpus(tmp_path / "corpus", files=40)
    api, env = start_api(tmp_path / "data", embedder_addr, **DISK_ONLY)
    subprocess.run([SEMSEARCH, "add", str(work)], env=env, check=True, capture_output=True)
    try:
        index(env)
    finally:
        api.stop()
    table = lancedb.connect(str(tmp_path / "data" / "index")).open_table("chunks")
    table.create_index("vector", config=HnswSq(distance_type="cosine", m=12), replace=True)  # as 0.x did
    api, env = start_api(tmp_path / "data", embedder_addr, **DISK_ONLY)
    query = {"query": "subject 77", "k": 5, "mode": "vector"}
    try:
        assert httpx.get(f"{env['SEMSEARCH_URL']}/v1/status").json()["vectorIndex"] == "IVF_HNSW_SQ"
        before = httpx.post(f"{env['SEMSEARCH_URL']}/v1/search", json=query).json()["hits"]
        assert len(before) == 5
        (work / "part03.md").write_text("# Part 3\nA rewritten part about tide tables.\n")
        assert "Built the IVF_SQ index over" in index(env).stdout
        assert httpx.get(f"{env['SEMSEARCH_URL']}/v1/status").json()["vectorIndex"] == "IVF_SQ"
        after = httpx.post(f"{env['SEMSEARCH_URL']}/v1/search", json=query).json()["hits"]
        assert [(h["relPath"], h["startLine"]) for h in after] == [(h["relPath"], h["startLine"]) for h in before]
        (work / "part04.md").write_text("# Part 4\nAnother rewrite.\n")
        assert "Built the" not in index(env).stdout  # once
    finally:
        api.stop()
