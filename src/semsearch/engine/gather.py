"""`gather`: search results packed into one Markdown block, ready for a context window.

Each hit gets a header (`### [1/5]  my-api  ·  src/auth/session.py  ·  line 42  ·  [both 0.688]`)
and its text — widened by `context_lines` read from the file (confined like `cat`) — in a
fence longer than any backtick run inside it, so retrieved text stays data. With
`max_tokens`, whole hits are packed until the budget (counted with the model's tokenizer)
is spent, and the block says how many were left out.
"""

from __future__ import annotations

import time

from semsearch.config import Settings
from semsearch.corpus import files
from semsearch.corpus.folders import FolderRegistry
from semsearch.engine.retrieval import SearchEngine
from semsearch.schemas import GatherRequest, GatherResponse, Hit, SearchRequest, SearchResponse
from semsearch.text import escape_invisible, fence_for, one_line
from semsearch.timing import Timings

FENCE_LANGUAGES = {
    "py": "python", "js": "javascript", "ts": "typescript", "tsx": "tsx", "kt": "kotlin", "dart": "dart",
    "java": "java", "go": "go", "rs": "rust", "rb": "ruby", "sh": "bash", "md": "markdown", "sql": "sql",
    "yml": "yaml", "yaml": "yaml", "json": "json", "c": "c", "h": "c", "cpp": "cpp", "swift": "swift",
}  # fmt: skip


def block(number: int, total: int, hit: Hit, text: str, first_line: int) -> str:
    """One hit: a one-line header, then the text in a fence. Every name in the header comes from
    the corpus (file names, headings), so each is escaped onto that one line: no file can print a
    header, or any line, outside the fences."""
    where = f"{hit.location}, line {first_line}" if hit.location else f"line {first_line}"
    header = f"### [{number}/{total}]  {one_line(hit.folder)}  ·  {one_line(hit.rel_path)}  ·  {where}  ·  {hit.label}"
    if hit.heading:
        header += f"  ·  § {one_line(hit.heading)}"
    text = escape_invisible(text)  # what a model would read, made visible to the person too
    fence = fence_for(text)
    language = FENCE_LANGUAGES.get(hit.rel_path.rpartition(".")[2].lower(), "")
    return f"{header}\n{fence}{language}\n{text}\n{fence}\n"


def with_context(hit: Hit, lines: int, folders: FolderRegistry, settings: Settings) -> tuple[str, int]:
    if lines == 0 or hit.page is not None:  # PDF line numbers are per page; keep the chunk as is
        return hit.text, hit.start_line
    try:
        opened = files.read(hit.file_path, folders, settings)
    except files.Refused:
        return hit.text, hit.start_line
    if opened.folder.name != hit.folder or opened.rel_path != hit.rel_path:  # resolved elsewhere: not this hit's file
        return hit.text, hit.start_line
    start = max(1, hit.start_line - lines)
    end = min(len(opened.lines), hit.end_line + lines)
    return "\n".join(opened.lines[start - 1 : end]), start


def gather(
    request: GatherRequest, engine: SearchEngine, folders: FolderRegistry, timings: Timings | None = None
) -> GatherResponse:
    """`folders`: the registry as the caller's token sees it; context lines are read through it."""
    search_fields = set(SearchRequest.model_fields)
    timings = timings or Timings()
    result = engine.search(SearchRequest(**request.model_dump(include=search_fields)), timings)
    packing = time.perf_counter()
    try:
        return _pack(request, result, engine, folders)
    finally:
        timings.add("pack", time.perf_counter() - packing)


def _pack(
    request: GatherRequest, result: SearchResponse, engine: SearchEngine, folders: FolderRegistry
) -> GatherResponse:
    settings, embedder = engine.settings, engine.embedder
    note = f"_Note: {result.query_note}_\n\n" if result.query_note else ""
    covered = result.coverage.note if result.coverage and result.coverage.note else None
    tail = f"\n_Coverage: {covered}._\n" if covered else ""
    if not result.hits:
        markdown = note + (result.message or "No results.") + tail
        return GatherResponse(markdown=markdown, hits=0, left_out=0, tokens=0, query_note=result.query_note,
                              coverage=result.coverage)  # fmt: skip
    blocks = []
    for number, hit in enumerate(result.hits, start=1):
        text, first = with_context(hit, request.context_lines, folders, settings)
        blocks.append(block(number, len(result.hits), hit, text, first))
    counts = embedder.count_tokens(blocks)
    kept, used = [], 0
    for text, tokens in zip(blocks, counts, strict=True):
        if request.max_tokens is not None and used + tokens > request.max_tokens:
            break
        kept.append(text)
        used += tokens
    left_out = len(blocks) - len(kept)
    markdown = note + "\n".join(kept)
    if left_out:
        markdown += f"\n_{left_out} more result(s) left out to stay within {request.max_tokens} tokens._\n"
    markdown += tail
    return GatherResponse(
        markdown=markdown, hits=len(kept), left_out=left_out, tokens=used, query_note=result.query_note,
        coverage=result.coverage,
    )  # fmt: skip
