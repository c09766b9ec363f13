"""The in-memory copy searches use (engine/resident.py): LanceDB's answers, never a stale one,
within its bound — on a real LanceDB table, then through the engine with the real model."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, cast

import lancedb
import numpy as np
import pyarrow as pa
import pytest
from lancedb.query import LanceVectorQueryBuilder

import semsearch
from semsearch.engine import resident
from semsearch.engine.postings import by_score
from semsearch.engine.resident import ResidentCache
from semsearch.engine.store import FTS_CONFIG
from tests.corpus import FILES, write_tree
from tests.oneshot import write_corpus
from tests.polling import until

COLUMNS = ["id", "path", "text"]


WORDS = [
    "tide",
    "moon",
    "harbour",
    "ferry",
    "timetable",
    "lighthouse",
    "keeper",
    "storm",
    "warning",
    "gull",
    "quay",
    "anchor",
]


def _rows(rng: np.random.Generator, first: int, n: int) -> pa.Table:
    # Not unit length, and a third of them repeated: equal cosines must rank as LanceDB ranks them.
    vectors = rng.normal(size=(n, 16)).astype(np.float32)
    vectors[::3] = vectors[0]
    # Sentences of uneven length and word counts, so BM25's idf, tf and length terms all matter.
    lexical = [" ".join(rng.choice(WORDS, size=int(rng.integers(2, 30)))) + "s running" for _ in range(n)]
    return pa.table(
        {
            "id": [f"c{i}" for i in range(first, first + n)],
            "path": [f"{'src' if i % 3 else 'docs'}/f{i}.txt" for i in range(first, first + n)],
            "text": [f"chunk number {i}" for i in range(first, first + n)],
            "lexical": lexical,
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 16),
        }
    )


def _table(tmp_path: Path, n: int, seed: int = 7, fts: bool = True) -> lancedb.table.Table:
    table = lancedb.connect(str(tmp_path / "db")).create_table("chunks", data=_rows(np.random.default_rng(seed), 0, n))
    if fts:
        table.create_index("lexical", config=FTS_CONFIG)
    return table


def test_the_copy_answers_as_lancedb_does(tmp_path: Path) -> None:
    table = _table(tmp_path, 300)
    copy = ResidentCache(1000, COLUMNS).load(table)
    assert copy is not None and len(copy.positions) == 300 and copy.version == table.version
    repeated = np.asarray(table.search().where("id = 'c0'").select(["vector"]).to_arrow()["vector"][0].as_py())
    queries: list[np.ndarray] = [np.random.default_rng(1).normal(size=16).astype(np.float32), repeated * 1.5]
    filters = ("true", "path LIKE 'src/%'", "path LIKE 'docs/%' AND id != 'c3'", "false")
    for query, where in [(q, w) for q in queries for w in filters]:  # the second query: 20 equal cosines
        search = cast(LanceVectorQueryBuilder, table.search(query, vector_column_name="vector")).distance_type("cosine")
        if where != "true":
            search = search.where(where, prefilter=True)
        expected = search.select(["id"]).limit(20).to_arrow()
        got = copy.nearest(query, 20, where)
        assert [r["id"] for r in got] == expected["id"].to_pylist(), where
        assert np.allclose([r["cosine"] for r in got], 1 - expected["_distance"].to_numpy(), atol=1e-5)
        assert all(set(r) >= {"id", "path", "text", "cosine"} for r in got)
    rows, vectors, _ = copy.lookup(["c5", "c1"]) or ([], np.empty(0), [])
    assert [r["text"] for r in rows] == ["chunk number 5", "chunk number 1"] and vectors.shape == (2, 16)
    assert copy.lookup(["c5", "not-a-chunk"]) is None  # a row it does not hold: LanceDB answers
    stored = table.search().where("id = 'c5'").select(["vector"]).to_arrow()["vector"][0].as_py()
    assert np.array_equal(vectors[0], np.asarray(stored, dtype=np.float32))  # as stored, for the BM25 arm's cosine


def test_a_write_makes_the_copy_stale_at_once_and_a_reload_follows(tmp_path: Path) -> None:
    table = _table(tmp_path, 50)
    cache = ResidentCache(1000, COLUMNS)
    assert cache.current(table) is None  # nothing held yet: a load starts in the background
    first = until(lambda: cache.current(table))
    table.add(
        pa.table(
            {
                "id": ["new"],
                "path": ["src/new.txt"],
                "text": ["just written"],
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(np.ones(16, dtype=np.float32)), 16),
            }
        )
    )
    assert cache.current(table) is None  # the version moved: never served from the old copy
    second = until(lambda: cache.current(table), 60)  # after the cool-down
    assert second is not first and "new" in second.positions and second.version == table.version


def _with_ties_and_empty_chunks(tmp_path: Path) -> lancedb.table.Table:
    """`_rows`, then 90 copies of one sentence (equal BM25 scores, past any cut) and chunks with no
    token at all (`]`, stop words): LanceDB's index leaves those out of its chunk count and mean length."""
    table = lancedb.connect(str(tmp_path / "db")).create_table("chunks", data=_rows(np.random.default_rng(5), 0, 200))
    extra = ["tide warning at the quay"] * 90 + ["]", '"""', "the and of", "    }"] * 5
    rng = np.random.default_rng(9)
    table.add(
        pa.table(
            {
                "id": [f"t{i:03}" for i in range(len(extra))],
                "path": [f"src/t{i}.txt" for i in range(len(extra))],
                "text": extra,
                "lexical": extra,
                "vector": pa.FixedSizeListArray.from_arrays(
                    pa.array(rng.normal(size=len(extra) * 16).astype(np.float32)), 16
                ),
            }
        )
    )
    table.create_index("lexical", config=FTS_CONFIG)
    return table


