"""An in-memory copy of the answering chunks table, for the query path only.

Each LanceDB query carries a fixed cost of a few milliseconds (planning, a scan set-up, Arrow
batches) whatever the table's size: on a 1k-chunk table a flat vector query took ~6–9 ms and a
`take` of 100 rows ~3 ms, while the whole 1k × 384 dot product takes 0.03 ms in numpy. So a table
small enough to hold (`SEMSEARCH_RESIDENT_ROWS`) is held here as it is in LanceDB at one version:
its result columns as Arrow and its vectors as one float32 matrix. The vector arm is an exact scan
of the matrix (equal cosines rank by row id, as LanceDB's flat scan ranks them); the BM25 arm scores
postings made of LanceDB's own terms with LanceDB's formula (engine/postings.py), checked against
LanceDB's index at load, so an answer does not depend on whether the copy had loaded.

LanceDB stays the store of record. The copy answers only while the table is at the version it was
read at: after a write, a search goes to LanceDB at once (nothing indexed is ever missed) and a
reload starts in the background, at most once per cool-down (four times the last load, at least a
second), so an index run's many writes do not turn into as many reloads. Filters (folders, globs,
exclusions, tags, dates) are evaluated by LanceDB too — once per filter and version, as a row mask
kept with the copy — so each filter has one meaning, not two.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import lancedb
import numpy as np
import pyarrow as pa

from semsearch.engine import memory_ann
from semsearch.engine.filters import TRUE
from semsearch.engine.memory_ann import MemoryAnn, Trained
from semsearch.engine.postings import Builder, Postings, by_score
from semsearch.malloc import trim

log = logging.getLogger("semsearch.api")

SEARCH_VECTORS = "search_vectors"  # the chunks table's lists: each chunk's own vector, then its definitions' (store.py)
MASKS_KEPT = 64  # distinct filters remembered per version (a mask is one byte per row)
COOL_DOWN_MIN_S = 1.0
COOL_DOWN_LOADS = 4  # a reload waits this many times the last load's duration
LOAD_BATCH = 4096  # rows per Arrow batch while loading
LEXICAL = "lexical"  # what the full-text index indexes (store.py)
SCORE = "_score"  # LanceDB's BM25 column
EXIT_WAIT_S = 10.0  # at exit, how long a load in flight may take to stop
T = TypeVar("T")

# A load still reading LanceDB when the interpreter finalizes crashed it (LanceDB's native threads
# hand results back to Python that is shutting down: "PyGILState_Release … finalizing", exit code
# 134; the library's README example did so in 3 of 40 runs beside a busy core). So at exit a load
# stops at its next batch and the process waits for it.
_EXITING = threading.Event()
_LOADERS: set[threading.Thread] = set()
_LOADERS_LOCK = threading.Lock()


@atexit.register
def _stop_loads() -> None:
    _EXITING.set()
    deadline = time.monotonic() + EXIT_WAIT_S
    with _LOADERS_LOCK:
        loaders = list(_LOADERS)
    for loader in loaders:
        loader.join(max(0.0, deadline - time.monotonic()))


def vector_matrix(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A vector column as one (rows, dimension) numpy matrix, zero copy where Arrow allows: not 384
    Python floats per row."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    return np.asarray(column.flatten().to_numpy()).reshape(len(column), -1)


def name_matrices(column: pa.Array | pa.ChunkedArray) -> list[np.ndarray | None]:
    """A list-of-vectors column (`search_vectors`) as each row's (n, dimension) matrix, or None."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    flat, offsets = _flat_lists(column)
    return [
        None if not valid else flat[start:end]
        for valid, start, end in zip(column.is_valid().to_pylist(), offsets[:-1], offsets[1:], strict=True)
    ]


def _flat_lists(column: pa.ListArray) -> tuple[np.ndarray, np.ndarray]:
    """The vectors of a list-of-vectors column as one matrix, and each row's offsets into it."""
    offsets = column.offsets.to_numpy()
    values = column.values  # every row's vectors, a null row's none
    matrix = np.asarray(values.flatten().to_numpy(zero_copy_only=False), dtype=np.float32)
    dimension = values.type.list_size
    matrix = matrix.reshape(-1, dimension)[offsets[0] : offsets[-1]]
    return matrix, offsets - offsets[0]


class Stale(Exception):
    """The table moved to another version while the copy read from it."""


