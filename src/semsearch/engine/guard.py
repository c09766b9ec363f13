"""The pasted-prompt guard: a query that is a whole prompt is not searched as it is.

Agents sometimes send their entire prompt — role, rules, pasted code, then the actual request —
as the query. Embedded as is, it is cut at the model's window and matches the boilerplate;
BM25 matches its every word. A query is *prompt-shaped* when it is longer than the window,
holds a code fence, or reads as instructions: several sentences of which some address an
assistant ("You are…", "Always…", "Respond in…"). Then search uses its most informative part —
the request sentence (the one the prompt labels `Task:`/`Question:`, else a question, else the
sentence that is neither role nor rule, richest in content words — then with the identifiers
named in the prompt's code) — and the response says so (`queryNote`, `queryUsed`). Nothing is
silently truncated.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from semsearch.engine.fusion import QUESTION_WORDS
from semsearch.engine.lexical import identifiers_in

FENCE = re.compile(r"```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z)", re.S)
INLINE_CODE = re.compile(r"`([^`\n]{1,80})`")
SENTENCES = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'`(\[])|\n\s*\n|\n(?=\s*(?:[-*•]|\d+[.)])\s)")
# Sentences that address the assistant rather than describe what to find.
ADDRESSED = re.compile(
    r"^\W*(?:please\s+)?(?:you\s+are|you're|you\s+will|you\s+must|you\s+should|your\s+(?:task|job|role|goal)|"
    r"act\s+as|as\s+an?\s+(?:ai|assistant|agent|expert)|i\s+want\s+you|follow|make\s+sure|ensure|do\s+not|don't|"
    r"never|always|respond|reply|answer\s+(?:in|with|only)|return\s+(?:only|a|the|your)|output|format|"
    r"use\s+(?:the|your)\s+tools?|think|be\s+(?:concise|brief|careful)|remember|note\s+that|important|"
    r"system|context|instructions?)\b",
    re.I,
)
ENUMERATOR = re.compile(r"^\W*(?:(?:rule|step|note|point)\s*\d*|\d+)\s*[:.)]\s*", re.I)  # "Rule 3:", "2."
# A sentence the prompt itself labels as the request.
REQUEST = re.compile(
    r"^\W*(?:task|question|query|request|goal|problem|the\s+user\s+(?:asked|asks|wants)|user)\s*:\s*", re.I
)
STOP = frozenset((
    "a", "an", "the", "and", "or", "but", "of", "to", "in", "on", "for", "with", "by", "at", "from", "is", "are",
    "was", "were", "be", "been", "it", "this", "that", "these", "those", "i", "you", "we", "they", "he", "she",
    "my", "your", "our", "their", "me", "us", "them", "do", "does", "did", "can", "could", "would", "should",
    "will", "shall", "may", "might", "must", "have", "has", "had", "not", "no", "so", "as", "if", "then", "than",
    "there", "here", "what", "which", "who", "whom", "how", "why", "when", "where", "please", "just", "also",
    "any", "all", "some", "into", "about",
))  # fmt: skip
MIN_SENTENCES = 3  # one or two sentences are a query, however long
MAX_QUERY_WORDS = 60  # words of a plain query before its shape is looked at
MAX_USED_WORDS = 48  # the part searched for stays well inside the window
MAX_IDENTIFIERS = 6


@dataclass(frozen=True)
class Guarded:
    used: str  # what search embeds and matches
    note: str | None  # queryNote: what happened and what was used, when the query was not used as sent


def guard(query: str, count_tokens: Callable[[str], int], window: int) -> Guarded:
    """The query to search for, and a note when it is not the query as sent."""
    fences = FENCE.findall(query)
    prose = FENCE.sub(" ", query)
    sentences = [s.strip() for s in SENTENCES.split(prose) if s and len(s.split()) >= 2]
    addressed = [s for s in sentences if ADDRESSED.match(ENUMERATOR.sub("", s)) and not REQUEST.match(s)]
    words = len(query.split())
    if not fences and words <= MAX_QUERY_WORDS and len(sentences) < MIN_SENTENCES:
        return Guarded(query, None)  # the common case costs no token count
    tokens = count_tokens(query)
    reasons = []
    if tokens > window:
        reasons.append(f"{tokens} tokens, over the model's {window}-token window")
    if fences:
        reasons.append(f"{len(fences)} code block{'s' if len(fences) > 1 else ''}")
    if len(sentences) >= MIN_SENTENCES and addressed:
        reasons.append(f"{len(sentences)} sentences, {len(addressed)} of them instructions to an assistant")
    if not reasons:
        return Guarded(query, None)
    used = _informative_part(sentences, addressed, fences, prose)
    if not used:
        return Guarded(query, None)
    note = (
        f"the query looks like a pasted prompt ({'; '.join(reasons)}), so it was not searched as sent; "
        f"searched for: {used!r}. Send only what you are looking for to search for something else."
    )
    return Guarded(used, note)


def _informative_part(sentences: list[str], addressed: list[str], fences: list[str], prose: str) -> str:
    labelled = [r for r in (REQUEST.sub("", s) for s in sentences if REQUEST.match(s)) if len(r.split()) >= 2]
    candidates = labelled or [s for s in sentences if s not in addressed] or sentences
    questions = [s for s in candidates if _is_question(s) and len(_content(s)) >= 2]
    pool = questions or candidates
    # The richest in content words; on a tie, the later one (the request usually comes last).
    best = max(reversed(pool), key=lambda s: len(_content(s))) if pool else ""
    best = " ".join(best.split()[:MAX_USED_WORDS])
    if labelled or questions:
        return best  # the prompt says what it asks; pasted code beside it is context, not the question
    named = INLINE_CODE.findall(prose) + [i for f in fences for i in identifiers_in(f)]
    extra = [n for n in dict.fromkeys(named) if n not in best][:MAX_IDENTIFIERS]
    return " ".join([best, *extra]).strip()


def _is_question(sentence: str) -> bool:
    words = sentence.split()
    return sentence.rstrip().endswith("?") or (bool(words) and words[0].lower() in QUESTION_WORDS)


def _content(sentence: str) -> set[str]:
    return {w for w in re.findall(r"[\w.]+", sentence.lower()) if w not in STOP and len(w) > 2}
