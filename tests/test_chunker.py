"""The chunker, counting with the real tokenizer through the real embedder."""

from __future__ import annotations

from semsearch.config import Settings
from semsearch.corpus.extract import Document, Segment
from semsearch.embedder.client import EmbedderClient
from semsearch.indexer.chunker import ChunkSizes, chunk_document, chunk_text, parse_frontmatter

SIZES = ChunkSizes.from_settings(Settings())


def markdown(text: str) -> Document:
    return Document([Segment(text)], markdown=True, sha256="", mtime_ns=0, size=len(text))


def test_empty_and_blank_text_give_no_chunks(embedder: EmbedderClient) -> None:
    assert chunk_text("", embedder.count_tokens, SIZES) == []
    assert chunk_text("\n\n   \n", embedder.count_tokens, SIZES) == []


def test_lines_are_packed_with_overlap_and_correct_line_numbers(embedder: EmbedderClient) -> None:
    lines = [f"line {i}: the quick brown fox jumps over the lazy dog" for i in range(1, 101)]
    chunks = chunk_text("\n".join(lines), embedder.count_tokens, ChunkSizes(200, 35, 254))
    assert len(chunks) > 1
    assert chunks[0].start_line == 1 and chunks[-1].end_line == 100
    for chunk in chunks:
        body = chunk.text.splitlines()
        assert body[0].startswith(f"line {chunk.start_line}:")
        assert body[-1].startswith(f"line {chunk.end_line}:")
    covered = {n for c in chunks for n in range(c.start_line, c.end_line + 1)}
    assert covered == set(range(1, 101))
    counts = embedder.count_tokens([c.text for c in chunks])
    assert all(n <= 200 + 35 for n in counts)
    for before, after in zip(chunks, chunks[1:], strict=False):
        assert after.start_line <= before.end_line  # neighbours share their boundary lines
        shared = "\n".join(lines[after.start_line - 1 : before.end_line])
        assert 0 < embedder.count_tokens([shared])[0] <= 35


def test_chunks_end_at_paragraph_boundaries_when_they_can(embedder: EmbedderClient) -> None:
    paragraphs = [
        "\n".join(f"paragraph {p} sentence {s} about turbines and rotor blades" for s in range(6)) for p in range(8)
    ]
    chunks = chunk_text("\n\n".join(paragraphs), embedder.count_tokens, ChunkSizes(200, 0, 254))
    assert len(chunks) > 2
    for chunk in chunks[:-1]:
        assert chunk.text.splitlines()[-1].endswith("sentence 5 about turbines and rotor blades")


def test_no_chunk_exceeds_the_limit_for_long_lines_and_giant_words(embedder: EmbedderClient) -> None:
    minified = "var a=1;" + " ".join(f"function f{i}(x){{return x*{i}}}" for i in range(3000))
    giant_word = "q" * 2000
    cjk = "漢字" * 700  # one 1,400-character word: slices of 500 characters are still too long
    long_paragraph = " ".join(f"word{i}" for i in range(900))
    text = "\n".join(["header", minified, giant_word, cjk, long_paragraph, "footer"])
    chunks = chunk_text(text, embedder.count_tokens, ChunkSizes(200, 35, 254))
    counts = embedder.count_tokens([c.text for c in chunks])
    assert max(counts) <= 254
    assert chunks[0].start_line == 1 and chunks[-1].end_line == 6
    joined = " ".join(c.text for c in chunks)
    assert "function f2999(x){return x*2999}" in joined
    assert "word899" in joined and "q" * 500 in joined
    assert sum(c.text.count("漢") for c in chunks) >= 700


def test_markdown_sections_carry_breadcrumbs_and_never_mix(embedder: EmbedderClient) -> None:
    text = """---
title: Auth guide
status: superseded
superseded_by: reference/auth.md
date: 2026-03-01
tags: [auth, security]
---
# Auth

Intro to authentication.

## How the client refreshes the token

It posts the refresh token and receives a new access token.

```bash
# not a heading: inside a code fence
curl -X POST /oauth/token
```

### Errors

A 401 means the refresh token was revoked.

# Billing

Invoices are sent monthly.
"""
    chunked = chunk_document(markdown(text), embedder.count_tokens, SIZES)
    chunks, meta = chunked.chunks, chunked.meta
    assert meta.title == "Auth guide" and meta.status == "superseded"
    assert meta.superseded_by == "reference/auth.md" and meta.date == "2026-03-01"
    assert meta.tags == ["auth", "security"]
    assert all("superseded_by" not in c.text for c in chunks)  # frontmatter is metadata, not text
    by_heading = {c.heading: c for c in chunks}
    assert list(by_heading) == [
        "Auth",
        "Auth > How the client refreshes the token",
        "Auth > How the client refreshes the token > Errors",
        "Billing",
    ]
    refresh = by_heading["Auth > How the client refreshes the token"]
    assert "# not a heading" in refresh.text and refresh.start_line == 12
    assert by_heading["Billing"].text.startswith("# Billing") and by_heading["Billing"].start_line == 25
    lines = text.splitlines()
    for chunk in chunks:
        assert lines[chunk.start_line - 1] == chunk.text.splitlines()[0]


def test_invalid_frontmatter_is_kept_as_text() -> None:
    meta, skip = parse_frontmatter("---\nkey: [unclosed\n---\nbody")
    assert skip == 0 and meta.title is None


def test_each_distinct_line_is_counted_once(embedder: EmbedderClient) -> None:
    calls: list[int] = []

    def counting(texts: list[str]) -> list[int]:
        calls.append(len(texts))
        return embedder.count_tokens(texts)

    text = "\n".join(["same line repeated"] * 500 + [f"distinct {i}" for i in range(300)])
    chunk_text(text, counting, SIZES)
    assert calls == [301]  # one batched call, each distinct line once
