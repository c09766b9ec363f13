"""BM25 over the in-memory copy, scoring as LanceDB's full-text index scores.

LanceDB's full-text query costs a few milliseconds of fixed set-up however small the table, and
it runs beside the query's embedding on the same cores: each slowed the other about twofold
(docs/benchmarks.md). Scoring postings held in memory is a few array operations instead.

The copy's BM25 must not be a second meaning of BM25: a search answered before the copy loaded (by
LanceDB) and after (from here) must find the same chunks in the same order. So the postings are
LanceDB's own terms — every chunk's `lexical` text tokenized by the table's full-text tokenizer
(`Table.tokenize`: the same splitting, stemming, stop words and folding), a batch of chunks per
call — scored with Lance's formula (k1 1.2, b 0.75, idf ln(1 + (N − n + ½)/(n + ½)), a repeated
query token counted again; a chunk with no token at all — `]`, a line of stop words — is not in
LanceDB's chunk count or mean length, so not in ours). They are built only where LanceDB's index
covers every row, since rows written after it are scored apart until the next `optimize` folds them
in, and checked at load against LanceDB's own answers to a few queries; any difference and LanceDB
keeps answering. Equal scores rank by chunk id on both paths (`by_score`): LanceDB's own order among
them is its heap's, and so is which of them it returns at the cut (`Store._fts` asks for more).
"""

from __future__ import annotations

import math
import uuid
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

K1, B = 1.2, 0.75  # Lance's BM25 parameters
# Chunks per tokenize call: one call a chunk cost ~10 x as much; 1,000 a call held ~50 MB more at
# once at 100k chunks (the tokens of a call are Python objects until they are counted).
TOKENIZE_BATCH = 250
SCORE_TOLERANCE = 1e-4  # relative; the two agree within 3e-7 (make bench's 100k table)
PROBES = 6  # queries checked against LanceDB at load


def by_score(rows: Sequence[Any], score: Callable[[Any], float], chunk_id: Callable[[Any], str]) -> list[Any]:
    """Best score first, equal scores by chunk id: the one order of BM25's answers on both paths."""
    return sorted(rows, key=lambda row: (-score(row), chunk_id(row)))


@dataclass
class Postings:
    """One version's `lexical` column as term -> (chunk positions, each one's share of a score)."""

    terms: dict[str, int]
    starts: np.ndarray  # term t's postings are docs[starts[t]:starts[t + 1]]
    docs: np.ndarray  # chunk positions, int32
    weights: np.ndarray  # what the posting adds to its chunk's score: idf x (k1 + 1) x tf / (tf + norm)
    size: int  # chunks

    @property
    def nbytes(self) -> int:
        arrays = (self.starts, self.docs, self.weights)
        return int(sum(a.nbytes for a in arrays) + 80 * len(self.terms))  # ~80 bytes a term's dict entry

    @classmethod
    def from_pairs(
        cls, terms: dict[str, int], parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]], lengths: np.ndarray
    ) -> Postings:
        """From each batch's (term, chunk, count) triples; `parts` is emptied as it is read (a 100k-chunk
        table has over a million postings: float32 and in place, the build's peak stays near their size)."""
        term_of = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int32)
        per_term = np.bincount(term_of, minlength=len(terms))
        starts = np.concatenate([[0], np.cumsum(per_term)])
        order = np.argsort(term_of, kind="stable")  # batches come in position order: docs stay ascending
        del term_of
        docs = np.concatenate([p[1] for p in parts])[order] if parts else np.zeros(0, np.int32)
        tf = np.concatenate([p[2] for p in parts])[order] if parts else np.zeros(0, np.float32)
        del order
        parts.clear()
        n = int(np.count_nonzero(lengths))  # a chunk without a token (`]`, `"""`) is not in Lance's index
        average = float(lengths.sum()) / n if n else 1.0
        idf = np.log((n - per_term + 0.5) / (per_term + 0.5) + 1.0).astype(np.float32)
        norms = (K1 * (1 - B + B * lengths / (average or 1.0))).astype(np.float32)
        # Each posting's share of a score depends on nothing in the query: idf x (k1 + 1) x tf / (tf + norm),
        # computed once, here.
        weights = norms[docs]
        weights += tf
        np.divide(tf, weights, out=weights)
        del tf
        weights *= np.repeat(idf * (K1 + 1), per_term)
        return cls(terms=terms, starts=starts, docs=docs, weights=weights, size=len(lengths))

    def scores(self, tokens: list[str]) -> np.ndarray:
        """Every chunk's BM25 score for a tokenized query (0 where no token occurs)."""
        spans = [
            (self.starts[t], self.starts[t + 1]) for t in (self.terms.get(token) for token in tokens) if t is not None
        ]
        if not spans:
            return np.zeros(self.size, dtype=np.float32)
        # A repeated token counts again, as in Lance.
        docs = np.concatenate([self.docs[start:end] for start, end in spans])
        weights = np.concatenate([self.weights[start:end] for start, end in spans])
        # LanceDB's scores are float32: equal ones stay equal.
        return np.bincount(docs, weights=weights, minlength=self.size).astype(np.float32)

    def probes(self) -> list[str]:
        """Queries to check the scores by: the rarer terms of a few chunks spread over the table, and
        the commonest term."""
        if not self.size or not self.terms:
            return []
        names = list(self.terms)
        in_docs = np.diff(self.starts)
        owner = np.repeat(np.arange(len(names)), in_docs)
        found: list[str] = []
        for chunk in np.linspace(0, self.size - 1, num=min(PROBES - 1, self.size), dtype=np.int64):
            held = owner[self.docs == chunk]
            rare = sorted(held.tolist(), key=lambda t: (in_docs[t], names[t]))[:4]
            if rare:
                found.append(" ".join(names[t] for t in rare))
        found.append(names[int(np.argmax(in_docs))])
        return found

    def agrees(self, tokens: list[str], theirs: list[tuple[int | None, float]]) -> bool:
        """Whether LanceDB's answer (position and score pairs; None: a chunk not held) is what these
        postings score for the same query's tokens."""
        ours = self.scores(tokens)
        return all(
            position is not None and math.isclose(float(ours[position]), score, rel_tol=SCORE_TOLERANCE)
            for position, score in theirs
        )