@dataclass
class Resident:
    """One version of the chunks table, in memory."""

    source: lancedb.table.Table  # the table object it was read from (a re-open is another table)
    version: int
    rows: pa.Table  # the result columns
    matrix: np.ndarray  # the stored vectors, one row per chunk: float32 as LanceDB holds them (float16 with `ann`)
    norms: np.ndarray  # the float32 vectors' lengths, for the vector arm's cosine (LanceDB's divides by them too)
    rowid_at: np.ndarray  # each position's LanceDB row id: equal cosines rank by it, as in LanceDB
    rowids: np.ndarray  # the row ids sorted, so a filter's rows map to positions…
    by_rowid: np.ndarray  # …through this: the position of the i-th smallest row id
    positions: dict[str, int]  # chunk id -> position
    names: np.ndarray | None = None  # code: every chunk's definitions' vectors (`search_vectors` after its own)…
    name_offsets: np.ndarray | None = None  # …position i's from name_offsets[i] to name_offsets[i + 1]
    name_owner: np.ndarray | None = None  # each name's position
    ann: MemoryAnn | None = None  # a large copy's IVF index over the same vectors (memory_ann.py)
    postings: Postings | None = None  # the BM25 arm's, when they score as LanceDB's index (postings.py)
    _masks: OrderedDict[str, np.ndarray | None] = field(default_factory=OrderedDict)
    _name_starts: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def nbytes(self) -> int:
        arrays = [self.matrix, self.norms, self.rowid_at, self.rowids, self.by_rowid]
        arrays += [a for a in (self.names, self.name_offsets, self.name_owner) if a is not None]
        extra = (self.ann.nbytes if self.ann else 0) + (self.postings.nbytes if self.postings else 0)
        return int(self.rows.nbytes + sum(a.nbytes for a in arrays) + extra)

    def __post_init__(self) -> None:
        if self.name_offsets is not None:  # where each named chunk's names begin
            starts = self.name_offsets[:-1]
            self._name_starts = starts[self.name_offsets[1:] > starts]

    def mask(self, where: str) -> np.ndarray | None:
        """The rows a filter keeps (None: every row), from LanceDB once per filter and version.
        Raises Stale when the table moved on while it was read."""
        with self._lock:
            if where in self._masks:
                self._masks.move_to_end(where)
                return self._masks[where]
        if where == TRUE:
            kept: np.ndarray | None = None
        else:
            found = self.source.search().where(where).with_row_id(True).select(["id"]).limit(None).to_arrow()
            if self.source.version != self.version:
                raise Stale
            kept = np.zeros(len(self.rowids), dtype=bool)
            kept[self.by_rowid[np.searchsorted(self.rowids, found["_rowid"].to_numpy())]] = True
        with self._lock:
            self._masks[where] = kept
            while len(self._masks) > MASKS_KEPT:
                self._masks.popitem(last=False)
        return kept

    def _top(self, scores: np.ndarray, limit: int, where: str) -> np.ndarray:
        """Positions of the `limit` best scores the filter keeps, best first, equal ones by row id."""
        kept = self.mask(where)
        candidates = np.arange(len(scores)) if kept is None else np.flatnonzero(kept)
        if len(candidates) > limit:
            threshold = np.partition(scores[candidates], len(candidates) - limit)[len(candidates) - limit]
            candidates = candidates[scores[candidates] >= threshold]  # ties at the cut stay
        order = np.lexsort((self.rowid_at[candidates], -scores[candidates]))
        return candidates[order][:limit]

    def nearest(self, vector: np.ndarray, limit: int, where: str, names: bool = True) -> list[dict[str, Any]]:
        """The `limit` chunks nearest `vector` by cosine among those the filter keeps, with each row's
        `cosine`: exact, as a flat scan is — or, over a large copy, exact among the ANN index's
        candidates."""
        query = vector.astype(np.float32)
        length = float(np.linalg.norm(query)) or 1.0
        if self.ann is not None:
            kept = self.mask(where)
            found = self.ann.candidates(query / length, limit, kept, names)
            if found is None:  # a filter too narrow to probe for: its rows, exactly
                found = np.arange(len(self.norms)) if kept is None else np.flatnonzero(kept)
            cosines = self._cosines(found, query, length, names)
            order = np.lexsort((self.rowid_at[found], -cosines))[:limit]
            return self._rows_at(found[order], cosines[order])
        scores = (self.matrix @ query) / (self.norms * length)
        if names and self.names is not None and self.name_owner is not None and len(self.names):
            # A chunk's cosine is the best of its own and its definitions' (as in `Store.vector_search`);
            # names are stored in their chunks' order, so each chunk's best is one reduceat.
            named = self.name_owner[self._name_starts]
            best = np.maximum.reduceat(self.names @ query, self._name_starts) / length
            scores[named] = np.maximum(scores[named], best)
        top = self._top(scores, limit, where)
        return self._rows_at(top, scores[top])

    def _cosines(self, positions: np.ndarray, query: np.ndarray, length: float, names: bool) -> np.ndarray:
        """The flat scan's cosines for these positions only: own vector, and the best definition."""
        scores = (np.asarray(self.matrix[positions], dtype=np.float32) @ query) / (self.norms[positions] * length)
        if names and self.names is not None and self.name_offsets is not None:
            starts = self.name_offsets[positions]
            counts = self.name_offsets[positions + 1] - starts
            has = counts > 0
            if has.any():
                ends = np.cumsum(counts)
                gathered = np.arange(int(ends[-1])) + np.repeat(starts - (ends - counts), counts)
                named = np.asarray(self.names[gathered], dtype=np.float32)
                best = np.maximum.reduceat(named @ query, (ends - counts)[has]) / length
                scores[has] = np.maximum(scores[has], best)
        return scores

    def _rows_at(self, positions: np.ndarray, cosines: np.ndarray) -> list[dict[str, Any]]:
        rows = self.rows.take(pa.array(positions)).to_pylist()
        return [dict(row, cosine=float(c)) for row, c in zip(rows, cosines, strict=True)]

    def bm25(self, tokens: list[str], limit: int, where: str) -> list[dict[str, Any]] | None:
        """The `limit` best BM25 matches the filter keeps, for a query tokenized by the table's
        full-text tokenizer, each row with `bm25`, `vector` and its names' vectors; None when the
        copy holds no postings (LanceDB answers)."""
        if self.postings is None:
            return None
        scores = self.postings.scores(tokens)
        kept = self.mask(where)
        found = np.flatnonzero(scores > 0 if kept is None else (scores > 0) & kept)
        if len(found) > limit:
            threshold = np.partition(scores[found], len(found) - limit)[len(found) - limit]
            found = found[scores[found] >= threshold]  # ties at the cut stay, to be ordered by id
        ids = self.rows.column("id").take(pa.array(found)).to_pylist()
        top = found[by_score(range(len(found)), lambda i: scores[found[i]], lambda i: ids[i])[:limit]]
        rows, vectors, names = self._held(top)  # only the rows kept become dicts
        for row, vector, named, position in zip(rows, vectors, names, top, strict=True):
            row["vector"], row[SEARCH_VECTORS], row["bm25"] = vector, named, float(scores[position])
        return rows

    def lookup(self, ids: list[str]) -> tuple[list[dict[str, Any]], np.ndarray, list[np.ndarray | None]] | None:
        """The rows of these chunk ids, their vectors and their names' vectors (or None); None if one
        is not in this copy."""
        try:
            order = np.fromiter((self.positions[i] for i in ids), dtype=np.int64, count=len(ids))
        except KeyError:
            return None
        return self._held(order)

    def _held(self, order: np.ndarray) -> tuple[list[dict[str, Any]], np.ndarray, list[np.ndarray | None]]:
        names: list[np.ndarray | None] = [None] * len(order)
        if self.names is not None and self.name_offsets is not None:
            spans = zip(self.name_offsets[order], self.name_offsets[order + 1], strict=True)
            names = [np.asarray(self.names[start:end], np.float32) if end > start else None for start, end in spans]
        return self.rows.take(pa.array(order)).to_pylist(), np.asarray(self.matrix[order], np.float32), names


