"""A run with many files writes them all without vectors first (`lexical_first_files`): every file
is found by BM25, symbols and grep within seconds of a cold start, then embedded. Through the
library in one process, with the real model; the embedder's failure after the first pass is an
injected fault (the only stand-in here), which is also what a run stopped between the passes leaves."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, cast

import httpx
import lancedb
import numpy as np
import pytest

import semsearch
from semsearch.config import Settings, settings_from
from semsearch.embedder.client import EmbedderError
from semsearch.embedder.local import LocalEmbedder
from semsearch.engine.core import Engine
from semsearch.indexer.progress import Reporter
from semsearch.indexer.run import Indexer
from semsearch.standalone import ApiThread
from tests.corpus import write_tree
from tests.inprocess import call_mcp, run_cli
from tests.processes import api_env, free_port
from tests.test_docs import ROOT

REPO = {
    "src/ledger.py": "def frobnicate_ledger(entries):\n    return sum(e.amount for e in entries)\n",
    "src/report.py": "def monthly_totals(rows):\n    return {r.month: r.total for r in rows}\n",
    "docs/guide.md": "# Guide\n\nThe ledger keeps every payment; reports add them up by month.\n",
}


class FailsToEmbed(LocalEmbedder):
    """The real model, whose document embedding fails: a run stops after its lexical pass."""

    def __init__(self, real: LocalEmbedder) -> None:
        super().__init__(real.service)

    def embed(self, texts: list[str], query: bool = False) -> np.ndarray:
        if not query:
            raise EmbedderError("injected: the embedder went away mid-run")
        return super().embed(texts, query)


def _shape(note: str) -> str:
    return re.sub(r"\d[\d,]*", "N", note)


def _stopped_after_lexical_pass(tmp_path: Path) -> Settings:
    write_tree(tmp_path / "repo", REPO)
    settings = Settings(data_dir=tmp_path / "data", corpus_root=tmp_path, lexical_first_files=2)
    with semsearch.connect(settings.data_dir, corpus_root=tmp_path) as db:
        db.add(tmp_path / "repo")
    _run_failing_to_embed(settings)
    return settings


def _run_failing_to_embed(settings: Settings) -> None:
    engine = Engine(settings, FailsToEmbed(LocalEmbedder.from_settings(settings)))
    try:
        indexer = Indexer(settings, engine, engine.embedder, Reporter(interactive=False, echo=False))
        with pytest.raises(EmbedderError, match="injected"):
            indexer.run(engine.folders())
    finally:
        engine.close()


def test_files_are_found_by_their_words_before_they_are_embedded_and_the_next_run_embeds_them(
    tmp_path: Path,
) -> None:
    settings = _stopped_after_lexical_pass(tmp_path)
    with semsearch.connect(settings.data_dir, corpus_root=tmp_path) as db:
        exact = db.search("frobnicate_ledger", k=3)  # an identifier: found at once, verbatim
        assert exact[0].rel_path == "src/ledger.py" and exact[0].label == "[exact match]", exact
        assert exact[0].cosine is None  # no vector to compare yet
        words = db.search("payment ledger", k=3)  # words: BM25 ranks what it has
        assert words and words[0].rel_path == "docs/guide.md", words
        assert words[0].label == "[keyword, not embedded yet]" and words[0].cosine is None, words
        answer = db.query("payment ledger")
        assert answer.coverage is not None
        chunks = answer.coverage.chunks
        assert chunks >= len(REPO) and answer.coverage.embedded_chunks == 0
        assert f"semantic: 0 of {chunks:,} chunks embedded so far; lexical: all" in (answer.coverage.note or "")
        page = (ROOT / "docs" / "concepts" / "indexing.md").read_text()  # the line the docs show
        shown = re.search(r"^coverage: (semantic: .*)$", page, re.M)
        assert shown is not None and _shape(shown.group(1)) == _shape(answer.coverage.note or "")
        vector = db.query("payment ledger", mode="vector")  # nothing to compare with yet, and it says so
        assert not vector.hits and "is embedded yet" in (vector.message or ""), vector.message
        (folder,) = db.folders()
        assert folder.embedded_chunks == 0 < folder.chunks == chunks
        symbols = db.query("frobnicate_ledger", mode="lexical")
        assert symbols.hits and symbols.hits[0].rel_path == "src/ledger.py"

        # Same mtimes and sizes: the manifest says these files are not embedded, so the next run does it.
        summary = db.index()
        assert summary.files_processed == len(REPO), summary
        words = db.search("payment ledger", k=3)
        assert words[0].rel_path == "docs/guide.md" and words[0].cosine is not None, words
        answer = db.query("payment ledger")
        assert answer.coverage is not None and answer.coverage.embedded_chunks == answer.coverage.chunks == chunks
        assert "semantic" not in (answer.coverage.note or "")
        assert db.folders()[0].embedded_chunks == chunks
        assert db.index().files_processed == 0  # and then nothing is left to do


def test_a_run_that_goes_lexical_first_ends_with_every_chunk_embedded(tmp_path: Path) -> None:
    write_tree(tmp_path / "repo", REPO)
    with semsearch.connect(tmp_path / "data", corpus_root=tmp_path, lexical_first_files=1) as db:
        db.add(tmp_path / "repo")
        assert db.index().files_processed == len(REPO)  # each file counted once, by the pass that embeds it
        hit = db.search("who keeps every payment", k=1, mode="vector")[0]
        assert hit.rel_path == "docs/guide.md" and hit.cosine is not None and hit.cosine > 0.3
        assert db.index().files_processed == 0
    chunks = lancedb.connect(str(tmp_path / "data" / "index")).open_table("chunks")
    assert chunks.count_rows("vector IS NULL") == 0 and chunks.count_rows() >= len(REPO)


def test_an_index_from_before_lexical_passes_takes_them_and_keeps_its_vectors(tmp_path: Path) -> None:
    write_tree(tmp_path / "repo", REPO)
    settings = Settings(data_dir=tmp_path / "data", corpus_root=tmp_path, lexical_first_files=2)
    with semsearch.connect(settings.data_dir, corpus_root=tmp_path, lexical_first_files=0) as db:
        db.add(tmp_path / "repo")
        db.index()
    index = lancedb.connect(str(settings.data_dir / "index"))
    index.open_table("chunks").alter_columns(cast(Any, {"path": "vector", "nullable": False}))  # as earlier versions
    index.open_table("files").drop_columns(["embedded"])
    write_tree(tmp_path / "repo", {"src/audit.py": "def reconcile_quarterly(ledger):\n    return ledger\n",
                                   "src/export.py": "def export_as_csv(rows):\n    return rows\n"})  # fmt: skip
    _run_failing_to_embed(settings)  # the writer opens the older tables, then the new files' lexical pass
    with semsearch.connect(settings.data_dir, corpus_root=tmp_path) as db:
        assert db.search("reconcile_quarterly", k=1)[0].rel_path == "src/audit.py"
        old = db.search("who keeps every payment", k=1, mode="vector")[0]  # written before: still embedded
        assert old.rel_path == "docs/guide.md" and old.cosine is not None
        assert db.index().files_processed == 2  # only the files the stopped run had not embedded
        assert db.search("reconcile_quarterly", k=1)[0].cosine is not None


def test_rest_mcp_and_the_cli_say_what_is_not_embedded_yet(tmp_path: Path, embedder_address: str) -> None:
    settings = _stopped_after_lexical_pass(tmp_path)
    env = api_env(settings.data_dir, free_port(), embedder_address, SEMSEARCH_CORPUS_ROOT=str(tmp_path))
    api = ApiThread(settings_from(env)).start()
    try:
        with httpx.Client(base_url=env["SEMSEARCH_URL"], timeout=60) as http:
            answer = http.post("/v1/search", json={"query": "payment ledger", "k": 3}).json()
        assert answer["hits"][0]["cosine"] is None and answer["hits"][0]["label"] == "[keyword, not embedded yet]"
        assert answer["coverage"]["embeddedChunks"] == 0 < answer["coverage"]["chunks"]
        (mcp,) = call_mcp(env, [("search", {"query": "frobnicate_ledger", "k": 3})])
        assert not mcp.is_error, mcp
        assert mcp.structured_content["hits"][0]["relPath"] == "src/ledger.py"
        assert mcp.structured_content["hits"][0]["cosine"] is None
        assert "semantic: 0 of" in " ".join(block.text for block in mcp.content), mcp.content
        cli = run_cli(["search", "payment ledger"], env)
        assert cli.returncode == 0, cli.stderr
        assert "not embedded yet" in cli.stdout and "semantic: 0 of" in cli.stdout + cli.stderr, cli.stdout
        listed = run_cli(["status"], env)
        assert "(0 embedded so far)" in listed.stdout, listed.stdout + listed.stderr
    finally:
        api.stop()


def test_files_touched_during_a_run_are_embedded_before_the_rest(tmp_path: Path) -> None:
    """The embedding pass goes newest first, and a file touched meanwhile (a watcher's event,
    `Indexer.urgent`) goes next: here the oldest, which would have been last."""
    pages = {f"p{i}.md": f"# Page {i}\n\nNotes number {i} about birds.\n" for i in range(5)}
    write_tree(tmp_path / "repo", pages)
    for i in range(5):  # p0 the oldest, p4 the newest
        os.utime(tmp_path / "repo" / f"p{i}.md", ns=(1_700_000_000_000_000_000 + i * 10**9,) * 2)
    settings = Settings(data_dir=tmp_path / "data", corpus_root=tmp_path, lexical_first_files=2, write_batch_files=1)
    with semsearch.connect(settings.data_dir, corpus_root=tmp_path) as db:
        db.add(tmp_path / "repo")
    engine = Engine(settings, LocalEmbedder.from_settings(settings))
    asked: list[str] = []

    def urgent(folder: str) -> set[str]:
        asked.append(folder)
        return {"p0.md"} if len(asked) == 1 else set()

    try:
        indexer = Indexer(settings, engine, engine.embedder, Reporter(interactive=False, echo=False), concurrency=1)
        indexer.urgent = urgent
        assert indexer.run(engine.folders()).files_processed == 5
    finally:
        engine.close()
    files = lancedb.connect(str(settings.data_dir / "index")).open_table("files").to_arrow().to_pylist()
    order = [row["path"] for row in sorted(files, key=lambda row: row["indexed_at"])]
    assert order == ["p0.md", "p4.md", "p3.md", "p2.md", "p1.md"], order
    assert asked and set(asked) == {"repo"}


def test_the_embedding_pass_takes_what_the_lexical_pass_read_unless_the_file_changed(tmp_path: Path) -> None:
    """Each file is read and chunked once (chunking asks the embedder, busy embedding, for token
    counts); one edited between the passes is read again, and its new text is what gets embedded."""
    write_tree(tmp_path / "repo", REPO)
    settings = Settings(data_dir=tmp_path / "data", corpus_root=tmp_path, lexical_first_files=2)
    with semsearch.connect(settings.data_dir, corpus_root=tmp_path) as db:
        db.add(tmp_path / "repo")
    read: list[str] = []

    class Counting(Indexer):  # the real indexer, noting which files it reads and chunks
        def _prepare(self, root: Path, rel: str) -> Any:
            read.append(rel)
            return super()._prepare(root, rel)

    def edit_once(folder: str) -> set[str]:  # asked as the embedding pass starts, after the lexical pass
        if len(read) == len(REPO):
            (tmp_path / "repo" / "src" / "report.py").write_text("def zebra_stripes(herd):\n    return len(herd)\n")
        return set()

    engine = Engine(settings, LocalEmbedder.from_settings(settings))
    try:
        indexer = Counting(settings, engine, engine.embedder, Reporter(interactive=False, echo=False), concurrency=1)
        indexer.urgent = edit_once
        assert indexer.run(engine.folders()).files_processed == len(REPO)
    finally:
        engine.close()
    assert sorted(read) == sorted([*REPO, "src/report.py"]), read
    with semsearch.connect(settings.data_dir, corpus_root=tmp_path) as db:
        hit = db.search("zebra stripes of a herd", k=1, mode="vector")[0]
        assert hit.rel_path == "src/report.py" and "zebra_stripes" in hit.text and hit.cosine is not None
        gone = db.search("monthly_totals", k=3, mode="lexical")  # the text read before the edit is gone
        assert not [h for h in gone if "monthly_totals" in h.text], gone
