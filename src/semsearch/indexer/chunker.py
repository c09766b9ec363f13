"""Splits a document into chunks that fit the model's window, counted with its real tokenizer.

- Text is split into lines grouped in paragraphs (blank lines between), packed greedily to
  about `target` tokens, preferring to end a chunk where a paragraph ends; consecutive chunks
  share about `overlap` tokens of trailing lines, capped so overlap + the next line never
  breaches `limit` (254 = the model's 256 window minus [CLS] and [SEP]).
- A line over the limit is packed word by word with the same logic; a word over
  `MAX_WORD_CHARS` characters is sliced first (minified code, base64 blobs).
- Markdown is split at headings first: a chunk never spans two sections, and each chunk
  carries its heading breadcrumb (`Auth > Refreshing tokens`). YAML frontmatter is parsed
  into metadata, not indexed as text.
- Source code in a language with a grammar is chunked at syntax boundaries instead
  (`syntax.chunk_code`: whole definitions, symbol breadcrumbs); a piece still over the
  window, and code that does not parse, go through the same packing as prose.
- Token counts come from the embedder (`CountTokens`) once per distinct line or word, in
  one or two calls per document. WordPiece splits at whitespace first, so the count of
  pieces joined by whitespace is the sum of their counts: nothing is ever re-tokenised.
"""

from __future__ import annotations

import bisect
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import date, datetime
from typing import Any

import yaml

from semsearch.config import Settings
from semsearch.corpus.extract import Document, Segment, Unindexable
from semsearch.indexer.syntax import GRAMMARS, SEPARATOR, Symbol, chunk_code
from semsearch.limits import MAX_CHUNK_NAMES, MAX_NAME_CHARS
from semsearch.schemas import DocMeta
from semsearch.text import embedded
from semsearch.text import lines as text_lines

CountTokens = Callable[[list[str]], list[int]]
MAX_WORD_CHARS = 500
# The tokenizer turns a word longer than its own limit (100 characters: a line of hex, a long
# base64 run) into one [UNK], which let a 300 KB line pass as a one-token chunk. When chunks are
# packed such a word costs one token per MAX_CHARS_PER_TOKEN characters; other text is unchanged.
MAX_CHARS_PER_TOKEN = 10
UNKNOWN_WORD = re.compile(r"[^\W_]{101,}")
MAX_FRONTMATTER_CHARS = 16_384  # titles, tags, dates: a few hundred bytes in practice
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$")
FENCE = re.compile(r"^ {0,3}(```|~~~)")
META_KEYS = ("title", "status", "superseded_by", "date", "tags")
# A notebook kernel's language name (`kernelspec.language`) → the grammar that chunks its cells.
GRAMMAR_NAMES = {**{name: name for name in GRAMMARS}, "c++": "cpp", "c#": "csharp", "sh": "bash", "js": "javascript"}

# A definition embedded alone stops here (~170 tokens of code): its name, signature and first lines
# are what tell it from its neighbours. Replayed on six code sets (eval.views' way), 250, 500 and
# 1,000 characters found as many definitions within noise, and 500 costs half the embedding of 1,000.
DEFINITION_VIEW_CHARS = 500


@dataclass(frozen=True)
class Chunk:
    text: str
    start_line: int  # 1-based, inclusive
    end_line: int
    heading: str | None = None
    page: int | None = None
    kind: str | None = None  # code: what the chunk holds (function, method, class, …)
    context: str | None = None  # code: embedded before the text (breadcrumb, a split function's signature)
    meta: DocMeta | None = None  # its part's own facts (a mailbox's message), over the document's
    names: tuple[str, ...] = ()  # code: the definitions starting in it, in words (`Symbol.in_words`)

    @property
    def embedded(self) -> str:
        """What the model sees: the context (if any) on its own lines, then the text."""
        return embedded(self.context, self.text)


@dataclass(frozen=True)
class Chunked:
    chunks: list[Chunk]
    meta: DocMeta
    symbols: list[Symbol]


@dataclass(frozen=True)
class _Atom:
    text: str
    line: int
    tokens: int
    para_start: bool  # first atom of a paragraph: a good place to start a chunk
    joiner: str  # what separates it from the atom before it in the same chunk