class Builder:
    """Postings made batch by batch as a load reads the table (`add`, then `finish`). `tokenize` is
    the table's full-text tokenizer; a batch goes through it as one text, its chunks joined by a
    separator word no chunk holds, and is split again at that word's token (one call a chunk cost
    ~10 x as much)."""

    def __init__(self, tokenize: Callable[[str], Iterable[str]]) -> None:
        self.tokenize = tokenize
        self.separator = "zq" + uuid.uuid4().hex.translate(str.maketrans("0123456789", "ghijklmnop"))
        marker = list(tokenize(self.separator))
        if len(marker) != 1:
            raise ValueError("the full-text tokenizer splits the separator word")
        self.marker = marker[0]
        self.terms: dict[str, int] = {}
        self.parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.lengths: list[np.ndarray] = []
        self.count = 0

    def add(self, texts: list[str]) -> Builder:
        """The next chunks, in position order."""
        for start in range(0, len(texts), TOKENIZE_BATCH):
            self._add(texts[start : start + TOKENIZE_BATCH])
        return self

    def _add(self, texts: list[str]) -> None:
        terms, marker = self.terms, self.marker
        term_ids, doc_ids = array("i"), array("i")
        doc = 0
        for token in self.tokenize(f"\n{self.separator}\n".join(texts)):
            if token == marker:
                doc += 1
            else:
                term_ids.append(terms.setdefault(token, len(terms)))
                doc_ids.append(doc)
        n = len(texts)
        if doc + 1 != n:
            raise ValueError("a chunk held the separator word")
        local = np.frombuffer(doc_ids, dtype=np.int32).astype(np.int64)
        keys = np.frombuffer(term_ids, dtype=np.int32).astype(np.int64) * n + local
        pairs, counts = np.unique(keys, return_counts=True)
        # Held as int32 and float32 until the end: a 100k-chunk table has a few million postings.
        term_of, doc_of = (pairs // n).astype(np.int32), (pairs % n + self.count).astype(np.int32)
        self.parts.append((term_of, doc_of, counts.astype(np.float32)))
        self.lengths.append(np.bincount(local, minlength=n))
        self.count += n

    def finish(self) -> Postings:
        lengths = np.concatenate(self.lengths) if self.lengths else np.zeros(0, np.int64)
        return Postings.from_pairs(self.terms, self.parts, lengths)