def _lancedb_bm25(table: lancedb.table.Table, query: str, limit: int, where: str) -> list[tuple[str, float]]:
    """LanceDB's own answer, every match, in the one order: best first, equal scores by chunk id."""
    search = table.search(query, query_type="fts", fts_columns="lexical")
    if where != "true":
        search = search.where(where, prefilter=True)
    found = search.select(["id", "_score"]).limit(10_000).to_arrow()
    pairs = list(zip(found["id"].to_pylist(), found["_score"].to_pylist(), strict=True))
    return by_score(pairs, lambda p: p[1], lambda p: p[0])[:limit]


def test_bm25_in_memory_scores_and_ranks_as_lancedb_does(tmp_path: Path) -> None:
    table = _with_ties_and_empty_chunks(tmp_path)
    copy = ResidentCache(1000, COLUMNS).load(table)
    assert copy is not None and copy.postings is not None
    queries = ("tide", "storm warning", "lighthouse keepers keeper", "gull anchor quay ferry", "run", "nothing here")
    for query in queries:
        tokens = [t.text for t in table.tokenize(query, column="lexical")]
        for where in ("true", "path LIKE 'src/%'", "false"):
            for limit in (5, 50):  # 50: the 90 equal scores of "tide warning at the quay" run past the cut
                got = copy.bm25(tokens, limit, where)
                want = _lancedb_bm25(table, query, limit, where)
                assert got is not None and [r["id"] for r in got] == [i for i, _ in want], (query, where, limit)
                assert np.allclose([r["bm25"] for r in got], [s for _, s in want], rtol=1e-5)
                assert all(r["vector"].shape == (16,) and r["text"] for r in got)


def test_bm25_stays_with_lancedb_where_its_index_does_not_cover_every_row(tmp_path: Path) -> None:
    table = _table(tmp_path, 60)
    table.add(_rows(np.random.default_rng(3), 60, 5))  # written after the index: scored apart until optimize
    copy = ResidentCache(1000, COLUMNS).load(table)
    assert copy is not None and copy.postings is None and copy.bm25(["tide"], 10, "true") is None
    table.optimize()  # folds the new rows into the index
    copy = ResidentCache(1000, COLUMNS).load(table)
    assert copy is not None and copy.postings is not None
    assert _table(tmp_path / "plain", 20, fts=False) is not None
    no_index = ResidentCache(1000, COLUMNS).load(lancedb.connect(str(tmp_path / "plain" / "db")).open_table("chunks"))
    assert no_index is not None and no_index.postings is None  # no full-text index: nothing to agree with


def test_postings_that_score_otherwise_than_lancedb_are_not_used(tmp_path: Path) -> None:
    table = _table(tmp_path, 120)
    copy = ResidentCache(1000, COLUMNS).load(table)
    assert copy is not None and copy.postings is not None
    assert resident._checked(copy.postings, copy) is copy.postings
    # A fault, injected: the same postings with every weight 1% off, as another BM25 would score.
    skewed = dataclasses.replace(copy.postings, weights=copy.postings.weights * 1.01)
    assert resident._checked(skewed, copy) is None


