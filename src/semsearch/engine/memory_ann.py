"""The in-memory copy's ANN index: a large copy's vectors (each chunk's own and its definitions')
in a faiss IVF index of 8-bit codes, probed for candidates that are then scored exactly from the
copy's float32 vectors, so every cosine a search returns is the flat scan's.

Why: at 100k chunks (173k vectors with the definitions') an exact scan of the copy took ~30 ms a
query and LanceDB's IVF_SQ query ~40 ms, most of it LanceDB's fixed per-query work; probing an
eighth of ~1,000 lists of 8-bit codes takes ~1–2 ms. Recall@10 against the exact scan, real
queries embedded by the real model on `make bench`'s 100k table and prefixes of it (25k, 60k
rows): 0.99–1.0 with these proportions; `make bench` measures it through the API at every size.

The index is derived from the copy and dies with it. Its lists (k-means centroids) are trained once
and reused by the next copies of the same table while the number of vectors stays within a factor
of two, so a reload after a write costs the assignment of the vectors, not a training; a rebuild,
a model switch (another table) or an imported snapshot trains them anew.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

LISTS_PER_SQRT = 2.5  # lists = this × √vectors: ~1,000 at 173k vectors
PROBED_SHARE = 8  # a query probes 1/8 of the lists (1/16: recall 0.977–0.99 on the same sets)
# …and at least this many: a small copy has few lists, so an eighth of them missed more of a query's
# neighbours (make bench's 10k table, 337 lists, its real queries: recall@10 against the flat scan
# 0.992 at 43 lists probed, 0.996 at 64, 1.0 at 128), while probing more of them costs little (a
# list is ~50 vectors). Checked on held-out data, SciFact's 11k chunks (make eval, test split):
# vector Recall@100 0.933 and hybrid nDCG@10 0.739 as with the flat scan; 0.916 and 0.734 at an eighth.
MIN_PROBES = 128
TRAIN_PER_LIST = 40  # k-means sample: vectors per list (faiss warns under 39)
CANDIDATES_PER_RESULT = 4  # vectors asked per chunk wanted: a chunk's definitions share its neighbourhood
RETRAIN_FACTOR = 2.0  # lists are trained again once the vectors grew or shrank by this factor
ADD_BATCH = 16_384  # rows normalised and added at a time, so a build never holds the matrix twice

_trained_lock = threading.Lock()


@dataclass
class Trained:
    """Lists trained on a copy's vectors, reusable by the next copy of about the same size."""

    index: Any  # an empty faiss.IndexIVFScalarQuantizer, trained
    vectors: int  # how many vectors it was trained for
    table: str  # the table it was trained on: a model switch answers from another

    def fits(self, vectors: int, dimension: int, table: str) -> bool:
        return (
            table == self.table
            and dimension == self.index.d
            and self.vectors / RETRAIN_FACTOR <= vectors <= self.vectors * RETRAIN_FACTOR
        )


class MemoryAnn:
    """Candidate chunks for a query, from an IVF index over a copy's vectors: ids below `rows` are
    chunks' own vectors (position i), the others definitions' (owner `name_owner[id - rows]`)."""

    def __init__(self, index: Any, rows: int, name_owner: np.ndarray | None) -> None:
        self.index = index
        self.rows = rows
        self.name_owner = name_owner if name_owner is not None else np.empty(0, dtype=np.int64)
        self.lists = int(index.nlist)
        self.probes = min(self.lists, max(MIN_PROBES, math.ceil(self.lists / PROBED_SHARE)))

    @property
    def nbytes(self) -> int:
        return int(self.index.sa_code_size() * self.index.ntotal + 8 * self.index.ntotal)

    def candidates(self, unit_query: np.ndarray, limit: int, kept: np.ndarray | None, names: bool) -> np.ndarray | None:
        """Positions of chunks that hold the `limit` nearest (unordered, usually more), or None when a
        filter keeps so few rows that probing as many of them as an unfiltered query meets would take
        half the lists: an exact scan of its rows is then the better answer."""
        import faiss

        probes, keep_bits = self.probes, None
        if kept is not None or not names:
            own = np.ones(self.rows, dtype=bool) if kept is None else kept
            share = max(int(own.sum()), 1) / self.rows
            probes = math.ceil(self.probes / share)
            if probes * 2 > self.lists:
                return None
            named = own[self.name_owner] if names else np.zeros(len(self.name_owner), dtype=bool)
            keep_bits = np.packbits(np.concatenate([own, named]), bitorder="little")
        selector = None if keep_bits is None else faiss.IDSelectorBitmap(self.index.ntotal, faiss.swig_ptr(keep_bits))
        wanted = min(self.index.ntotal, limit * CANDIDATES_PER_RESULT)
        owners = np.empty(0, dtype=np.int64)
        params = faiss.SearchParametersIVF()
        params.sel = selector
        for params.nprobe in (probes, self.lists):  # fewer chunks than asked for: every list, once
            _, found = self.index.search(unit_query.reshape(1, -1), wanted, params=params)
            ids = found[0][found[0] >= 0]
            named = ids >= self.rows
            ids[named] = self.name_owner[ids[named] - self.rows]
            owners = np.unique(ids)
            if len(owners) >= limit:
                break
        return owners


def build(
    matrix: np.ndarray,
    norms: np.ndarray,
    names: np.ndarray | None,
    name_owner: np.ndarray | None,
    table: str,
    reuse: Trained | None,
) -> tuple[MemoryAnn, Trained]:
    """An index over the copy's vectors: own ones divided by their lengths (the cosine the flat scan
    computes), definitions' as stored (unit length, as the flat scan takes them); the lists from
    `reuse` when they were trained on this table for about this many vectors, else trained on a
    sample."""
    import faiss

    rows, dimension = matrix.shape
    total = rows + (0 if names is None else len(names))
    trained = reuse if reuse is not None and reuse.fits(total, dimension, table) else None
    if trained is None:
        lists = max(1, int(LISTS_PER_SQRT * math.sqrt(total)))
        sample = np.sort(np.random.default_rng(0).choice(total, min(total, lists * TRAIN_PER_LIST), replace=False))
        own = sample[sample < rows]
        vectors = [matrix[own] / norms[own, None]]
        if names is not None:
            vectors.append(names[sample[sample >= rows] - rows])
        quantizer = faiss.IndexFlatIP(dimension)
        empty = faiss.IndexIVFScalarQuantizer(
            quantizer, dimension, lists, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT
        )
        empty.train(np.ascontiguousarray(np.concatenate(vectors), dtype=np.float32))
        trained = Trained(empty, total, table)
    with _trained_lock:  # a clone of the trained, empty index: the template stays empty
        index = faiss.clone_index(trained.index)
    for start in range(0, rows, ADD_BATCH):
        part = matrix[start : start + ADD_BATCH] / norms[start : start + ADD_BATCH, None]
        index.add(np.ascontiguousarray(part, dtype=np.float32))
    if names is not None:
        for start in range(0, len(names), ADD_BATCH):
            index.add(np.ascontiguousarray(names[start : start + ADD_BATCH], dtype=np.float32))
    return MemoryAnn(index, rows, name_owner), trained