@dataclass(frozen=True)
class Held:
    """The copy one search reads both of its arms from (None: LanceDB answers them): the same version
    for both, and one read of the table's version rather than one an arm (`Store.held`)."""

    copy: Resident | None


class ResidentCache:
    """The current copy, if the table is small enough and the copy is of its current version; a
    background reload when it is not."""

    def __init__(self, max_rows: int, columns: list[str], ann_min_rows: int = 0) -> None:
        """`ann_min_rows`: a copy of at least this many chunks answers the vector arm from an ANN
        index (memory_ann.py) rather than a full scan; 0: never."""
        self.max_rows = max_rows
        self.columns = columns
        self.ann_min_rows = ann_min_rows
        self._trained: Trained | None = None  # lists the next copy's ANN index may reuse
        self.copy: Resident | None = None
        self.last_load_s = 0.0
        self._loading = False
        self._next_load = 0.0
        self._not_held: tuple[int, int] | None = None  # (table object, version) empty or over the bound
        self._lock = threading.Lock()

    def current(self, table: lancedb.table.Table | None) -> Resident | None:
        """The copy of `table` at its current version, or None (and a reload is scheduled)."""
        if table is None or self.max_rows <= 0:
            return None
        copy = self.copy
        version = table.version
        if copy is not None and copy.source is table and copy.version == version:
            return copy
        self._schedule(table, version)
        return None

    def _schedule(self, table: lancedb.table.Table, version: int) -> None:
        with self._lock:
            if self._loading or time.monotonic() < self._next_load or self._not_held == (id(table), version):
                return
            self._loading = True
        loader = threading.Thread(target=self._load_guarded, args=(table,), name="resident-load", daemon=True)
        with _LOADERS_LOCK:
            _LOADERS.add(loader)
        loader.start()

    def load(self, table: lancedb.table.Table) -> Resident | None:
        """Reads the table into memory now (start-up and tests); None if it is empty, over the
        bound, or moved on while it was read."""
        began = time.monotonic()
        version = table.version
        count = table.count_rows()
        if count == 0 or count > self.max_rows:  # nothing to hold, or more than it may
            self._not_held = (id(table), version)
            self.copy = None  # an old copy is never served again: its version is not current
            return None
        # A copy of another version is never served again: let it go before its successor is read, so
        # a reload's peak is one copy's, not two.
        self.copy = None
        trim()
        named = SEARCH_VECTORS in table.schema.names
        builder = _postings_step(partial(_postings_builder, table))
        wanted = [*self.columns, "vector", *([SEARCH_VECTORS] if named else []), *([LEXICAL] if builder else [])]
        probed = 0 < self.ann_min_rows <= count
        # A copy searched through its ANN index keeps its vectors as float16 for the exact re-scoring of
        # candidates (cosines within ~1e-3 of float32's): half the memory, at 100k chunks 266 -> 133 MB.
        held = np.float16 if probed else np.float32
        matrix = np.empty((count, table.schema.field("vector").type.list_size), dtype=held)
        norms = np.empty(count, dtype=np.float32)  # of the stored float32 vectors
        kept: list[pa.RecordBatch] = []
        ids: list[np.ndarray] = []
        names: list[np.ndarray] = []
        counts: list[np.ndarray] = []
        at = 0
        # In batches, written into the matrix as they come, so the load never holds the vectors twice.
        for batch in table.search().with_row_id(True).select(wanted).limit(None).to_batches(LOAD_BATCH):
            if _EXITING.is_set():  # the process is exiting (see _stop_loads)
                return None
            if batch.column("vector").null_count:  # a run's lexical pass: LanceDB answers until it is embedded
                self._not_held = (id(table), version)
                self.copy = None
                return None
            if at + batch.num_rows > count:  # written to while it was read
                return None
            vectors = vector_matrix(batch.column("vector"))
            matrix[at : at + batch.num_rows] = vectors
            norms[at : at + batch.num_rows] = np.linalg.norm(vectors, axis=1)
            at += batch.num_rows
            if named:  # each list's first vector is the chunk's own, already in the matrix
                flat, spans = _flat_lists(batch.column(SEARCH_VECTORS))
                lengths = np.diff(spans)
                keep = np.ones(len(flat), dtype=bool)
                keep[spans[:-1][lengths > 0]] = False
                names.append(np.array(flat[keep], dtype=held))
                counts.append(np.maximum(lengths - 1, 0))
            if builder is not None:
                builder = _postings_step(partial(builder.add, batch.column(LEXICAL).to_pylist()))
            ids.append(batch.column("_rowid").to_numpy().copy())  # a view would keep the whole batch
            # Copied (a `take` of every row): the columns' buffers alone would keep the whole batch's.
            kept.append(batch.select(self.columns).take(pa.array(np.arange(batch.num_rows))))
        if table.version != version or at != count or _EXITING.is_set():
            return None
        rowids = np.concatenate(ids)
        by_rowid = np.argsort(rowids, kind="stable")
        # One chunk per column: a `take` of 100 rows across 25 batches took ~8 ms, from one 0.1 ms.
        rows = pa.Table.from_batches(kept).combine_chunks()
        del kept
        pa.default_memory_pool().release_unused()  # the batches' copies, held by Arrow's allocator otherwise
        held_names: np.ndarray | None = None
        offsets: np.ndarray | None = None
        owner: np.ndarray | None = None
        if named:
            per_row = np.concatenate(counts)
            offsets = np.concatenate([[0], np.cumsum(per_row)])
            owner = np.repeat(np.arange(len(per_row)), per_row)
            held_names = np.concatenate(names) if names else None
            del names
        fixed_norms = np.where(norms == 0, 1.0, norms)
        ann = None
        if probed:
            ann, self._trained = memory_ann.build(matrix, fixed_norms, held_names, owner, table.name, self._trained)
        copy = Resident(
            source=table,
            version=version,
            rows=rows,
            matrix=matrix,
            norms=fixed_norms,
            rowid_at=rowids,
            rowids=rowids[by_rowid],
            by_rowid=by_rowid,
            positions={chunk_id: i for i, chunk_id in enumerate(rows["id"].to_pylist())},
            names=held_names,
            name_offsets=offsets,
            name_owner=owner,
            ann=ann,
        )
        if builder is not None:
            copy.postings = _postings_step(lambda: _checked(builder.finish(), copy))
        self.copy = copy
        trim()  # the load's Arrow batches go back to the OS, not to glibc's heap
        self.last_load_s = time.monotonic() - began
        return copy

    def _load_guarded(self, table: lancedb.table.Table) -> None:
        try:
            self.load(table)
        except Exception as exc:  # a copy that cannot be made leaves LanceDB answering, as before
            log.warning("the in-memory copy of the index could not be loaded (%s); searches read LanceDB", exc)
        finally:
            with _LOADERS_LOCK:
                _LOADERS.discard(threading.current_thread())
            with self._lock:
                self._loading = False
                self._next_load = time.monotonic() + max(COOL_DOWN_MIN_S, COOL_DOWN_LOADS * self.last_load_s)

    def drop(self, forget_lists: bool = False) -> None:
        """Forget the copy (the table was re-opened, replaced or reset) and, with `forget_lists`
        (another index under the same name: a rebuild, an imported snapshot), the trained lists."""
        self.copy = None
        if forget_lists:
            self._trained = None


