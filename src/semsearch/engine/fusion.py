"""The fusion of the two arms, and the labels that say why a result is there. Pure functions.

Two fusions, one chosen by `make eval` (`FusionParams.fusion`): a convex combination of the arms'
scores, each arm's rescaled per query (`convex`), or Reciprocal Rank Fusion, which sums
`weight / (rrf_k + rank)` over the arms that found a chunk (`rrf`). Neither sum can be
thresholded, so "is this relevant at all" is decided on the cosine similarity instead (`passes`),
with two exceptions: an exact identifier match, and a chunk that quotes the query, are always kept.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from semsearch.config import Settings
from semsearch.engine.filters import path_multiplier
from semsearch.engine.lexical import identifiers_in
from semsearch.ranking import FusionParams


@dataclass
class Fused:
    id: str
    score: float
    vector_rank: int | None = None  # 1-based rank in the vector arm, if it found the chunk
    bm25_rank: int | None = None  # 1-based rank in the BM25 arm, if it found the chunk
    boost: float = 1.0  # the path boost multiplied into `score`


def rrf(
    vector_ids: Sequence[str],
    lexical_ids: Sequence[str],
    rrf_k: float = 60.0,
    vector_weight: float = 1.0,
    lexical_weight: float = 1.0,
    lexical_only_weight: float = 1.0,
) -> list[Fused]:
    """Fuse two ranked id lists; best first, ties broken by the vector arm's order.
    `lexical_only_weight` scales BM25's share for chunks the vector arm did not find at all."""
    fused: dict[str, Fused] = {}
    for rank, chunk_id in enumerate(vector_ids, start=1):
        fused[chunk_id] = Fused(chunk_id, vector_weight / (rrf_k + rank), vector_rank=rank)
    for rank, chunk_id in enumerate(lexical_ids, start=1):
        entry = fused.setdefault(chunk_id, Fused(chunk_id, 0.0))
        share = lexical_weight / (rrf_k + rank)
        entry.score += share if entry.vector_rank is not None else share * lexical_only_weight
        entry.bm25_rank = rank
    return sorted(fused.values(), key=lambda f: (-f.score, f.vector_rank or 10**9, f.bm25_rank or 10**9))


# Each arm's scores are rescaled so that its best candidate is 1 and its CONVEX_DEPTH-th is 0: a
# fixed depth, not the pool's last, so a chunk's fused score (and the order) does not change with
# the k asked for (the pool is max(4 k, 50) deep). An arm with fewer candidates (a small folder, a
# narrow filter, a rare word) rescales from 0 — BM25's score for a chunk without the words, and a
# cosine at or under it is unrelated — so its last find is not made worthless for being last.
# Candidates under the floor count 0: every fused score is in [0, 1], and a path boost under 1
# always lowers it.
CONVEX_DEPTH = 50


def rescaled(candidates: Sequence[Candidate]) -> dict[str, float]:
    """One arm's scores on the scale `convex` adds: its best 1, its CONVEX_DEPTH-th (or 0) 0."""
    if not candidates:
        return {}
    scores = sorted((c.score for c in candidates), reverse=True)
    best = scores[0]
    floor = scores[CONVEX_DEPTH - 1] if len(scores) >= CONVEX_DEPTH else 0.0
    if best <= floor:  # all alike, or nothing above 0: each is as good as the best
        return {c.id: 1.0 for c in candidates}
    return {c.id: max(0.0, (c.score - floor) / (best - floor)) for c in candidates}


