"""A chunk is found by what it defines, not only by what its body says (`Chunk.names`): each
definition is embedded alone, in words — and as its own code where its chunk holds more than it —
and the vector arm scores a chunk by the best of its own cosine and its definitions'. Through the
library in one process, with the real model."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import lancedb

import semsearch
from semsearch.engine.store import LISTS_COMPLETE
from semsearch.library import Database
from semsearch.schemas import Hit
from tests.corpus import write_tree
from tests.polling import until
from tests.test_docs import ROOT

INDENTED_PYTHON = re.compile(r"^( *)```python\n(.*?)^\1```", re.S | re.M)
BODY = "\n".join(f"    row_{i} = table.fetch(cursor, offset={i}, page_size=batch * {i})" for i in range(14))
REPO = {
    "src/units.py": (
        f"def kelvin_to_celsius(table, cursor, batch):\n{BODY}\n    return row_0\n\n\n"
        "def parse_rgb(text):\n    return text\n\n\nclass Ledger:\n    def balance(self):\n        return 0\n"
    ),
    "src/pages.py": f"def load_pages(table, cursor, batch):\n{BODY}\n    return row_1\n",
    "docs/notes.md": "# Notes\n\nTemperatures are stored in kelvin; reports show degrees celsius.\n",
}


def _top(db: Database, query: str) -> Hit:
    hits = db.search(query, k=3, mode="vector", minScore=-1)
    assert hits, query
    return hits[0]


def _cosine(hit: Hit) -> float:
    assert hit.cosine is not None, hit  # every chunk here is embedded
    return hit.cosine


def _indexed(tmp_path: Path) -> Path:
    """REPO indexed with the shipped settings; returns the data directory."""
    write_tree(tmp_path / "repo", REPO)
    with semsearch.connect(tmp_path / "data", corpus_root=tmp_path) as db:
        db.add(tmp_path / "repo")
        db.index()
    return tmp_path / "data"


def test_a_question_naming_a_definition_finds_the_chunk_that_defines_it(tmp_path: Path) -> None:
    with semsearch.connect(_indexed(tmp_path), corpus_root=tmp_path) as db:
        # The body says nothing of temperatures; its name does, and its words' vector answers.
        hit = _top(db, "function kelvin to celsius")
        assert (hit.rel_path, hit.start_line) == ("src/units.py", 1) and _cosine(hit) > 0.95, hit
        # Packed with its neighbours in one chunk, a short method is found as well as they are.
        hit = _top(db, "method balance in ledger")
        assert hit.rel_path == "src/units.py" and hit.start_line <= 24 <= hit.end_line and _cosine(hit) > 0.95, hit
        # Its chunk holds more than it, so it is also embedded alone: path › symbol path, then its code.
        hit = _top(db, "src/units.py › Ledger › balance\n    def balance(self):\n        return 0")
        assert hit.rel_path == "src/units.py" and hit.start_line <= 24 <= hit.end_line and _cosine(hit) > 0.99, hit
        prose = _top(db, "degrees celsius in reports")  # prose has no definitions: its own cosine only
        assert prose.rel_path == "docs/notes.md" and _cosine(prose) < 0.95


def test_definition_search_off_scores_chunks_by_their_own_cosine(tmp_path: Path) -> None:
    with semsearch.connect(_indexed(tmp_path), corpus_root=tmp_path) as db:
        named = _top(db, "function kelvin to celsius")
    for resident_rows in (0, 20_000):  # LanceDB's answer and the in-memory copy's
        with semsearch.connect(tmp_path / "data", corpus_root=tmp_path, definition_search=False,
                               resident_rows=resident_rows) as db:  # fmt: skip
            if resident_rows:
                until(lambda: db.status().in_memory, 60, what="the in-memory copy")
            hit = _top(db, "function kelvin to celsius")
            assert _cosine(hit) < 0.95 < _cosine(named), (hit, named)
            hybrid = db.search("function kelvin to celsius", k=3, minScore=-1)  # the BM25 arm's rows too
            assert all(_cosine(h) < 0.95 for h in hybrid), hybrid


def _meta(root: Path) -> dict[str, object]:
    return dict(json.loads((root / "data" / "index" / "meta.json").read_text()))


def test_an_index_from_before_names_is_upgraded_and_filled_by_the_next_runs(tmp_path: Path) -> None:
    """LanceDB's answers (no in-memory copy): rows written before search lists are searched by their
    own vector, beside the lists of rows written since, until every file is indexed again."""
    table = lancedb.connect(str(_indexed(tmp_path) / "index")).open_table("chunks")
    table.drop_columns(["names", "search_vectors"])  # as an earlier version wrote it
    with semsearch.connect(tmp_path / "data", corpus_root=tmp_path, resident_rows=0) as db:
        hit = _top(db, "function kelvin to celsius")  # answers as before: the chunk's own cosine
        assert _cosine(hit) < 0.95
        units = tmp_path / "repo" / "src" / "units.py"
        units.write_text(units.read_text() + "# changed\n")
        assert db.index().files_processed == 1  # one file with search lists, two without
        hit = _top(db, "function kelvin to celsius")
        assert (hit.rel_path, hit.start_line) == ("src/units.py", 1) and _cosine(hit) > 0.95, hit
        assert _top(db, "degrees celsius in reports").rel_path == "docs/notes.md"  # a row without one
        assert not _meta(tmp_path).get(LISTS_COMPLETE)  # so both columns are searched
        assert db.index(force=True).files_processed == len(REPO)
        assert _meta(tmp_path)[LISTS_COMPLETE] is True  # every row has its list: one query from now on
        hit = _top(db, "method balance in ledger")
        assert hit.rel_path == "src/units.py" and _cosine(hit) > 0.95, hit
        assert _top(db, "degrees celsius in reports").rel_path == "docs/notes.md"


def test_the_retrieval_page_examples_run_as_written(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "concepts" / "ranking.md").read_text()
    examples = [textwrap.dedent(m.group(2)) for m in INDENTED_PYTHON.finditer(page)]  # in list items
    assert len(examples) == 2  # found by what it defines; found where it is quoted
    for code in examples:
        run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                             timeout=300)  # fmt: skip
        assert run.returncode == 0, run.stderr[-3000:]
        comment = code.strip().splitlines()[-1].split("# ")[-1]  # what the page says it prints
        assert run.stdout.split() == comment.split(), run.stdout
