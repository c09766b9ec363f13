"""An in-memory copy of the answering chunks table, for the query path only.

Each LanceDB query carries a fixed cost of a few milliseconds (planning, a scan set-up, Arrow
batches) whatever the table's size: on a 1k-chunk table a flat vector query and a full-text one
took ~6–9 ms each, while the same 1k × 384 dot product in numpy takes microseconds. So a table
small enough to hold (`SEMSEARCH_RESIDENT_ROWS`) is held here as it is in LanceDB at one version:
its result columns as Arrow, its vectors as one float32 matrix (the vector arm: an exact scan),
and its `lexical` column as BM25 postings (the BM25 arm).

The postings are LanceDB's own: each chunk is tokenized by the table's full-text index
(`Table.tokenize`: the same stemming, stop words and folding), and scored with Lance's BM25 (k1
1.2, b 0.75, idf ln(1 + (N − n + ½)/(n + ½)), every query token counted as often as it occurs).
On the indexes compared (`make bench`'s, `make eval`'s) the two scored every match alike,
exactly or within 0.2%. At load the copy asks LanceDB one query and compares; if they differ by
more than 1% (an index that does not cover every row yet, a LanceDB that scores otherwise) the
BM25 arm stays with LanceDB, which then returns ids and scores only. Ties are broken by row order
(LanceDB's order among equal scores is its heap's).

LanceDB stays the store of record. The copy answers only while the table is at the version it was
read at: after a write, a search goes to LanceDB at once (nothing indexed is ever missed) and a
reload starts in the background, at most once per cool-down (four times the last load, at least a
second), so an index run's many writes do not turn into as many reloads. Filters (folders, globs,
exclusions, tags, dates) are evaluated by LanceDB too — once per filter and version, as a row mask
kept with the copy — so each filter has one meaning, not two.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from array import array
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import lancedb
import numpy as np
import pyarrow as pa

from semsearch.engine.filters import TRUE
from semsearch.malloc import trim

log = logging.getLogger("semsearch.api")

MASKS_KEPT = 64  # distinct filters remembered per version (a mask is one byte per row)
COOL_DOWN_MIN_S = 1.0
COOL_DOWN_LOADS = 4  # a reload waits this many times the last load's duration
TOKENIZE_BATCH = 1000  # chunks per tokenize call: one call per chunk cost ~10 x as much
LOAD_BATCH = 4096  # rows per Arrow batch while loading
K1, B = 1.2, 0.75  # Lance's BM25 parameters
SCORE_TOLERANCE = 0.01  # relative; on the indexes compared the two agreed within 0.2%
LEXICAL = "lexical"


class Stale(Exception):
    """The table moved to another version while the copy read from it."""


class Tokens:
    """Texts tokenized by a table's full-text tokenizer, as term ids, a batch of texts per call:
    they are joined by a separator word no text holds, and split again at its token."""

    def __init__(self, table: lancedb.table.Table) -> None:
        self.table = table
        self.separator = "zq" + uuid.uuid4().hex.translate(str.maketrans("0123456789", "ghijklmnop"))
        marker = [t.text for t in table.tokenize(self.separator, column=LEXICAL)]
        if len(marker) != 1:
            raise ValueError("the full-text tokenizer splits the separator word")
        self.marker = marker[0]
        self.terms: dict[str, int] = {}
        self.term_ids, self.doc_ids = array("q"), array("q")
        self.count = 0  # texts added

    def add(self, texts: list[str]) -> None:
        for first in range(0, len(texts), TOKENIZE_BATCH):
            batch = texts[first : first + TOKENIZE_BATCH]
            doc = self.count
            for token in self.table.tokenize(f"\n{self.separator}\n".join(batch), column=LEXICAL):
                if token.text == self.marker:
                    doc += 1
                else:
                    self.term_ids.append(self.terms.setdefault(token.text, len(self.terms)))
                    self.doc_ids.append(doc)
            if doc + 1 != self.count + len(batch):
                raise ValueError("a text held the separator word")
            self.count += len(batch)


@dataclass
class Postings:
    """BM25 over one version's `lexical` column, as Lance's full-text index scores it."""

    terms: dict[str, int]
    starts: np.ndarray  # term t's postings are docs[starts[t]:starts[t + 1]]
    docs: np.ndarray
    tf: np.ndarray  # the term's count in the chunk, per posting
    idf: np.ndarray  # per term
    norms: np.ndarray  # k1 x (1 − b + b x length / average length), per chunk

    @classmethod
    def build(cls, tokens: Tokens) -> Postings:
        n = tokens.count
        term_ids = np.frombuffer(tokens.term_ids, dtype=np.int64)
        doc_ids = np.frombuffer(tokens.doc_ids, dtype=np.int64)
        pairs, counts = np.unique(term_ids * n + doc_ids, return_counts=True)
        starts = np.searchsorted(pairs // n, np.arange(len(tokens.terms) + 1))
        lengths = np.bincount(doc_ids, minlength=n).astype(np.float64)
        average = lengths.sum() / n if n else 1.0
        in_docs = np.diff(starts).astype(np.float64)
        return cls(
            terms=tokens.terms,
            starts=starts,
            docs=(pairs % n).astype(np.int64),
            tf=counts.astype(np.float64),
            idf=np.log((n - in_docs + 0.5) / (in_docs + 0.5) + 1.0),
            norms=K1 * (1 - B + B * lengths / (average or 1.0)),
        )

    def probe(self) -> str:
        """A query to check the scores by: the eight rarest terms of the chunk with the most terms."""
        if not len(self.docs):
            return ""
        chunk = int(np.argmax(np.bincount(self.docs)))
        term_of = np.repeat(np.arange(len(self.terms)), np.diff(self.starts))  # each posting's term
        held = term_of[self.docs == chunk]
        names = list(self.terms)
        return " ".join(names[t] for t in held[np.argsort(-self.idf[held], kind="stable")][:8])

    def scores(self, tokens: list[str], size: int) -> np.ndarray:
        scores = np.zeros(size)
        for token in tokens:  # a repeated token counts again, as in Lance
            term = self.terms.get(token)
            if term is None:
                continue
            start, end = self.starts[term], self.starts[term + 1]
            docs, tf = self.docs[start:end], self.tf[start:end]
            scores[docs] += self.idf[term] * (K1 + 1) * tf / (tf + self.norms[docs])
        return scores


@dataclass
class Resident:
    """One version of the chunks table, in memory."""

    source: lancedb.table.Table  # the table object it was read from (a re-open is another table)
    version: int
    rows: pa.Table  # the result columns
    matrix: np.ndarray  # unit-length float32 vectors, one row per chunk
    rowids: np.ndarray  # LanceDB's row ids, sorted, so a filter's rows map to positions…
    by_rowid: np.ndarray  # …through this: the position of the i-th smallest row id
    positions: dict[str, int]  # chunk id -> position
    postings: Postings | None  # None: the BM25 arm asks LanceDB
    _masks: OrderedDict[str, np.ndarray | None] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def nbytes(self) -> int:
        held = self.rows.nbytes + self.matrix.nbytes + self.rowids.nbytes + self.by_rowid.nbytes
        if self.postings is not None:
            p = self.postings
            held += p.starts.nbytes + p.docs.nbytes + p.tf.nbytes + p.idf.nbytes + p.norms.nbytes
        return int(held)

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

    def _top(self, scores: np.ndarray, limit: int, where: str, positive: bool = False) -> np.ndarray:
        """Positions of the `limit` best scores the filter keeps, best first, ties in row order."""
        kept = self.mask(where)
        candidates = np.arange(len(scores)) if kept is None else np.flatnonzero(kept)
        if positive:
            candidates = candidates[scores[candidates] > 0]
        if len(candidates) > limit:
            threshold = np.partition(scores[candidates], len(candidates) - limit)[len(candidates) - limit]
            candidates = candidates[scores[candidates] >= threshold]  # ties at the cut stay
        order = np.lexsort((candidates, -scores[candidates]))
        return candidates[order][:limit]

    def nearest(self, vector: np.ndarray, limit: int, where: str) -> list[dict[str, Any]]:
        """The `limit` chunks nearest `vector` by cosine among those the filter keeps — exact, as a
        flat scan is — with each row's `cosine`."""
        query = vector.astype(np.float32)
        query = query / (np.linalg.norm(query) or 1.0)
        scores = self.matrix @ query
        top = self._top(scores, limit, where)
        rows = self.rows.take(pa.array(top)).to_pylist()
        return [dict(row, cosine=float(scores[i])) for row, i in zip(rows, top, strict=True)]

    def bm25(self, query: str, limit: int, where: str) -> list[dict[str, Any]] | None:
        """The `limit` best BM25 matches among those the filter keeps, each with `bm25` and its
        `vector`; None when the copy has no postings (LanceDB answers)."""
        if self.postings is None:
            return None
        tokens = [t.text for t in self.source.tokenize(query, column=LEXICAL)]
        scores = self.postings.scores(tokens, len(self.positions))
        top = self._top(scores, limit, where, positive=True)
        rows = self.rows.take(pa.array(top)).to_pylist()
        for row, i in zip(rows, top, strict=True):
            row["vector"], row["bm25"] = self.matrix[i], float(scores[i])
        return rows

    def lookup(self, ids: list[str]) -> tuple[list[dict[str, Any]], np.ndarray] | None:
        """The rows of these chunk ids and their vectors; None if one is not in this copy."""
        try:
            order = np.fromiter((self.positions[i] for i in ids), dtype=np.int64, count=len(ids))
        except KeyError:
            return None
        return self.rows.take(pa.array(order)).to_pylist(), self.matrix[order]


