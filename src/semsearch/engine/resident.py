"""An in-memory copy of the answering chunks table, for the query path only.

Each LanceDB query carries a fixed cost of a few milliseconds (planning, a scan set-up, Arrow
batches) whatever the table's size: on a 1k-chunk table a flat vector query took ~6–9 ms and a
full-text one ~8 ms, while the same 1k × 384 dot product in numpy takes microseconds. So a table
small enough to hold (`SEMSEARCH_RESIDENT_ROWS`) is held here as it is in LanceDB at one version —
its result columns as Arrow, its vectors as one float32 matrix — and the vector arm is an exact
scan of that matrix; the BM25 arm still asks LanceDB's full-text index, but for ids and scores
only, and takes the rest of each row from here.

LanceDB stays the store of record. The copy is derived from one table version and answers only
while the table is at that version: after a write, a search goes to LanceDB at once (nothing
indexed is ever missed) and a reload starts in the background, at most once per cool-down (four
times the last load's duration, at least a second), so an index run's many writes do not turn
into as many reloads. Filters (folders, globs, exclusions, tags, dates) are evaluated by LanceDB
too — once per filter and version, as a row mask kept with the copy — so there is one meaning of
each filter, not two.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import lancedb
import numpy as np
import pyarrow as pa

log = logging.getLogger("semsearch.api")

MASKS_KEPT = 64  # distinct filters remembered per version (a mask is one byte per row)
COOL_DOWN_MIN_S = 1.0
COOL_DOWN_LOADS = 4  # a reload waits this many times the last load's duration


@dataclass
class Resident:
    """One version of the chunks table, in memory."""

    source: lancedb.table.Table  # the table object it was read from (a re-open is another table)
    version: int
    rows: pa.Table  # the result columns, in `_rowid` order
    matrix: np.ndarray  # unit-length float32 vectors, one row per chunk
    rowids: np.ndarray  # LanceDB's row ids, sorted, so a filter's rows map to positions
    positions: dict[str, int]  # chunk id -> row
    _masks: OrderedDict[str, np.ndarray | None] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def nbytes(self) -> int:
        return int(self.rows.nbytes + self.matrix.nbytes + self.rowids.nbytes)

    def mask(self, where: str) -> np.ndarray | None:
        """The rows a filter keeps (None: every row), from LanceDB once per filter and version.
        Raises Stale when the table moved on while it was read."""
        with self._lock:
            if where in self._masks:
                self._masks.move_to_end(where)
                return self._masks[where]
        if where == "true":
            kept: np.ndarray | None = None
        else:
            found = self.source.search().where(where).with_row_id(True).select(["id"]).limit(None).to_arrow()
            if self.source.version != self.version:
                raise Stale
            kept = np.zeros(len(self.rowids), dtype=bool)
            kept[np.searchsorted(self.rowids, found["_rowid"].to_numpy())] = True
        with self._lock:
            self._masks[where] = kept
            while len(self._masks) > MASKS_KEPT:
                self._masks.popitem(last=False)
        return kept

    def nearest(self, vector: np.ndarray, limit: int, where: str) -> list[dict[str, Any]]:
        """The `limit` chunks nearest `vector` by cosine among those the filter keeps — exact, as a
        flat scan is, with each row's `cosine`."""
        kept = self.mask(where)
        query = vector.astype(np.float32)
        query = query / (np.linalg.norm(query) or 1.0)
        scores = self.matrix @ query
        candidates = np.arange(len(scores)) if kept is None else np.flatnonzero(kept)
        if len(candidates) > limit:
            top = np.argpartition(-scores[candidates], limit - 1)[:limit]
            candidates = candidates[top]
        order = candidates[np.argsort(-scores[candidates], kind="stable")]
        rows = self.rows.take(pa.array(order)).to_pylist()
        return [dict(row, cosine=float(scores[i])) for row, i in zip(rows, order, strict=True)]

    def lookup(self, ids: list[str]) -> tuple[list[dict[str, Any]], np.ndarray] | None:
        """The rows of these chunk ids and their vectors; None if one is not in this copy."""
        try:
            order = np.fromiter((self.positions[i] for i in ids), dtype=np.int64, count=len(ids))
        except KeyError:
            return None
        return self.rows.take(pa.array(order)).to_pylist(), self.matrix[order]


class Stale(Exception):
    """The table moved to another version while the copy read from it."""


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
        self._too_big: tuple[int, int] | None = None  # (table object, version) over the bound
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
            if self._loading or time.monotonic() < self._next_load or self._too_big == (id(table), version):
                return
            self._loading = True
        threading.Thread(target=self._load_guarded, args=(table,), name="resident-load", daemon=True).start()

    def load(self, table: lancedb.table.Table) -> Resident | None:
        """Reads the table into memory now (start-up and tests); None if it is over the bound or
        moved on while it was read."""
        began = time.monotonic()
        version = table.version
        if table.count_rows() > self.max_rows:
            self._too_big = (id(table), version)
            self.copy = None  # an old copy is never served again: its version is not current
            return None
        data = table.search().with_row_id(True).select([*self.columns, "vector"]).limit(None).to_arrow()
        if table.version != version:
            return None
        order = np.argsort(data["_rowid"].to_numpy(), kind="stable")
        data = data.take(pa.array(order))
        column = data["vector"].combine_chunks()
        matrix = column.flatten().to_numpy().reshape(len(column), -1).astype(np.float32, copy=True)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        matrix /= np.where(norms == 0, 1.0, norms)
        ids = data["id"].to_pylist()
        copy = Resident(
            source=table,
            version=version,
            rows=data.select(self.columns).combine_chunks(),
            matrix=matrix,
            rowids=data["_rowid"].to_numpy(),
            positions={chunk_id: i for i, chunk_id in enumerate(ids)},
        )
        self.copy = copy
        self.last_load_s = time.monotonic() - began
        return copy

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