def _tokenizer(table: lancedb.table.Table) -> Callable[[str], list[str]]:
    return lambda text: [token.text for token in table.tokenize(text, column=LEXICAL)]


def _postings_step(step: Callable[[], T]) -> T | None:
    """A step of making the postings; None if it failed. The vectors are worth holding without
    them: LanceDB then answers the BM25 arm, as it does for a table its index does not cover."""
    try:
        return step()
    except Exception as exc:
        log.warning("BM25 postings could not be built (%s); LanceDB answers BM25 here", exc)
        return None


def _postings_builder(table: lancedb.table.Table) -> Builder | None:
    """Postings are built only where LanceDB's full-text index covers every row: rows written
    after it are scored apart (over the unindexed rows) until `optimize` folds them in."""
    index = next((i for i in table.list_indices() if i.columns == [LEXICAL]), None)
    if index is None or index.num_unindexed_rows != 0:  # None: not known, so not covered
        return None
    return Builder(_tokenizer(table))


def _checked(postings: Postings, copy: Resident) -> Postings | None:
    """The postings if they score a few queries as LanceDB's index does; else None (LanceDB answers)."""
    table, tokenize = copy.source, _tokenizer(copy.source)
    for probe in postings.probes():
        found = table.search(probe, query_type="fts", fts_columns=LEXICAL).select(["id", SCORE]).limit(20).to_arrow()
        pairs = zip(found["id"].to_pylist(), found[SCORE].to_pylist(), strict=True)
        theirs = [(copy.positions.get(chunk_id), score) for chunk_id, score in pairs]
        if not postings.agrees(tokenize(probe), theirs):
            log.info("BM25 in memory would score %r otherwise than LanceDB's index; LanceDB answers BM25 here", probe)
            return None
    return postings