def convex(vector: Sequence[Candidate], lexical: Sequence[Candidate], vector_share: float) -> list[Fused]:
    """Fuse the arms by score: `vector_share` x the rescaled cosine + the rest x the rescaled BM25
    score; an arm that did not find a chunk adds nothing. Unlike RRF, how far apart the scores
    are counts: a chunk one arm finds far ahead of its runners-up is not overtaken by chunks both
    arms rank middling. Best first; ties broken by the vector arm's order, then BM25's."""
    fused: dict[str, Fused] = {}
    for rank, (chunk_id, score) in enumerate(rescaled(vector).items(), start=1):
        fused[chunk_id] = Fused(chunk_id, vector_share * score, vector_rank=rank)
    for rank, (chunk_id, score) in enumerate(rescaled(lexical).items(), start=1):
        entry = fused.setdefault(chunk_id, Fused(chunk_id, 0.0))
        entry.score += (1.0 - vector_share) * score
        entry.bm25_rank = rank
    return sorted(fused.values(), key=lambda f: (-f.score, f.vector_rank or 10**9, f.bm25_rank or 10**9))


def params_from(settings: Settings) -> FusionParams:
    """The fusion parameters a service was configured with (each defaults to the shipped one)."""
    return FusionParams(
        rrf_k=settings.rrf_k,
        vector_weight=settings.vector_weight,
        lexical_weight=settings.lexical_weight,
        lexical_gain=settings.lexical_decisiveness_gain,
        vector_gain=settings.vector_decisiveness_gain,
        bias=settings.arm_balance_bias,
        bound=settings.arm_balance_bound,
        question_bias=settings.question_lexical_bias,
        lexical_only_weight=settings.lexical_only_weight,
        fusion=settings.fusion,
        vector_share=settings.vector_share,
        question_vector_share=settings.question_vector_share,
    )


@dataclass(frozen=True)
class Candidate:
    """One arm's find: a chunk id and that arm's score for it (cosine, or BM25)."""

    id: str
    score: float


def fuse(
    vector: Sequence[Candidate],
    lexical: Sequence[Candidate],
    params: FusionParams,
    balanced: bool = True,
    question: bool = False,
) -> tuple[list[Fused], float]:
    """The one fusion: each arm's candidates, best first, into one ranking (and the BM25 weight this
    query got). `balanced`: the per-query arm balance, as in hybrid mode; `question`: the query
    is a question in words (`is_question`), which moves the balance by `question_bias` (by RRF),
    or takes `question_vector_share` (by score). The BM25 weight returned is its RRF weight, or
    its share of a convex combination."""
    if params.fusion == "convex":
        share = params.question_vector_share if question and balanced else params.vector_share
        return convex(vector, lexical, share), 1.0 - share
    lexical_weight = params.lexical_weight
    lexical_only = 1.0
    if balanced:
        lexical_weight *= lexical_balance(
            [c.score for c in lexical],
            [c.score for c in vector],
            params.lexical_gain,
            params.vector_gain,
            params.bias + (params.question_bias if question else 0.0),
            params.bound,
        )
        lexical_only = params.lexical_only_weight
    ids = [c.id for c in vector], [c.id for c in lexical]
    fused = rrf(*ids, params.rrf_k, params.vector_weight, lexical_weight, lexical_only)
    return fused, lexical_weight


def boost(fused: list[Fused], multiplier: Callable[[str], float]) -> list[Fused]:
    """Path boosts, after fusion: each score times its chunk's multiplier, best first again (a tie
    keeps the fused order). `multiplier` maps a chunk id to its path's product of boosts."""
    for f in fused:
        f.boost = multiplier(f.id)
        f.score *= f.boost
    return sorted(fused, key=lambda f: -f.score)


@dataclass(frozen=True)
class Ranking:
    """One query's order, and what the response reports of how it was made."""

    fused: list[Fused]
    lexical_weight: float  # the BM25 weight this query got
    exact: frozenset[str]  # chunk ids whose text holds every identifier the query names
    question: bool
    quoted: frozenset[str] = frozenset()  # chunk ids whose text quotes the query (`quotes`)