@dataclass
class _Section:
    heading: str | None
    lines: list[tuple[int, str]]  # (line number, text)
    page: int | None = None
    meta: DocMeta | None = None
    language: str | None = None  # a notebook's code cell: its kernel's language


class FrontMatterRefused(Unindexable):
    """Front matter built to exhaust the indexer (aliases, sheer size): the file is not indexed."""

    def __init__(self, detail: str) -> None:
        super().__init__("front-matter", detail)


class _NoAliasLoader(yaml.SafeLoader):
    """YAML without aliases: nine levels of nine `*refs` expand 361 bytes into 312 MB of title."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise FrontMatterRefused("its front matter uses YAML aliases (`*name`); write the values out")
        return super().compose_node(parent, index)


def parse_frontmatter(text: str) -> tuple[DocMeta, int]:
    """Metadata and the number of lines it occupies (0 when there is none or it is invalid).
    Hostile front matter (aliases, over MAX_FRONTMATTER_CHARS, nested past the parser) raises
    FrontMatterRefused: the file is listed as unindexable with that reason."""
    lines = text.split("\n", 200)
    if not lines or lines[0].strip() != "---":
        return DocMeta(), 0
    for end in range(1, len(lines)):
        if lines[end].strip() in ("---", "..."):
            body = "\n".join(lines[1:end])
            if len(body) > MAX_FRONTMATTER_CHARS:
                raise FrontMatterRefused(
                    f"its front matter is {len(body):,} characters (at most {MAX_FRONTMATTER_CHARS:,})"
                )
            try:
                data = yaml.load(body, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader without aliases
            except RecursionError as exc:
                raise FrontMatterRefused("its front matter is nested too deeply") from exc
            except FrontMatterRefused:
                raise
            except yaml.YAMLError:
                return DocMeta(), 0
            if not isinstance(data, dict):
                return DocMeta(), 0
            return _meta(data), end + 1
    return DocMeta(), 0


def _meta(data: dict[str, Any]) -> DocMeta:
    def text(value: Any) -> str | None:
        if value is None:
            return None
        if isinstance(value, datetime | date):
            return value.isoformat()
        return str(value).strip() or None

    tags = data.get("tags") or []
    if isinstance(tags, str):
        tags = [t.strip() for t in tags.split(",")]
    status = text(data.get("status"))
    return DocMeta(
        title=text(data.get("title")),
        status=status.lower() if status else None,
        superseded_by=text(data.get("superseded_by") or data.get("superseded-by")),
        date=text(data.get("date")),
        tags=[str(t) for t in tags if str(t).strip()] if isinstance(tags, list) else [],
    )


def sections(doc: Document) -> tuple[list[_Section], DocMeta]:
    meta = DocMeta()
    out: list[_Section] = []
    trail: list[tuple[int, str]] = []  # (level, title) of the headings we are under, across a notebook's cells
    first_line = 1
    for segment in doc.segments:
        lines = text_lines(segment.text)
        skip = 0
        if doc.markdown and segment is doc.segments[0] and not doc.continuous:
            meta, skip = parse_frontmatter(segment.text)
        numbered = list(enumerate(lines, start=first_line if doc.continuous else 1))[skip:]
        if doc.continuous:
            first_line += len(lines) + 1  # the blank line between two parts (extract.parts_text)
        if doc.markdown and not segment.code:
            out.extend(_markdown_sections(numbered, trail, segment.page, segment.meta))
        else:
            heading = " > ".join(t for _, t in trail) or None
            out.append(_Section(heading, numbered, segment.page, segment.meta, segment.language))
    return out, meta


def _markdown_sections(
    lines: list[tuple[int, str]], trail: list[tuple[int, str]], page: int | None = None, meta: DocMeta | None = None
) -> Iterable[_Section]:
    """`trail`: the headings we are under, updated in place (a notebook's next cell is under them too)."""
    current = _Section(" > ".join(t for _, t in trail) or None, [], page, meta)
    in_fence = False
    for number, line in lines:
        if FENCE.match(line):
            in_fence = not in_fence
        match = None if in_fence else HEADING.match(line)
        if match:
            if current.lines:
                yield current
            level = len(match.group(1))
            trail[:] = [(lv, t) for lv, t in trail if lv < level] + [(level, match.group(2).strip())]
            current = _Section(" > ".join(t for _, t in trail), [], page, meta)
        current.lines.append((number, line))
    if current.lines:
        yield current


@dataclass(frozen=True)
class ChunkSizes:
    """Token budgets of a chunk (counted with the model's tokenizer); their values and reasons are
    settings (`chunk_tokens`, `chunk_overlap_tokens`, `chunk_max_tokens`)."""

    target: int
    overlap: int
    limit: int

    @classmethod
    def from_settings(cls, settings: Settings, window: int | None = None) -> ChunkSizes:
        """`window`: the tokens the embedder's model takes with its special tokens and prompt
        (its `max_sequence_length`); a smaller model window shrinks the budgets to fit it."""
        limit = settings.chunk_max_tokens
        if window:
            limit = min(limit, window - 2)  # [CLS] and [SEP]: two for BERT-like tokenizers, at most two for others
        target = min(settings.chunk_tokens, limit)
        return cls(target, min(settings.chunk_overlap_tokens, target // 4), limit)


def chunk_document(
    doc: Document,
    count: CountTokens,
    sizes: ChunkSizes,
    language: str | None = None,
    path: str | None = None,
    cells_by_syntax: bool = False,
) -> Chunked:
    """Chunks of a document; `language` (a `syntax.GRAMMARS` name) asks for syntax-aware chunks,
    whose embedded context starts with `path` (the file's relative path) when given.
    `cells_by_syntax`: a notebook's code cells in a language with a grammar are chunked at its
    definitions too (their symbols are the notebook's), under the Markdown headings above them."""
    counter = _CachedCounter(count)
    if language is not None and not doc.markdown and len(doc.segments) == 1:
        text = doc.segments[0].text
        code = _code_chunks(text, language, counter, sizes, path)
        if code is not None:
            return _named(code, dict(enumerate(text.split("\n"), start=1)), path)
    target, overlap, limit = sizes.target, sizes.overlap, sizes.limit
    parts, meta = sections(doc)
    counter.prime(line for part in parts for _, line in part.lines)
    chunks: list[Chunk] = []
    symbols: list[Symbol] = []
    for part in parts:
        grammar = GRAMMAR_NAMES.get(part.language or "") if cells_by_syntax else None
        cell = _cell_chunks(part, grammar, counter, sizes, path) if grammar else None
        if cell is not None:
            chunks += cell.chunks
            symbols += cell.symbols
            continue
        atoms = _atoms(part.lines, counter, limit)
        for text, start, end in _pack(atoms, target, overlap, limit):
            chunks.append(Chunk(text, start, end, part.heading, part.page, meta=part.meta))
    source = {n: line for part in parts for n, line in part.lines} if symbols else {}  # a notebook's code cells
    return _named(Chunked(chunks, meta, symbols), source, path)


def _named(chunked: Chunked, source: dict[int, str], path: str | None) -> Chunked:
    """What is embedded beside a chunk for each definition whose first line is in it (the last
    chunk to start at or before that line, so a split definition's first piece); a search scores
    the chunk by the best of its own cosine and theirs:
    - the definition in words (`Symbol.in_words`): a body's hundred tokens drown the name a
      question asks by;
    - the definition alone, under its path › symbol path, where the chunk holds more than it
      (short definitions packed together, a method under its class's header): its neighbours'
      words blur the chunk's vector. A chunk that is just the definition (or its first piece)
      already is this view, so nothing more is embedded for it."""
    if not chunked.symbols:
        return chunked
    starts = sorted((c.start_line, i) for i, c in enumerate(chunked.chunks))
    words: dict[int, list[str]] = {}
    alone: dict[int, list[str]] = {}
    first_lines = sorted(s.start_line for s in chunked.symbols)
    for symbol in chunked.symbols:
        at = bisect.bisect_right(starts, (symbol.start_line, len(starts))) - 1
        if at < 0 or chunked.chunks[starts[at][1]].end_line < symbol.start_line:
            continue
        i = starts[at][1]
        chunk = chunked.chunks[i]
        words.setdefault(i, []).append(symbol.in_words[:MAX_NAME_CHARS])
        before = bisect.bisect_left(first_lines, symbol.start_line) - bisect.bisect_left(first_lines, chunk.start_line)
        if before > 0 or chunk.end_line > symbol.end_line:
            where = SEPARATOR.join(p for p in (path, symbol.symbol_path) if p)
            alone.setdefault(i, []).append(embedded(where, _opening(source, symbol))[:DEFINITION_VIEW_CHARS])
    chunks = [
        replace(c, names=tuple([*words.get(i, ()), *alone.get(i, ())][:MAX_CHUNK_NAMES])) if i in words else c
        for i, c in enumerate(chunked.chunks)
    ]
    return replace(chunked, chunks=chunks)


def _opening(source: dict[int, str], symbol: Symbol) -> str:
    """The definition's first lines, up to the view's length (a class can run to thousands)."""
    lines: list[str] = []
    size = 0
    for n in range(symbol.start_line, symbol.end_line + 1):
        lines.append(source.get(n, ""))
        size += len(lines[-1]) + 1
        if size >= DEFINITION_VIEW_CHARS:
            break
    return "\n".join(lines)


def _cell_chunks(
    part: _Section, grammar: str, counter: _CachedCounter, sizes: ChunkSizes, path: str | None
) -> Chunked | None:
    """A code cell through its language's syntax chunker, its lines and symbols moved to where the
    cell starts in the notebook's text, each chunk under the cell's Markdown trail."""
    if not part.lines:
        return None
    code = _code_chunks("\n".join(line for _, line in part.lines), grammar, counter, sizes, path)
    if code is None:
        return None
    shift = part.lines[0][0] - 1
    chunks = [
        Chunk(
            c.text,
            c.start_line + shift,
            c.end_line + shift,
            " > ".join(h for h in (part.heading, c.heading) if h) or None,
            part.page,
            c.kind,
            c.context,
            part.meta,
        )  # fmt: skip
        for c in code.chunks
    ]
    symbols = [replace(s, start_line=s.start_line + shift, end_line=s.end_line + shift) for s in code.symbols]
    return Chunked(chunks, DocMeta(), symbols)


def _code_chunks(
    text: str, language: str, counter: _CachedCounter, sizes: ChunkSizes, path: str | None
) -> Chunked | None:
    def count(texts: list[str]) -> list[int]:
        counter.prime(texts)
        return [counter[t] for t in texts]

    parsed = chunk_code(text, language, count, sizes.target, sizes.limit, path)
    if parsed is None:
        return None
    pieces, symbols = parsed
    lines = text.split("\n")
    chunks: list[Chunk] = []
    for piece in pieces:
        spare = sizes.limit - piece.context_tokens
        body = lines[piece.start_line - 1 : piece.end_line]
        if not any(line.strip() for line in body):
            continue
        if sum(counter[line] for line in body) <= spare:
            chunks.append(Chunk("\n".join(body), piece.start_line, piece.end_line, piece.heading, None,
                                piece.kind, piece.context))  # fmt: skip
            continue
        # A single leaf over the window (a long string, a table literal): packed like prose.
        numbered = list(enumerate(body, start=piece.start_line))
        for part, start, end in _pack(_atoms(numbered, counter, spare), min(sizes.target, spare), 0, spare):
            chunks.append(Chunk(part, start, end, piece.heading, None, piece.kind, piece.context))
    return Chunked(chunks, DocMeta(), symbols)


def chunk_text(text: str, count: CountTokens, sizes: ChunkSizes, language: str | None = None) -> list[Chunk]:
    """Plain text or code (no Markdown rules): convenience for callers and tests."""
    doc = Document([Segment(text)], markdown=False, sha256="", mtime_ns=0, size=len(text))
    return chunk_document(doc, count, sizes, language).chunks


class SharedCounts:
    """Token counts remembered across the files of one run: names, imports and licence lines
    repeat from file to file. Thread-safe (files are chunked on several threads) and bounded
    (`max_entries` strings of at most `MAX_SHARED_CHARS`, forgotten all at once when full), so
    the indexer's memory does not grow with the corpus."""

    MAX_SHARED_CHARS = 200

    def __init__(self, count: CountTokens, max_entries: int = 100_000) -> None:
        self._count = count
        self._max = max_entries
        self._known: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, texts: list[str]) -> list[int]:
        with self._lock:
            found = {t: self._known[t] for t in texts if t in self._known}
        missing = list(dict.fromkeys(t for t in texts if t not in found))
        if missing:
            counted = dict(zip(missing, self._count(missing), strict=True))
            found.update(counted)
            keep = {t: n for t, n in counted.items() if len(t) <= self.MAX_SHARED_CHARS}
            with self._lock:
                if len(self._known) + len(keep) > self._max:
                    self._known.clear()
                self._known.update(keep)
        return [found[t] for t in texts]


def _unknown_cost(text: str) -> int:
    """Tokens charged on top of the tokenizer's count for words it reads as one [UNK]."""
    return sum(len(m.group()) // MAX_CHARS_PER_TOKEN for m in UNKNOWN_WORD.finditer(text)) if len(text) > 100 else 0


class _CachedCounter:
    """Counts each distinct string once, in batched calls."""

    def __init__(self, count: CountTokens) -> None:
        self._count = count
        self._cache: dict[str, int] = {}

    def prime(self, texts: Iterable[str]) -> None:
        todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
        for start in range(0, len(todo), 2048):
            batch = todo[start : start + 2048]
            self._cache.update((t, n + _unknown_cost(t)) for t, n in zip(batch, self._count(batch), strict=True))

    def __getitem__(self, text: str) -> int:
        if text not in self._cache:
            self.prime([text])
        return self._cache[text]


def _atoms(lines: list[tuple[int, str]], counter: _CachedCounter, limit: int) -> list[_Atom]:
    atoms: list[_Atom] = []
    previous_line = 0
    para_start = True
    for number, line in lines:
        if not line.strip():
            para_start = True
            continue
        gap = "\n" * (number - previous_line) if previous_line else ""
        previous_line = number
        tokens = counter[line]
        if tokens <= limit:
            atoms.append(_Atom(line, number, tokens, para_start, gap))
        else:
            words = _words(line, counter, limit)
            counter.prime(words)
            for i, word in enumerate(words):
                atoms.append(_Atom(word, number, counter[word], para_start and i == 0, gap if i == 0 else " "))
        para_start = False
    return atoms


def _words(line: str, counter: _CachedCounter, limit: int) -> list[str]:
    pieces: list[str] = []
    for word in line.split():
        pieces.extend(word[i : i + MAX_WORD_CHARS] for i in range(0, len(word), MAX_WORD_CHARS))
    counter.prime(pieces)
    out: list[str] = []
    for piece in pieces:
        # A 500-character slice of CJK or symbols can still exceed the window: halve until it fits.
        stack = [piece]
        while stack:
            part = stack.pop(0)
            if counter[part] <= limit or len(part) == 1:
                out.append(part)
            else:
                middle = len(part) // 2
                stack[:0] = [part[:middle], part[middle:]]
    return out


def _pack(atoms: list[_Atom], target: int, overlap: int, limit: int) -> Iterable[tuple[str, int, int]]:
    start = 0  # first atom of the current chunk (may be overlap carried from the last one)
    fresh = 0  # first atom not yet emitted in any chunk
    while fresh < len(atoms):
        total, end = 0, start
        while end < len(atoms) and (end <= fresh or total + atoms[end].tokens <= target):
            total += atoms[end].tokens
            end += 1
        # Prefer ending where a paragraph ends, if that still leaves a reasonably full chunk.
        if end < len(atoms) and not atoms[end].para_start:
            running = total
            for cut in range(end - 1, fresh, -1):
                running -= atoms[cut].tokens
                if atoms[cut].para_start and running >= target // 2:
                    end = cut
                    break
        body = "".join((a.joiner if i else "") + a.text for i, a in enumerate(atoms[start:end]))
        yield body, atoms[start].line, atoms[end - 1].line
        fresh = end
        if fresh >= len(atoms):
            break
        # Overlap: carry trailing atoms of this chunk (never all of it), but never so many that
        # with the next atom the chunk would breach the window.
        previous, start, carried = start, end, 0
        while start - 1 > previous and carried + atoms[start - 1].tokens <= overlap:
            carried += atoms[start - 1].tokens
            start -= 1
        while start < fresh and carried + atoms[fresh].tokens > limit:
            carried -= atoms[start].tokens
            start += 1