def test_over_the_bound_nothing_is_held(tmp_path: Path) -> None:
    table = _table(tmp_path, 40)
    cache = ResidentCache(39, COLUMNS)
    assert cache.load(table) is None and cache.copy is None
    assert ResidentCache(0, COLUMNS).current(table) is None  # 0: never


def _clustered(
    tmp_path: Path, n: int, dimension: int = 32, lists: bool = True
) -> tuple[lancedb.table.Table, np.ndarray]:
    """Rows around 40 centres, every third with one or two definitions' vectors after its own (the
    search lists code chunks have; none with `lists` false, as in prose); and 60 queries near the
    centres."""
    rng = np.random.default_rng(11)
    centres = rng.normal(size=(40, dimension))
    vectors = (centres[rng.integers(0, 40, n)] + rng.normal(scale=0.6, size=(n, dimension))).astype(np.float32)
    search_lists = []
    for i in range(n):
        extra = rng.normal(size=(i % 3 == 0) * int(rng.integers(1, 3)) * dimension).reshape(-1, dimension)
        unit = extra / np.linalg.norm(extra, axis=1, keepdims=True) if len(extra) else extra
        search_lists.append([vectors[i].tolist(), *unit.astype(np.float32).tolist()])
    columns = {
        "id": [f"c{i}" for i in range(n)],
        "path": [f"{'src' if i % 3 else 'docs'}/f{i}.txt" for i in range(n)],
        "text": [f"chunk number {i}" for i in range(n)],
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), dimension),
    }
    if lists:
        columns["search_vectors"] = pa.array(search_lists, type=pa.list_(pa.list_(pa.float32(), dimension)))
    table = lancedb.connect(str(tmp_path / "db")).create_table("chunks", data=pa.table(columns))
    queries = (centres[rng.integers(0, 40, 60)] + rng.normal(scale=0.6, size=(60, dimension))).astype(np.float32)
    return table, queries


def test_a_large_copy_answers_through_its_ann_index_with_the_flat_scans_cosines(tmp_path: Path) -> None:
    table, queries = _clustered(tmp_path, 4000)
    flat = ResidentCache(10**6, COLUMNS).load(table)
    probed = ResidentCache(10**6, COLUMNS, ann_min_rows=1000).load(table)
    assert flat is not None and flat.ann is None and probed is not None and probed.ann is not None
    # Counted in what the copy takes: its index, and its vectors at half the size (float16).
    assert flat.names is not None and probed.ann.nbytes > 0
    halved = (flat.matrix.nbytes + flat.names.nbytes) // 2
    assert probed.nbytes == flat.nbytes - halved + probed.ann.nbytes
    found = wanted = 0
    # All rows, two thirds (probed with a selector), one in 400 (too narrow to probe: its rows, exactly).
    for where in ("true", "path LIKE 'src/%'", "path LIKE 'docs/f99%'"):
        for names in (True, False):
            for query in queries:
                exact = flat.nearest(query, 10, where, names)
                got = probed.nearest(query, 10, where, names)
                cosine = {r["id"]: r["cosine"] for r in flat.nearest(query, 4000, where, names)}
                assert len(got) == len(exact) and all(r["id"] in cosine for r in got), where  # the filter holds
                assert all(abs(r["cosine"] - cosine[r["id"]]) < 2e-3 for r in got)  # scored exactly (from float16)
                assert [r["cosine"] for r in got] == sorted((r["cosine"] for r in got), reverse=True)
                found += len({r["id"] for r in got} & {r["id"] for r in exact})
                wanted += len(exact)
                if where.startswith("path LIKE 'docs/f99"):
                    assert [r["id"] for r in got] == [r["id"] for r in exact]
    assert found / wanted >= 0.98  # recall@10 against the flat scan
    # A table of prose (no definitions' vectors): the chunks' own vectors alone.
    plain, queries = _clustered(tmp_path / "plain", 1500, lists=False)
    flat, probed = ResidentCache(10**6, COLUMNS).load(plain), ResidentCache(10**6, COLUMNS, 100).load(plain)
    assert flat is not None and probed is not None and probed.ann is not None and probed.names is None
    found = 0
    for query in queries:
        got, exact = probed.nearest(query, 10, "true"), flat.nearest(query, 10, "true")
        found += len({r["id"] for r in got} & {r["id"] for r in exact})
    assert found / (10 * len(queries)) >= 0.98