def rank(
    vector: Sequence[Candidate],
    lexical: Sequence[Candidate],
    params: FusionParams,
    *,
    query: str,
    hybrid: bool,
    path_of: Callable[[str], str],
    boosts: Mapping[str, float] | None,
    text_of: Callable[[str], str] | None = None,
) -> Ranking:
    """The one ranking path, served by `retrieval.search` and replayed by `make eval`: both arms
    fused (balanced per query in hybrid mode), path boosts multiplied in, and for a query that is
    just identifiers the exact matches first; in hybrid mode, chunks that quote a statement of
    several words (`quotes`) first. `path_of` and `text_of` map a chunk id to its path and text
    (without `text_of`, nothing is exact or quoted)."""
    question = is_question(query)
    fused, lexical_weight = fuse(vector, lexical, params, balanced=hybrid, question=question)
    if boosts:
        by_path = path_multiplier(boosts)
        fused = boost(fused, lambda chunk_id: by_path(path_of(chunk_id)))
    identifiers = identifiers_in(query)
    exact = frozenset(f.id for f in fused if text_of is not None and is_exact(identifiers, text_of(f.id)))
    quoted: frozenset[str] = frozenset()
    if exact and is_exact_query(query, identifiers):
        fused.sort(key=lambda f: f.id not in exact)  # stable: exact hits first, each group in fused order
    elif hybrid and text_of is not None and (words := quote_words(query)):
        # A chunk that holds the query's words in its order has them all, so BM25 ranks it near
        # the top: its first few finds are the only ones worth reading.
        by_bm25 = sorted((f for f in fused if f.bm25_rank is not None), key=lambda f: f.bm25_rank or 0)
        quoted = frozenset(f.id for f in by_bm25[:QUOTE_CANDIDATES] if quotes(words, text_of(f.id)))
        fused.sort(key=lambda f: f.id not in quoted)
    return Ranking(fused, lexical_weight, exact, question, quoted)


# A statement of this many words or more can be a line the user remembers (a sentence, an error
# message, a line of code) rather than a description: where a chunk quotes it — at least
# QUOTE_PAIRS of its adjacent word pairs found in the chunk in the same order, each within
# QUOTE_GAP words (a remembered line drops and changes words) — that chunk goes first. Without it,
# hybrid ranked a quoted passage under BM25 alone on every set (`make eval`'s quote units): the
# vector arm prefers a neighbour that says the same thing in general words. Questions are left
# out: an answer rarely quotes its question, and another page that cites the question by its
# title would be put first (the Debian FAQ's cross-references).
QUOTE_MIN_WORDS = 5
QUOTE_PAIRS = 0.8
QUOTE_GAP = 3
QUOTE_CANDIDATES = 20
WORD = re.compile(r"\w+")


def quote_words(query: str) -> list[str]:
    """The query's words when it can be a remembered line (a statement of QUOTE_MIN_WORDS or
    more), else none."""
    words = WORD.findall(query.lower())
    return words if len(words) >= QUOTE_MIN_WORDS and not is_question(query) else []


def quotes(words: Sequence[str], text: str) -> bool:
    """Whether `text` holds the word sequence `words` (lowercased) nearly in order (see QUOTE_PAIRS)."""
    pairs = list(zip(words, words[1:], strict=False))
    if not pairs:
        return False
    lowered = text.lower()
    # A pair can be found only where both words occur in the text at all: a substring test first
    # rules out most candidates without splitting them into words.
    present = {word for word in set(words) if word in lowered}
    if sum(a in present and b in present for a, b in pairs) < QUOTE_PAIRS * len(pairs):
        return False
    tokens = WORD.findall(lowered)
    positions: dict[str, set[int]] = {}
    for i in [i for i, word in enumerate(tokens) if word in present]:
        positions.setdefault(tokens[i], set()).add(i)
    found = sum(
        any(i + gap in positions.get(b, ()) for i in positions.get(a, ()) for gap in range(1, QUOTE_GAP + 1))
        for a, b in pairs
    )
    return found >= QUOTE_PAIRS * len(pairs)


