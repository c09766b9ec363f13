"""Coverage-guided fuzzing (atheris, libFuzzer's engine for Python) of what parses hostile input:
the extractors, both chunkers, the search filter builder, the glob compiler and the secret
redaction. One target per process:

    python -m tests.fuzz_targets TARGET -runs=100000      # or -max_total_time=60

Each target raises only when a contract breaks: an exception other than the one the code
documents for bad input, a chunk over the model's window, lines lost or invented, a filter
whose SQL leaks the input unquoted. libFuzzer then prints the input that did it. `make fuzz`
runs every target for a minute; CI runs each for a few thousand inputs (tests/test_fuzz.py).
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["semsearch"]):
    from semsearch.config import Settings
    from semsearch.corpus.extract import Unindexable, extract
    from semsearch.corpus.secrets import redact
    from semsearch.embedder.model import packaged_model
    from semsearch.engine.filters import BadGlob, build, glob_matcher, where
    from semsearch.indexer.chunker import ChunkSizes, chunk_document
    from semsearch.indexer.syntax import GRAMMARS
    from semsearch.schemas import SearchRequest

from pydantic import ValidationError
from tokenizers import Tokenizer

SUFFIXES = [".txt", ".md", ".pdf", ".docx", ".py", ".html", ""]
SETTINGS = Settings()
SIZES = ChunkSizes.from_settings(SETTINGS)
LANGUAGES = sorted(GRAMMARS)
_tokenizer: Tokenizer | None = None


def count(texts: list[str]) -> list[int]:
    """The model's own token counts (its tokenizer, in this process)."""
    global _tokenizer
    if _tokenizer is None:
        _tokenizer = Tokenizer.from_file(str(packaged_model().tokenizer))
    return [len(e.ids) for e in _tokenizer.encode_batch(texts, add_special_tokens=False)]


def fuzz_extract(data: bytes) -> None:
    suffix = SUFFIXES[data[0] % len(SUFFIXES)] if data else ""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"file{suffix}"
        path.write_bytes(data[1:])
        try:
            doc = extract(path, 500_000)
        except Unindexable:
            return
        assert all(isinstance(s.text, str) for s in doc.segments)


def _chunk(data: bytes, language: str | None) -> None:
    text = data.decode("utf-8", errors="replace")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "file.txt"
        path.write_text(text, encoding="utf-8")
        try:
            doc = extract(path, 500_000)
        except Unindexable:
            return
    chunked = chunk_document(doc, count, SIZES, language=language, path="file")
    lines = doc.segments[0].text.count("\n") + 1 if doc.segments else 0
    for chunk in chunked.chunks:
        assert 1 <= chunk.start_line <= chunk.end_line <= max(lines, 1), (chunk.start_line, chunk.end_line, lines)
    if chunked.chunks:
        assert max(count([c.embedded for c in chunked.chunks])) <= SIZES.limit


def fuzz_paragraphs(data: bytes) -> None:
    _chunk(data, None)


def fuzz_syntax(data: bytes) -> None:
    if data:
        _chunk(data[1:], LANGUAGES[data[0] % len(LANGUAGES)])


def fuzz_filters(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    words = [fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 40)) for _ in range(fdp.ConsumeIntInRange(0, 6))]
    try:
        request = SearchRequest(
            query="q", folder=words[:2] or None, path_glob=words[2:3] or None, exclude=words[3:4] or None,
            ext=words[4:5] or None, tags=words[5:6] or None,
        )  # fmt: skip
    except ValidationError:
        return
    sql = where(build(request, request.folder or ["docs"], SETTINGS))
    # Every value is inside a quoted SQL literal: outside them, no quote is left unbalanced.
    assert sql.replace("''", "").count("'") % 2 == 0, sql


def fuzz_globs(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    globs = [fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 60)) for _ in range(fdp.ConsumeIntInRange(1, 4))]
    try:
        matches = glob_matcher(globs)
    except BadGlob:
        return
    matches(fdp.ConsumeUnicodeNoSurrogates(200))


def fuzz_redact(data: bytes) -> None:
    text = data.decode("utf-8", errors="replace")
    out, _ = redact(text)
    assert out.count("\n") == text.count("\n")  # line numbers of results stay right


TARGETS: dict[str, Callable[[bytes], None]] = {
    "extract": fuzz_extract,
    "paragraphs": fuzz_paragraphs,
    "syntax": fuzz_syntax,
    "filters": fuzz_filters,
    "globs": fuzz_globs,
    "redact": fuzz_redact,
}


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in TARGETS:
        sys.exit(f"usage: python -m tests.fuzz_targets {{{','.join(TARGETS)}}} [libFuzzer flags]")
    target = TARGETS[sys.argv[1]]
    atheris.Setup([sys.argv[0], *sys.argv[2:]], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