def test_the_ann_lists_are_trained_once_per_table_and_kept_while_it_grows(tmp_path: Path) -> None:
    table, queries = _clustered(tmp_path / "a", 1200)
    cache = ResidentCache(10**6, COLUMNS, ann_min_rows=100)
    assert cache.load(table) is not None
    trained = cache._trained  # the lists, private: what a reload must not redo
    assert trained is not None
    more = table.search().limit(300).to_arrow()
    table.add(more.set_column(0, "id", pa.array([f"more{i}" for i in range(300)])))
    grown = cache.load(table)  # a quarter more rows: the same lists
    assert grown is not None and grown.ann is not None and cache._trained is trained
    assert len(grown.nearest(queries[0], 10, "true")) == 10
    cache.drop()  # a re-open keeps them…
    assert cache.load(table) is not None and cache._trained is trained
    cache.drop(forget_lists=True)  # …a rebuild or an imported snapshot does not
    assert cache.load(table) is not None and cache._trained is not trained
    narrow, _ = _clustered(tmp_path / "b", 1200, dimension=16)  # the same name, another model's vectors
    kept = cache._trained
    copy = cache.load(narrow)
    assert copy is not None and cache._trained is not kept and len(copy.nearest(np.ones(16), 5, "true")) == 5


def _answers(db: semsearch.Database) -> list[Any]:
    """Every arm and filter the routes pass on, for a handful of questions."""
    options: list[dict[str, Any]] = [
        {},
        {"mode": "vector"},
        {"mode": "lexical"},
        {"path_glob": ["src/**"]},
        {"ext": ["py", "ts"]},
        {"exclude": ["src"]},
        {"folder": ["repo"]},
    ]
    out = []
    queries = ("refresh the access token", "telemetry readings ring buffer", "totalWithVat", "balloon", "subject 99")
    for query in queries:
        for option in options:
            response = db.query(query, k=5, min_score=-1, arms=True, **option)
            out.append(
                (
                    query,
                    option,
                    [(h.rel_path, h.start_line, round(h.score, 4), h.vector_rank, h.bm25_rank) for h in response.hits],
                    [a.id for a in (response.arms.vector if response.arms else [])],
                    [a.id for a in (response.arms.lexical if response.arms else [])],
                )
            )
    return out


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_the_engine_answers_alike_with_and_without_the_copy(tmp_path: Path) -> None:
    """Through the real model and indexer: the copy changes where an answer is read, not the answer."""
    repo = write_tree(tmp_path / "repo", FILES)
    parts = write_corpus(tmp_path / "parts", files=12)  # chunks that tie in both arms
    with semsearch.connect(tmp_path / "data", corpus_root=tmp_path, resident_rows=0) as db:
        db.add(repo)
        db.add(parts)
        db.index()
        without = _answers(db)
        assert db.status().in_memory is None
    with semsearch.connect(tmp_path / "data", corpus_root=tmp_path) as db:
        held = until(lambda: db.status().in_memory)
        assert held == db.status().chunks
        copy = db._backend.store.resident.copy  # type: ignore[attr-defined]  # the engine's, to see the path taken
        assert copy is not None and copy.postings is not None  # BM25 scored in memory
        assert _answers(db) == without
        (repo / "src" / "weather.py").write_text('def kelvin_to_celsius(k):\n    """Convert zorbified kelvin."""\n')
        db.index()
        assert db.search("zorbified kelvin", k=3)[0].rel_path == "src/weather.py"  # at once, not after a reload
        until(lambda: db.status().in_memory == db.status().chunks > held)
        assert db.search("zorbified kelvin", k=3)[0].rel_path == "src/weather.py"
        after_edit = _answers(db)
    # The copy searched through its own ANN index (from 10 chunks here): the same hits in the same
    # order; scores agree to float16's precision.
    with semsearch.connect(tmp_path / "data", corpus_root=tmp_path, ann_min_rows=10) as db:
        until(lambda: db.status().in_memory)
        copy = db._backend.store.resident.copy  # type: ignore[attr-defined]  # the engine's, to see the path taken
        assert copy is not None and copy.ann is not None
        assert db.search("zorbified kelvin", k=3)[0].rel_path == "src/weather.py"
        probed = _answers(db)
    for (query, option, hits, vector, lexical), (_, _, want, want_vector, want_lexical) in zip(
        probed, after_edit, strict=True
    ):
        assert [h[:2] + h[3:] for h in hits] == [h[:2] + h[3:] for h in want], (query, option)
        assert all(abs(h[2] - w[2]) < 1e-3 for h, w in zip(hits, want, strict=True))
        # The vector arm's pool: the same chunks; near-equal cosines may swap places at float16's precision.
        assert (set(vector), lexical) == (set(want_vector), want_lexical), (query, option)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_equal_bm25_scores_at_the_cut_rank_by_chunk_id_with_and_without_the_copy(tmp_path: Path) -> None:
    """80 copies of one line score alike; the BM25 arm's pool of 50 is cut among them. LanceDB's own
    choice there is its heap's: both paths keep the 50 first by chunk id (its path, here)."""
    same = tmp_path / "same"
    same.mkdir()
    for i in range(80):
        (same / f"copy{i:02}.md").write_text("The harbour ferry timetable changes with the tide.\n")
    (same / "other.md").write_text("The ferry leaves at noon, whatever the timetable says.\n")
    answers = []
    for held in (0, 1000):
        with semsearch.connect(tmp_path / "data", corpus_root=tmp_path, resident_rows=held) as db:
            if not held:
                db.add(same)
                db.index()
            else:
                until(lambda: db.status().in_memory)  # noqa: B023  # this connection's, polled now
                copy = db._backend.store.resident.copy  # type: ignore[attr-defined]
                assert copy is not None and copy.postings is not None
            response = db.query("harbour ferry timetable", k=10, mode="lexical", arms=True, min_score=-1)
            assert response.arms is not None
            answers.append([a.rel_path for a in response.arms.lexical])
    assert answers[0] == answers[1] == [f"copy{i:02}.md" for i in range(50)]