def is_exact_query(query: str, identifiers: list[str]) -> bool:
    """The query is just identifiers (`getUserName`, `ERR_CONN_RESET user_id`): exact hits go first."""
    words = query.split()
    return bool(identifiers) and len(words) <= 3 and len(identifiers) == len(words)


# Words a question in English starts with. A question names what it wants in words the whole
# corpus uses ("how do I", "is X stable"); BM25 ranks by those shared words while the meaning is
# what the vector arm compares.
QUESTION_WORDS = frozenset({
    "what", "how", "why", "when", "where", "who", "whom", "whose", "which", "is", "are", "was", "were", "am",
    "can", "could", "should", "would", "will", "shall", "do", "does", "did", "has", "have", "had", "may",
    "might", "must",
})  # fmt: skip


def is_question(query: str) -> bool:
    """A question in words: ends with `?`, or is three or more words led by a question word."""
    words = query.split()
    if not words:
        return False
    return query.rstrip().endswith("?") or (len(words) >= 3 and words[0].lower() in QUESTION_WORDS)


def decisiveness(scores: Sequence[float], top: int = 10) -> float:
    """How far an arm's best score stands above the rest of its top `top`, as a fraction of the
    best: 0 for a flat list (the arm cannot tell its hits apart), towards 1 when one hit stands
    alone. Missing places count as 0: an arm that found only two chunks is sure of them."""
    head = list(scores[:top])
    if not head or head[0] <= 0:
        return 0.0
    rest = head[1:] + [0.0] * (top - len(head))
    return (head[0] - sum(rest) / len(rest)) / head[0]


def lexical_balance(
    bm25_scores: Sequence[float],
    cosines: Sequence[float],
    lexical_gain: float,
    vector_gain: float,
    bias: float,
    bound: float,
) -> float:
    """Multiplier of the BM25 arm's weight for one query: `2 ** (lexical_gain x decisiveness of
    BM25 - vector_gain x decisiveness of the cosines + bias)`, within `2 ** ±bound`.

    Equal-weight RRF trusts a weak arm as much as a strong one. An arm whose best hit stands
    out from its runners-up has found something; one whose scores are flat is guessing. So the
    arm that is more decisive for *this* query counts more. Gains 0 and bias 0 = plain RRF."""
    exponent = lexical_gain * decisiveness(bm25_scores) - vector_gain * decisiveness(cosines) + bias
    return float(2.0 ** max(-bound, min(bound, exponent)))


def label(
    cosine: float | None,
    vector_rank: int | None,
    bm25_rank: int | None,
    exact: bool,
    flags: Sequence[str] = (),
    quoted: bool = False,
) -> str:
    """`[both 0.690]`; with screening flags, `[semantic 0.610 ⚠ hidden-instructions]`."""
    if exact:
        why = "exact match"
    elif quoted:
        why = "quote" if cosine is None else f"quote {cosine:.3f}"
    elif cosine is None:  # found by BM25 while its run has not embedded it yet
        why = "keyword, not embedded yet"
    elif vector_rank is not None and bm25_rank is not None:
        why = f"both {cosine:.3f}"
    elif bm25_rank is not None:
        why = f"keyword {cosine:.3f}"
    else:
        why = f"semantic {cosine:.3f}"
    return f"[{why}{' ⚠ ' + ', '.join(flags) if flags else ''}]"


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


def passes(cosine: float | None, exact: bool, min_score: float) -> bool:
    """Relevant enough to show: an exact match, or a cosine at the threshold. A chunk its run has
    not embedded yet has no cosine to judge: what BM25 found of it is shown (the coverage note says
    how much of the scope is embedded so far)."""
    return exact or cosine is None or cosine >= min_score


def abstain_message(best: float | None, threshold: float) -> str:
    best_text = f"{best:.2f}" if best is not None else "n/a"
    return f"No relevant results (best score {best_text}, threshold {threshold:.2f})"
