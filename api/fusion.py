"""Reciprocal Rank Fusion and the labels that say why a result is there. Pure functions.

RRF sums `weight / (rrf_k + rank)` over the arms that found a chunk. Sums of ranks cannot
be thresholded, so "is this relevant at all" is decided on the cosine similarity instead
(`passes`), with one exception: an exact identifier match is always kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass
class Fused:
    id: str
    score: float
    vector_rank: int | None = None  # 1-based rank in the vector arm, if it found the chunk
    bm25_rank: int | None = None  # 1-based rank in the BM25 arm, if it found the chunk


def rrf(
    vector_ids: Sequence[str],
    lexical_ids: Sequence[str],
    rrf_k: float = 60.0,
    vector_weight: float = 1.0,
    lexical_weight: float = 1.0,
) -> list[Fused]:
    """Fuse two ranked id lists; best first, ties broken by the vector arm's order."""
    fused: dict[str, Fused] = {}
    for rank, chunk_id in enumerate(vector_ids, start=1):
        fused[chunk_id] = Fused(chunk_id, vector_weight / (rrf_k + rank), vector_rank=rank)
    for rank, chunk_id in enumerate(lexical_ids, start=1):
        entry = fused.setdefault(chunk_id, Fused(chunk_id, 0.0))
        entry.score += lexical_weight / (rrf_k + rank)
        entry.bm25_rank = rank
    return sorted(fused.values(), key=lambda f: (-f.score, f.vector_rank or 10**9, f.bm25_rank or 10**9))


def agreement_weight(
    base: float, vector_top_cosine: float | None, lexical_top_cosine: float | None, tau: float, floor: float = 0.0
) -> float:
    """The BM25 arm's weight for one query, scaled down when its best hit is semantically far
    from the vector arm's best (cosine gap over `tau`): that is BM25 matching words, not meaning,
    the failure that drags question-style queries down. `tau` 0 turns it off."""
    if tau <= 0 or vector_top_cosine is None or lexical_top_cosine is None:
        return base
    return base * max(floor, min(1.0, 1.0 - (vector_top_cosine - lexical_top_cosine) / tau))


def label(cosine: float, vector_rank: int | None, bm25_rank: int | None, exact: bool) -> str:
    if exact:
        return "[exact match]"
    if vector_rank is not None and bm25_rank is not None:
        return f"[both {cosine:.3f}]"
    if bm25_rank is not None:
        return f"[keyword {cosine:.3f}]"
    return f"[semantic {cosine:.3f}]"


def lifecycle_label(status: str | None, superseded_by: str | None, date: str | None) -> str:
    """`[superseded → reference/auth.md; 2026-03-01]` for documents hidden by default."""
    if not status:
        return ""
    parts = [status + (f" → {superseded_by}" if superseded_by else "")]
    if date:
        parts.append(date)
    return "[" + "; ".join(parts) + "]"


def is_exact(identifiers: Sequence[str], text: str) -> bool:
    """A code-like query token appears verbatim (case-sensitive) in the chunk."""
    return any(token in text for token in identifiers)


def passes(cosine: float, exact: bool, min_score: float) -> bool:
    return exact or cosine >= min_score


def abstain_message(best: float | None, threshold: float) -> str:
    best_text = f"{best:.2f}" if best is not None else "n/a"
    return f"No relevant results (best score {best_text}, threshold {threshold:.2f})"