def test_postings_that_cannot_be_built_leave_the_vectors_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = _table(tmp_path, 80)
    real = resident._tokenizer(table)
    calls: list[str] = []

    def failing(text: str) -> list[str]:  # a fault, injected: the tokenizer fails after its first call
        calls.append(text)
        if len(calls) > 1:
            raise RuntimeError("tokenizer gone")
        return real(text)

    monkeypatch.setattr(resident, "_tokenizer", lambda _table: failing)
    copy = ResidentCache(1000, COLUMNS).load(table)
    assert copy is not None and len(copy.positions) == 80 and copy.postings is None
    assert copy.bm25(["tide"], 5, "true") is None  # LanceDB answers BM25; the vector arm still from memory
    assert len(copy.nearest(np.ones(16, dtype=np.float32), 5, "true")) == 5


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_both_arms_of_a_search_answer_from_the_copy_it_read_at_its_start(tmp_path: Path) -> None:
    """A search reads the copy once (`Store.held`, one read of the table's version) and both arms
    answer from it, so they see one version; a copy of a table the store has since replaced (a
    model switch's swap) is not used."""
    repo = write_tree(tmp_path / "repo", FILES)
    with semsearch.connect(tmp_path / "data", corpus_root=tmp_path) as db:
        db.add(repo)
        db.index()
        until(lambda: db.status().in_memory)
        store = db._backend.store  # type: ignore[attr-defined]  # the engine's, to call both arms directly
        embedder = db._backend.embedder  # type: ignore[attr-defined]
        held = store.held()
        assert held.copy is not None and held.copy is store.resident.copy and store.lexical_in_memory(held)
        (repo / "src" / "weather.py").write_text('def kelvin_to_celsius(k):\n    """Convert zorbified kelvin."""\n')
        db.index()  # a new version: the copy the search read is of the one before
        vector, _ = embedder.embed_query("zorbified kelvin")

        def paths(rows: list[dict[str, Any]]) -> set[str]:
            return {row["path"] for row in rows}

        assert "src/weather.py" not in paths(store.lexical_search(["zorbified"], 10, "true", held))
        assert "src/weather.py" not in paths(store.vector_search(vector, 50, "true", held=held))
        # Read now: the current version (LanceDB answers until the copy reloads).
        assert paths(store.lexical_search(["zorbified"], 10, "true")) == {"src/weather.py"}
        assert "src/weather.py" in paths(store.vector_search(vector, 50, "true"))
        # A copy of another table object (the table a swap replaced) is never answered from.
        elsewhere = resident.Held(
            dataclasses.replace(
                held.copy, source=lancedb.connect(str(tmp_path / "x")).create_table("t", data=[{"a": 1}])
            )
        )
        assert not store.lexical_in_memory(elsewhere)
        assert paths(store.lexical_search(["zorbified"], 10, "true", elsewhere)) == {"src/weather.py"}