class ResidentCache:
    """The current copy, if the table is small enough and the copy is of its current version; a
    background reload when it is not."""

    def __init__(self, max_rows: int, columns: list[str]) -> None:
        self.max_rows = max_rows
        self.columns = columns
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
        threading.Thread(target=self._load_guarded, args=(table,), name="resident-load", daemon=True).start()

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
        index = next((i for i in table.list_indices() if i.columns == [LEXICAL]), None)
        # Rows the full-text index has not taken in yet LanceDB scores apart: its index answers.
        tokens = Tokens(table) if index is not None and not index.num_unindexed_rows else None
        wanted = [*self.columns, "vector", *([LEXICAL] if tokens is not None else [])]
        kept: list[pa.RecordBatch] = []
        parts: list[np.ndarray] = []
        ids: list[np.ndarray] = []
        # In batches, so the load never holds the whole table twice (nor its lexical column at all).
        for batch in table.search().with_row_id(True).select(wanted).limit(None).to_batches(LOAD_BATCH):
            vectors = batch.column("vector")
            parts.append(np.array(vectors.flatten().to_numpy().reshape(len(vectors), -1), dtype=np.float32))
            ids.append(batch.column("_rowid").to_numpy())
            if tokens is not None:
                tokens.add(batch.column(LEXICAL).to_pylist())
            kept.append(pa.RecordBatch.from_arrays([batch.column(c) for c in self.columns], names=self.columns))
        if table.version != version:
            return None
        matrix = np.concatenate(parts) if len(parts) > 1 else parts[0]
        del parts
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        matrix /= np.where(norms == 0, 1.0, norms)
        rowids = np.concatenate(ids)
        by_rowid = np.argsort(rowids, kind="stable")
        rows = pa.Table.from_batches(kept)
        copy = Resident(
            source=table,
            version=version,
            rows=rows,
            matrix=matrix,
            rowids=rowids[by_rowid],
            by_rowid=by_rowid,
            positions={chunk_id: i for i, chunk_id in enumerate(rows["id"].to_pylist())},
            postings=None,
        )
        if tokens is not None:
            copy.postings = self._checked(copy, Postings.build(tokens))
            del tokens
        trim()  # the load's Arrow batches and token objects go back to the OS, not to the heap
        self.copy = copy
        self.last_load_s = time.monotonic() - began
        return copy

    def _checked(self, copy: Resident, postings: Postings) -> Postings | None:
        """The postings if they score as LanceDB's index does on one query; else None."""
        table = copy.source
        query = postings.probe()
        if not query:
            return postings
        theirs = table.search(query, query_type="fts", fts_columns=LEXICAL).select(["id"]).limit(20).to_arrow()
        ours = postings.scores([t.text for t in table.tokenize(query, column=LEXICAL)], len(copy.positions))
        for chunk_id, score in zip(theirs["id"].to_pylist(), theirs["_score"].to_pylist(), strict=True):
            position = copy.positions.get(chunk_id)
            if position is None or not math.isclose(ours[position], score, rel_tol=SCORE_TOLERANCE):
                log.info("BM25 in memory would score otherwise than LanceDB's index here; LanceDB answers it")
                return None
        return postings

    def _load_guarded(self, table: lancedb.table.Table) -> None:
        try:
            self.load(table)
        except Exception as exc:  # a copy that cannot be made leaves LanceDB answering, as before
            log.warning("the in-memory copy of the index could not be loaded (%s); searches read LanceDB", exc)
        finally:
            with self._lock:
                self._loading = False
                self._next_load = time.monotonic() + max(COOL_DOWN_MIN_S, COOL_DOWN_LOADS * self.last_load_s)

    def drop(self) -> None:
        """Forget the copy (the table was replaced or reset)."""
        self.copy = None
