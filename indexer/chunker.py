"""Splits text into chunks that fit the model's window, counted with its real tokenizer.

Lines are packed greedily up to `target` tokens. A line longer than `limit` is split
into words, and words longer than `MAX_WORD_CHARS` into slices, so no chunk is ever
silently truncated by the model. Token counts come from the embedder (`CountTokens`),
one call per file for lines and one more only if a line is too long.

WordPiece splits at whitespace first, so the count of lines joined by newlines is the
sum of their counts: we never re-tokenise a growing chunk.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

CountTokens = Callable[[list[str]], list[int]]
MAX_WORD_CHARS = 200  # a slice this long is at most ~200 tokens, under the 254 cap


@dataclass(frozen=True)
class Chunk:
    text: str
    start_line: int  # 1-based, inclusive
    end_line: int


@dataclass(frozen=True)
class _Piece:
    text: str
    line: int
    tokens: int
    joiner: str  # what goes before this piece when it follows another in a chunk


def chunk_text(text: str, count: CountTokens, target: int = 200, limit: int = 254) -> list[Chunk]:
    lines = text.splitlines()
    if not lines:
        return []
    pieces: list[_Piece] = []
    for number, (line, tokens) in enumerate(zip(lines, count(lines), strict=True), start=1):
        if tokens <= limit:
            pieces.append(_Piece(line, number, tokens, "\n"))
        else:
            pieces.extend(_split_line(line, number, count))
    return _pack(pieces, target, limit)


def _split_line(line: str, number: int, count: CountTokens) -> list[_Piece]:
    words: list[str] = []
    for word in line.split():
        words.extend(word[i : i + MAX_WORD_CHARS] for i in range(0, len(word), MAX_WORD_CHARS))
    joiners = ["\n"] + [" "] * (len(words) - 1)
    return [_Piece(w, number, n, j) for w, n, j in zip(words, count(words), joiners, strict=True)]


def _pack(pieces: list[_Piece], target: int, limit: int) -> list[Chunk]:
    chunks: list[Chunk] = []
    current: list[_Piece] = []
    tokens = 0

    def flush() -> None:
        body = "".join((p.joiner if i else "") + p.text for i, p in enumerate(current))
        if body.strip():
            chunks.append(Chunk(body, current[0].line, current[-1].line))

    for piece in pieces:
        if current and (tokens + piece.tokens > target or tokens + piece.tokens > limit):
            flush()
            current, tokens = [], 0
        current.append(piece)
        tokens += piece.tokens
    if current:
        flush()
    return chunks
