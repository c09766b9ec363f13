"""Code-aware lexical tokens for the BM25 arm.

LanceDB's full-text tokenizer lowercases and splits at punctuation, so `getUserName` is
one token and "user name" never finds it. We index a `lexical` column holding the text
plus the parts of every compound identifier (camelCase, PascalCase, snake_case,
kebab-case, digit boundaries), and expand compound identifiers in queries the same way.
The exact identifier stays a token of its own: rarer than its parts, it ranks first for
an exact query.
"""

from __future__ import annotations

import re

# A run of identifier characters, possibly joined by _ - . (so `user_id`, `kebab-case`, `a.b`).
IDENTIFIER = re.compile(r"[^\W_]+(?:[_\-.][^\W_]+)*")
# Boundaries inside one alphanumeric run: fooBar, HTTPServer -> HTTP Server, v2Beta -> v 2 Beta.
CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def identifier_parts(token: str) -> list[str]:
    """The parts of a compound identifier, lowercased; [] if it is not compound."""
    pieces = [p for p in re.split(r"[_\-.]+", token) if p]
    # Case boundaries only in ASCII runs: "naïve" is one word, not "na" + "ve".
    parts = [p.lower() for piece in pieces for p in (CAMEL.findall(piece) if piece.isascii() else [piece])]
    return parts if len(parts) > 1 else []


def expansions(text: str) -> str:
    """Space-separated parts of every compound identifier in `text` (each compound once)."""
    seen: set[str] = set()
    out: list[str] = []
    for match in IDENTIFIER.finditer(text):
        token = match.group(0)
        if token in seen or len(token) > 80:
            continue
        seen.add(token)
        parts = identifier_parts(token)
        if parts:
            out.append(" ".join(parts))
    return " ".join(out)


def lexical_document(text: str, heading: str | None = None) -> str:
    """What the BM25 index sees for a chunk: its heading, its text, and identifier parts."""
    extra = expansions(text)
    return "\n".join(part for part in (heading or "", text, extra) if part)


def query_terms(query: str) -> list[str]:
    """The words of a query, with compound identifiers followed by their parts."""
    terms: list[str] = []
    for match in IDENTIFIER.finditer(query):
        token = match.group(0)
        terms.append(token)
        terms.extend(identifier_parts(token))
    return list(dict.fromkeys(terms))


def identifiers_in(query: str) -> list[str]:
    """Query tokens that look like code (compound, or with digits/underscores), for exact-match labels."""
    return [m.group(0) for m in IDENTIFIER.finditer(query) if identifier_parts(m.group(0)) or "_" in m.group(0)]
