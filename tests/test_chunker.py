"""The chunker, counting with the real tokenizer through the real embedder."""

from __future__ import annotations

from embedder.client import EmbedderClient
from indexer.chunker import chunk_text


def test_empty_and_blank_text_give_no_chunks(embedder: EmbedderClient) -> None:
    assert chunk_text("", embedder.count_tokens) == []
    assert chunk_text("\n\n   \n", embedder.count_tokens) == []


def test_lines_are_packed_to_the_target_with_correct_line_numbers(embedder: EmbedderClient) -> None:
    lines = [f"line {i}: the quick brown fox jumps over the lazy dog" for i in range(1, 101)]
    chunks = chunk_text("\n".join(lines), embedder.count_tokens, target=200, limit=254)
    assert len(chunks) > 1
    assert chunks[0].start_line == 1 and chunks[-1].end_line == 100
    for chunk in chunks:
        body = chunk.text.splitlines()
        assert body[0].startswith(f"line {chunk.start_line}:")
        assert body[-1].startswith(f"line {chunk.end_line}:")
    # Consecutive and complete: every line lands in exactly one chunk.
    assert [c.start_line for c in chunks[1:]] == [c.end_line + 1 for c in chunks[:-1]]
    assert all(n <= 200 for n in embedder.count_tokens([c.text for c in chunks]))


def test_no_chunk_exceeds_the_limit_for_long_lines_and_giant_words(embedder: EmbedderClient) -> None:
    minified = "var a=1;" + " ".join(f"function f{i}(x){{return x*{i}}}" for i in range(3000))
    giant_word = "q" * 2000
    text = "\n".join(["header", minified, giant_word, "footer"])
    chunks = chunk_text(text, embedder.count_tokens, target=200, limit=254)
    counts = embedder.count_tokens([c.text for c in chunks])
    assert max(counts) <= 254
    assert chunks[0].start_line == 1 and chunks[-1].end_line == 4
    # Nothing is lost: every word of the long line appears in some chunk.
    joined = " ".join(c.text for c in chunks)
    assert "function f2999(x){return x*2999}" in joined
    assert sum(c.text.count("q") for c in chunks) == 2000
