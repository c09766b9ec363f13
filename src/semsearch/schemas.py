"""The REST wire types, shared by the API (server) and every client (indexer, CLI, MCP).

JSON field names are camelCase (`filePath`, `startLine`); Python attributes are
snake_case. Requests (`Request`) forbid unknown fields: a typo in a parameter is an error,
not a silently ignored option. Responses (`Wire`) ignore unknown fields: a newer server that
adds a field does not break an older CLI or MCP bridge.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    Base64Bytes,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)
from pydantic.alias_generators import to_camel

from semsearch.limits import (
    MAX_BATCH_FILES,
    MAX_CHUNK_CHARS,
    MAX_CHUNK_NAMES,
    MAX_CONTEXT_LINES,
    MAX_FILE_CHUNKS,
    MAX_FILE_SYMBOLS,
    MAX_FILTER_CHARS,
    MAX_FILTER_ITEMS,
    MAX_GATHER_TOKENS,
    MAX_GREP_RESULTS,
    MAX_LOG_LINES,
    MAX_NAME_CHARS,
    MAX_PATTERN_CHARS,
    MAX_QUERY_CHARS,
    MAX_RESULTS,
    MAX_URGENT_PATHS,
)

# Folder names appear in URLs, filters and results: a safe, short alphabet.
FOLDER_NAME = r"^[A-Za-z0-9._-]{1,64}$"


def _not_dots(name: str) -> str:
    if name in (".", ".."):
        raise ValueError("a folder name cannot be . or ..")
    return name


FolderName = Annotated[str, StringConstraints(pattern=FOLDER_NAME), AfterValidator(_not_dots)]


def relative_path_problem(path: str) -> str | None:
    """Why `path` is not a file's path relative to its folder as the indexer writes it (`/`
    separators, no `.` or `..` part, no leading `/`, no NUL), or None. Every path the index
    stores is one: a read joins it to the folder's path, so `../beta/x` would read another folder."""
    if not path:
        return "an empty path"
    if "\x00" in path:
        return "a NUL character"
    if path.startswith("/"):
        return "an absolute path"
    if any(part in ("", ".", "..") for part in path.split("/")):
        return "an empty, `.` or `..` part"
    return None


def _relative_path(path: str) -> str:
    problem = relative_path_problem(path)
    if problem is not None:
        raise ValueError(f"{path[:200]!r} has {problem}; send the path relative to the folder, with / separators")
    return path


RelPath = Annotated[str, StringConstraints(max_length=4096), AfterValidator(_relative_path)]


class Wire(BaseModel):
    """A response (or a part of one): unknown fields are ignored."""

    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True, validate_by_alias=True, extra="ignore")

    def dump(self) -> dict:
        return self.model_dump(mode="json", by_alias=True)


class Request(Wire):
    """What a client sends: unknown fields are an error."""

    model_config = ConfigDict(extra="forbid")


# --- corpus -------------------------------------------------------------------


class FolderIn(Request):
    path: str | None = Field(
        None, max_length=4096, description="Absolute path of a directory to index (as the API sees it)."
    )
    url: str | None = Field(
        None,
        max_length=4096,
        description="Instead of a path: a git repository (https://, ssh://, git://, file://, git@host:path) the "
        "API keeps a shallow clone of in its data directory, fetched before each index run. Credentials come "
        "from git's own configuration; a URL carrying a password is refused.",
    )
    branch: str | None = Field(None, max_length=255, description="With `url`: the branch (default: the remote's).")
    name: FolderName | None = Field(
        None, description="Name for results and filters (letters, digits, `._-`, at most 64); default: the basename."
    )
    allow_outside_root: bool = Field(
        False, description="Register a folder outside SEMSEARCH_CORPUS_ROOT (system trees are refused anyway)."
    )

    @model_validator(mode="after")
    def _path_or_url(self) -> FolderIn:
        if (self.path is None) == (self.url is None):
            raise ValueError("send either `path` (a directory) or `url` (a git repository), not both or neither")
        if self.branch is not None and self.url is None:
            raise ValueError("`branch` goes with `url`")
        return self


class Synced(Wire):
    """A repository folder brought up to date (`POST /v1/folders/{name}/sync`)."""

    folder: str
    url: str
    before: str = Field(description="The commit the clone was at.")
    after: str = Field(description="The commit it is at now (the same when nothing changed).")


class Folder(Wire):
    name: str
    path: str
    url: str | None = Field(None, description="The repository a managed clone follows (added by URL).")
    branch: str | None = None
    files: int = 0
    chunks: int = 0
    embedded_chunks: int | None = Field(
        None, description="Of `chunks`, embedded so far: fewer while a cold run embeds what it made findable by words."
    )
    last_indexed: datetime | None = None


# --- what the indexer writes --------------------------------------------------


class FileStamp(Request):
    path: RelPath = Field(description="Path relative to the folder, with / separators.")
    mtime_ns: int
    size: int
    sha256: str


class ManifestEntry(FileStamp):
    model_config = ConfigDict(extra="ignore")  # a response
    path: str  # as stored: a row an older version accepted is listed (and so deleted), not a 500
    chunks: int
    embedded: bool = Field(
        True, description="False: its chunks are findable by their words only; a run embeds them next."
    )


class Manifest(Wire):
    folder: str
    files: list[ManifestEntry]


class ChunkIn(Request):
    start_line: int = Field(ge=1)
    end_line: int = Field(ge=1)
    text: str = Field(max_length=MAX_CHUNK_CHARS)
    heading: str | None = Field(None, description="Markdown heading breadcrumb, or code's symbol path.")
    page: int | None = None
    kind: str | None = Field(None, description="Code: what the chunk holds (function, method, class, …).")
    context: str | None = Field(
        None,
        max_length=MAX_CHUNK_CHARS,
        description="What was embedded before the text (code: path › breadcrumb, a split function's signature).",
    )
    flags: list[str] = Field([], max_length=8, description="What screening found: hidden-characters, …")
    meta: DocMeta | None = Field(
        None, description="The chunk's own title, date and tags (a mailbox's message), over the file's."
    )
    names: list[Annotated[str, Field(max_length=MAX_NAME_CHARS)]] = Field(
        [],
        max_length=MAX_CHUNK_NAMES,
        description="Code: the definitions starting in the chunk, in words (`method set from in Itertools`), "
        "each embedded alone (`nameVectors`): the vector arm scores the chunk by the best of its cosine and theirs.",
    )


class SymbolIn(Request):
    """A definition in a source file, as the indexer's parse found it."""

    name: str = Field(max_length=MAX_FILTER_CHARS)
    kind: str = Field(max_length=32)
    symbol_path: str = Field(max_length=4096, description="Enclosing symbols, then its own name, joined by ` › `.")
    start_line: int = Field(ge=1)
    end_line: int = Field(ge=1)
    signature: str = Field("", max_length=1000)


def _bounded_tags(value: Any) -> Any:
    """Frontmatter is the author's: more tags than a filter can name are kept up to the bound, not refused."""
    if isinstance(value, list):
        return [str(t)[:MAX_FILTER_CHARS] for t in value[: MAX_FILTER_ITEMS * 2] if str(t)]
    return value


class DocMeta(Request):
    """Markdown frontmatter kept as metadata (lifecycle and filters use it)."""

    title: str | None = None
    status: str | None = None
    superseded_by: str | None = None
    date: str | None = None
    tags: Annotated[list[str], BeforeValidator(_bounded_tags)] = []


class FileChunks(FileStamp):
    chunks: list[ChunkIn] = Field(max_length=MAX_FILE_CHUNKS)
    vectors: Base64Bytes = Field(description="len(chunks) x dimension little-endian float32, base64.")
    name_vectors: Base64Bytes = Field(
        b"", description="The chunks' `names` embedded, in order: (all names) x dimension float32, base64."
    )
    meta: DocMeta = DocMeta()
    symbols: list[SymbolIn] = Field([], max_length=MAX_FILE_SYMBOLS, description="Definitions (source code).")


class IndexBatch(Request):
    """Changes to one folder, applied file by file: each file's chunks are replaced atomically."""

    lease: str | None = Field(None, description="The writer's lease on the folder, when it holds one.")
    chunking: dict[str, int] | None = Field(None, description="Chunker parameters, recorded with the index.")
    chunker: str | None = Field(
        None, description="How source code was chunked (`syntax-1`, `paragraph`): part of the index's identity."
    )
    model_id: str
    dimension: int
    upserts: list[FileChunks] = Field([], max_length=MAX_BATCH_FILES)
    touches: list[FileStamp] = Field(
        default=[], max_length=MAX_BATCH_FILES, description="Content unchanged, new mtime: no re-embedding."
    )
    deletes: list[RelPath] = Field(
        default=[], max_length=MAX_BATCH_FILES, description="Relative paths no longer on disk."
    )
    without_vectors: bool = Field(
        False,
        description="The upserts carry no vectors (`vectors` and `nameVectors` empty): their chunks are found by "
        "BM25, symbols and grep at once, and the manifest says they are not embedded until the same files come "
        "again with vectors (a cold run's first pass).",
    )


class SkippedIn(Request):
    """What a full pass over a folder left out, by rule (the indexer sends it after the pass)."""

    lease: str | None = None
    skipped_by: dict[str, int] = Field(description="Files left out per rule: secret, binary, too-large, …")


class Coverage(Wire):
    """What the answer did not cover, for the folders and path filters in scope."""

    files: int = Field(description="Indexed files in scope.")
    stale: int = Field(description="Of those, changed or gone on disk since they were indexed.")
    checked: int = Field(description="How many were checked for staleness (a bounded stat pass).")
    skipped: dict[str, int] = Field(
        {}, description="Files the last full pass of each folder left out, by rule (whole folders, not filtered)."
    )
    indexed_at: datetime | None = Field(None, description="When the least recently indexed folder in scope was.")
    chunks: int = Field(0, description="Chunks of the indexed files in scope.")
    embedded_chunks: int = Field(
        0, description="Of those, embedded: the rest are found by their words only until the run embeds them."
    )
    note: str | None = Field(None, description="One line for a reader, when something in scope is stale or skipped.")


class IndexBatchResult(Wire):
    upserted: int
    touched: int
    deleted: int
    chunks_written: int


class LeaseIn(Request):
    holder: str = Field(max_length=200, description="Who writes: shown to anyone refused meanwhile.")


class Lease(Wire):
    id: str
    folder: str
    holder: str
    since: datetime
    expires_at: datetime


# --- requested index runs -------------------------------------------------------


class RunRequest(Request):
    folder: str | None = Field(
        None, max_length=MAX_FILTER_CHARS, description="A folder name; all folders when omitted."
    )
    scope: str | None = Field(
        None, max_length=4096, description="A path inside the folder (relative): only that part is indexed and pruned."
    )
    force: bool = False
    max_files: int | None = Field(None, ge=1)
    dry_run: bool = Field(False, description="Only say what would be indexed (files, chunks, time, disk).")
    concurrency: int | None = Field(
        None, ge=1, le=16, description="Threads reading and chunking ahead of the embedder."
    )
    verbose: bool = Field(False, description="Also log every file's fate (indexed, excluded and why, deleted).")
    paths: list[RelPath] = Field(
        [],
        max_length=MAX_URGENT_PATHS,
        description="Files just edited (relative to `folder`): a run of that folder already under way embeds them "
        "next, and this request queues one for after it as usual.",
    )

    @model_validator(mode="after")
    def _paths_in_a_folder(self) -> RunRequest:
        if self.paths and self.folder is None:
            raise ValueError("`paths` are relative to one folder: name it in `folder`")
        return self


class UnindexableFile(Wire):
    path: str
    reason: str
    detail: str


class RunSummary(Wire):
    """What a run did; the last stdout line of `semsearch index` and `python -m semsearch.indexer`."""

    files_processed: int = 0
    files_skipped: int = 0
    files_deleted: int = 0
    chunks_written: int = 0
    truncated: bool = False
    seconds: float = 0.0
    skipped_by: dict[str, int] = {}
    unindexable: list[UnindexableFile] = []
    errors: list[str] = []


class RunPlan(Wire):
    """What a run would do (`--dry-run`): nothing is embedded."""

    dry_run: bool = True
    files: int
    files_to_index: int
    chunks: int
    embed_seconds: float | None
    chunks_per_second: float
    disk_bytes: int
    skipped_by: dict[str, int] = {}


class RunLine(Request):
    """One line of a run's output, as a local run prints it: `out` for stdout, `err` for stderr."""

    text: str = Field(max_length=4000)
    stream: Literal["out", "err"] = "out"


class RunProgress(Request):
    files_done: int = 0
    files_total: int = 0
    chunks: int = 0
    folder: str | None = None
    lines: list[RunLine] = Field(
        [], max_length=MAX_LOG_LINES, description="New output lines of the run (per-folder lines, calibration)."
    )


class RunFinish(Request):
    summary: RunSummary | None = None
    plan: RunPlan | None = None
    error: str | None = None
    lines: list[RunLine] = Field([], max_length=MAX_LOG_LINES)


class RunLogLine(RunLine):
    model_config = ConfigDict(extra="ignore")


class RunAsked(RunRequest):
    """The request, as part of a response: tolerant like every response."""

    model_config = ConfigDict(extra="ignore")


class RunReport(RunProgress):
    model_config = ConfigDict(extra="ignore")


FINISHED = ("done", "failed", "cancelled")  # the states a run ends in


class Run(Wire):
    id: str
    state: Literal["queued", "running", "done", "failed", "cancelled"] | str
    request: RunAsked
    cancel_requested: bool = Field(False, description="Cancelled while running: its worker stops at its next report.")
    progress: RunReport = RunReport()
    summary: RunSummary | None = None
    plan: RunPlan | None = None
    log: list[RunLogLine] = Field([], description="The run's last output lines (the same a local run prints).")
    log_offset: int = Field(0, description="How many earlier lines were dropped from the front of `log`.")
    error: str | None = None
    worker: str | None = None
    requested_by: str | None = Field(None, description="The token that asked for it (None: an open API).")
    created_at: datetime
    started_at: datetime | None = None
    reported_at: datetime | None = Field(None, description="The worker's last report (claim, progress).")
    finished_at: datetime | None = None
    urgent: dict[str, list[str]] = Field(
        {},
        description="Files asked for by name (`paths`) since its worker last reported, by folder: it embeds them "
        "next. Handed to the worker with its next progress report's answer.",
    )


class ClaimIn(Request):
    worker: str = Field(max_length=200)
    wait_s: float = Field(20.0, ge=0, le=60, description="Long-poll: how long to wait for a queued run.")


# --- search ------------------------------------------------------------------


def split_commas(value: Any) -> Any:
    """`"a,b"` and `["a", "b"]` both mean two values: CLI flags and JSON clients alike; repeats count once."""
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(dict.fromkeys(value))
    return value


FilterValue = Annotated[str, StringConstraints(min_length=1, max_length=MAX_FILTER_CHARS)]
StrList = Annotated[
    Annotated[list[FilterValue], Field(max_length=MAX_FILTER_ITEMS)] | None, BeforeValidator(split_commas)
]


Multiplier = Annotated[float, Field(ge=0.05, le=20)]
PathBoosts = Annotated[dict[FilterValue, Multiplier], Field(max_length=MAX_FILTER_ITEMS)]


class SearchRequest(Request):
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="A question, a phrase or an identifier.")
    k: int = Field(10, ge=1, le=MAX_RESULTS, description="How many results.")
    mode: Literal["hybrid", "vector", "lexical"] | None = Field(
        None, description="Ranking: hybrid (default unless hybridSearch is off), vector only, or BM25 only."
    )
    folder: StrList = Field(None, description="Only these folders (names).")
    path_glob: StrList = Field(None, description="Only paths matching these globs, e.g. `src/**/*.py`.")
    exclude: StrList = Field(None, description="Skip paths containing these fragments (case-insensitive).")
    ext: StrList = Field(None, description="Only these file extensions, e.g. `py,md`.")
    tags: StrList = Field(
        None, description="Only documents with any of these frontmatter tags (a mail's sender: `from:ADDRESS`)."
    )
    date_from: date | None = Field(
        None, description="Only documents dated on/after (frontmatter or message date, else mtime)."
    )
    date_to: date | None = Field(None, description="Only documents dated on/before.")
    include_all: bool = Field(False, description="Also superseded/archived documents and default-excluded paths.")
    min_score: float | None = Field(None, ge=-1, le=1, description="Cosine threshold for this query.")
    group: Literal["chunk", "file"] = Field("chunk", description="`file`: at most `perFile` chunks per file.")
    per_file: int = Field(1, ge=1, le=50, description="With group=file, chunks kept per file.")
    arms: bool = Field(False, description="Diagnostics: also return each arm's raw candidate list.")
    path_boosts: PathBoosts | None = Field(
        None,
        description='Multiply the fused score of paths matching a glob, e.g. `{"**/tests/**": 0.8}`; '
        "replaces the server's `pathBoosts` for this query (`{}`: none).",
    )


class HitSummary(Wire):
    """A hit as agents get it (the MCP `search` tool): where it is, its text, and why it is there."""

    file_path: str
    folder: str
    rel_path: str
    start_line: int
    end_line: int
    page: int | None = Field(
        None, description="The part the chunk is in: a PDF's page, a notebook's cell, a sheet, a slide, a message."
    )
    location: str | None = Field(
        None, description="That place in words: `page 3`, `cell 12`, `Budget!A12`, `slide 7`, `message 40`."
    )
    heading: str | None = Field(None, description="Markdown heading breadcrumb, or code's symbol path (`A › b`).")
    kind: str | None = Field(None, description="Code: what the chunk holds (function, method, class, …).")
    text: str
    score: float = Field(
        description="The fused score (reciprocal ranks by default; with `fusion=convex` each arm's rescaled "
        "score times its share, in [0, 1]), times any path boost; compare within one answer only."
    )
    cosine: float | None = Field(
        description="Cosine similarity of query and chunk, comparable across queries; null while the chunk is not "
        "embedded yet (found by its words during a cold run)."
    )
    label: str = Field(
        description="Why it is here: [semantic 0.71], [both 0.69], [keyword 0.40], [keyword, not embedded yet] "
        "[exact match], or [quote 0.56] (its text quotes the query: it goes first)."
    )
    stale: bool = Field(False, description="The file changed on disk after it was indexed.")
    flags: list[str] = Field(
        [], description="Screening: hidden-characters, hidden-instructions (hidden from a reader), instructions."
    )


class Hit(HitSummary):
    """…plus each arm's rank and the document's lifecycle metadata (REST, CLI)."""

    vector_rank: int | None = None
    boost: float | None = Field(None, description="The path boost multiplied into `score`, when not 1.")
    bm25_rank: int | None = None
    status: str | None = None
    superseded_by: str | None = None
    date: str | None = None


class ArmHit(Wire):
    id: str
    folder: str
    rel_path: str
    start_line: int = Field(description="The chunk's first line (1-based), as in a hit.")
    end_line: int = Field(description="The chunk's last line.")
    cosine: float | None = None
    bm25: float | None = None


class Arms(Wire):
    """What each arm found before fusion (for `arms: true`): how to see why something ranked."""

    vector: list[ArmHit]
    lexical: list[ArmHit]
    vector_weight: float = Field(description="The vector arm's weight for this query (its share, fused by score).")
    lexical_weight: float = Field(
        description="The BM25 arm's weight for this query: its share fused by score, its RRF weight after the "
        "per-query balance fused by rank."
    )
    lexical_terms: list[str] = Field(description="The query terms the BM25 arm used (informative ones in hybrid).")
    question: bool = Field(False, description="The query read as a question in words (moves BM25's weight).")
    path_boosts: dict[str, float] = Field({}, description="The path boosts applied after fusion.")


class SearchResponse(Wire):
    query: str
    hits: list[Hit]
    model_id: str
    mode: str
    took_ms: float
    message: str | None = Field(None, description="Why the answer is empty, when it is.")
    query_note: str | None = Field(
        None, description="The query looked like a pasted prompt: what was searched for instead, and why."
    )
    query_used: str | None = Field(None, description="What was searched for, when it is not `query` as sent.")
    coverage: Coverage | None = None
    arms: Arms | None = None


class Calibration(Wire):
    pairs: int
    p99: float | None
    suggested_min_score: float | None
    min_score: float


class ResetIn(Request):
    confirm: bool = False


# --- reading, grep, gather --------------------------------------------------------------


class FileContent(Wire):
    file_path: str
    folder: str
    rel_path: str
    start_line: int
    end_line: int
    total_lines: int
    text: str


class FlaggedChunk(Wire):
    start_line: int
    end_line: int
    flags: list[str]


class Explained(Wire):
    """Why a path is, or is not, indexed (`semsearch explain`, `GET /v1/explain`)."""

    path: str
    folder: str | None = None
    rel_path: str | None = None
    indexed: bool
    rule: str = Field(description="included, or the rule that excluded it (git-ignored, secret, outside, …).")
    detail: str
    chunks: int = 0
    in_index: bool = False
    stale: bool | None = None
    secrets_redacted: int = 0
    boost: float = Field(1.0, description="The server's path boost for this path (pathBoosts), 1 if none.")
    flagged: list[FlaggedChunk] = Field([], description="Chunks of this file that screening flagged, and why.")

    def lines(self) -> list[str]:
        """The answer in words, as `semsearch explain` and the MCP `explain` tool print it."""
        out = [f"{self.rel_path or self.path}" + (f"  (folder {self.folder})" if self.folder else "")]
        out.append(f"  {'indexed' if self.indexed else 'not indexed'}: {self.rule} — {self.detail}")
        if self.rel_path:
            state = "not in the index yet" if not self.in_index else f"{self.chunks} chunks in the index"
            if self.stale:
                state += " (changed since indexed: run `semsearch index`)"
            out.append(f"  {state}")
        if self.secrets_redacted:
            out.append(f"  {self.secrets_redacted} secret(s) redacted before indexing ([REDACTED:…] in results)")
        for flagged in self.flagged:
            lines = f"lines {flagged.start_line}-{flagged.end_line}"
            out.append(f"  ⚠ {lines}: {', '.join(flagged.flags)} (kept in the index, labelled in results)")
        return out


class Symbol(Wire):
    """A definition found by the indexer's parse (`GET /v1/symbols`, `GET /v1/outline`)."""

    name: str
    kind: str
    symbol_path: str = Field(description="Enclosing symbols, then its own name: `Headers › setlistdefault`.")
    folder: str
    rel_path: str
    file_path: str
    start_line: int
    end_line: int
    signature: str = Field(description="The definition's first line(s), up to its body.")
    stale: bool = Field(False, description="The file changed on disk after it was indexed.")


class Symbols(Wire):
    symbols: list[Symbol]
    truncated: bool = Field(False, description="More matched than `limit`; narrow by kind or folder.")
    message: str | None = Field(None, description="Why the answer is empty, when it is.")


class Outline(Wire):
    folder: str
    rel_path: str
    file_path: str
    symbols: list[Symbol]
    message: str | None = Field(None, description="Why there is nothing to show, when there is not.")


class Optimized(Wire):
    chunks: int
    version: int | None = None
    built: list[str] = Field(
        default_factory=list,
        description="Indices this step built: the vector index by its kind (`IVF_SQ`), `FTS`; empty when it "
        "only folded new rows into the ones there.",
    )


class GrepRequest(Request):
    pattern: str = Field(
        min_length=1, max_length=MAX_PATTERN_CHARS, description="Text to find (a literal unless regex=true)."
    )
    folder: StrList = Field(None, description="Only these folders.")
    file_glob: StrList = Field(None, description="Only files matching these globs, e.g. `*.py`.")
    case_sensitive: bool = Field(False, description="Match case exactly (default: ignore case).")
    regex: bool = Field(False, description="RE2 syntax (linear time: no catastrophic backtracking).")
    max_results: int = Field(100, ge=1, le=MAX_GREP_RESULTS, description="Matched lines returned at most.")


class GrepMatch(Wire):
    folder: str
    rel_path: str
    file_path: str
    line: int
    text: str


class GrepResponse(Wire):
    matches: list[GrepMatch]
    files_searched: int
    truncated: bool = Field(description="Stopped at maxResults or the time budget; narrow the search.")


class GatherRequest(SearchRequest):
    context_lines: int = Field(0, ge=0, le=MAX_CONTEXT_LINES, description="Lines of the file around each chunk.")
    max_tokens: int | None = Field(
        None, ge=50, le=MAX_GATHER_TOKENS, description="Pack whole hits up to this budget (model tokens)."
    )


class GatherResponse(Wire):
    markdown: str
    hits: int
    left_out: int
    tokens: int
    query_note: str | None = Field(None, description="As in search: the query looked like a pasted prompt.")
    coverage: Coverage | None = None


# --- tokens ------------------------------------------------------------------


class TokenIn(Request):
    name: str = Field(pattern=r"^[A-Za-z0-9._-]{1,64}$", description="Who it is for (shown in the audit log).")
    scope: Literal["read", "write", "admin"]
    folders: list[Annotated[str, StringConstraints(max_length=MAX_FILTER_CHARS)]] | None = Field(
        None,
        min_length=1,
        max_length=MAX_FILTER_ITEMS,
        description="Only these folders (at least one; omit the field for every folder).",
    )
    rate_per_s: float | None = Field(
        None, gt=0, le=100_000, description="Requests per second (default: SEMSEARCH_TOKEN_RATE_PER_S)."
    )
    long_polls: int | None = Field(
        None, ge=1, le=1000, description="Long polls in flight (default: SEMSEARCH_TOKEN_LONG_POLLS)."
    )


class TokenView(Wire):
    name: str
    scope: str
    folders: list[str] | None = None
    created_at: str = ""
    rate_per_s: float | None = None
    long_polls: int | None = None


class TokenCreated(TokenView):
    secret: str = Field(description="Shown once: only its sha256 is stored.")


# --- snapshots ---------------------------------------------------------------

SNAPSHOT_FORMAT = "semsearch-snapshot"
SNAPSHOT_MANIFEST = "snapshot.json"  # the archive's first member; the data members follow it


class SnapshotFolder(Wire):
    name: FolderName
    path: str = Field(description="Relative to the snapshot's root (`.` when the folder is the root).")


class SnapshotMember(Wire):
    sha256: str
    bytes: int


class SnapshotManifest(Wire):
    """What `snapshot.json` says about the archive: enough to verify it and to refuse it
    before anything in the index changes."""

    format: str = SNAPSHOT_FORMAT
    format_version: int = 1
    semsearch_version: str
    created_at: datetime
    schema_version: int
    model_id: str
    dimension: int
    chunker: str | None = None
    chunking: dict[str, int] = Field(default_factory=dict)
    root: str = Field(description="The absolute path the folders were under where it was exported.")
    folders: list[SnapshotFolder]
    files: int
    chunks: int
    symbols: int
    excluded: dict[str, int] = Field(
        default_factory=dict,
        description="Indexed files left out because the indexer's rules now exclude them (by rule).",
    )
    skipped: dict[str, dict[str, int]] = Field(default_factory=dict)
    members: dict[str, SnapshotMember]
    digest: str = Field(description="sha256 of this manifest without `digest`; it covers every member's sha256.")


class SnapshotOrigin(Wire):
    """Where an imported index came from (in /v1/status until the index is reset)."""

    digest: str
    created_at: datetime
    imported_at: datetime
    semsearch_version: str
    folders: list[str]


class SnapshotImported(Wire):
    digest: str
    folders: list[Folder] = Field(description="The snapshot's folders, at their paths on this machine.")
    kept: list[str] = Field(description="Folders that were registered here and not in the snapshot: unchanged.")
    files: int
    chunks: int
    next_step: str


# --- status ------------------------------------------------------------------


class ModelSwitchIn(Request):
    """Switch the index to the model an embedder service serves (`POST /v1/model/switch`)."""

    embedder: str = Field(
        pattern=r"^[A-Za-z0-9.:/\[\]_,-]{1,256}$",
        description="Where that embedder listens, as SEMSEARCH_EMBEDDER_ADDR takes it (host:port, a pool "
        "host1:port,host2:port, or dns:///name:port): a `semsearch embedder` started with the new model.",
        examples=["127.0.0.1:8767"],
    )


class ModelSwitch(Wire):
    """A switch to another embedding model: its vectors are built beside the old ones, which keep
    answering, then swapped in at once (`GET /v1/model/switch`)."""

    state: Literal["none", "building", "paused", "done", "failed", "cancelled"] = Field(
        description="building: under way; paused: recorded in the index but not running (started again "
        "with the same request, or by the API at start); done: the index uses the new model."
    )
    from_model: str | None = None
    to_model: str | None = None
    target: str | None = Field(None, description="Where the new model runs: an embedder's address, or in a "
                               "library's process the model folder or endpoint.")  # fmt: skip
    embedded: int = Field(0, description="Chunks with the new model's vector so far.")
    total: int = Field(0, description="Chunks in the index.")
    truncated: int = Field(
        0, description="Chunks longer than the new model's window, embedded from their start (rebuild to re-chunk)."
    )
    error: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None


class EmbedderStatus(Wire):
    address: str
    ready: bool
    model_id: str | None = None
    dimension: int | None = None
    max_sequence_length: int | None = None
    quantisation: str | None = None
    cpu: str | None = Field(
        None, description="The embedder's CPU, its vector extensions, and whether its compute path is the faster one."
    )
    error: str | None = None


class LocalCopyStatus(Wire):
    """A query replica's copy of an index on object storage (SEMSEARCH_LOCAL_COPY_MB)."""

    answering: bool = Field(description="Searches read the copy (false: the store, while the first copy is made "
                            "or when the index is over the bound).")  # fmt: skip
    files: int
    bytes: int
    synced_at: datetime | None = Field(None, description="The last time the copy matched the store.")
    error: str | None = Field(None, description="Why the last sync failed (the copy answers as it was).")
    store_bytes: int | None = Field(None, description="The tables' size on the store, when it is over the bound.")


class Status(Wire):
    version: str
    role: str = Field("all", description="all, or over a shared index: writer or query (a read replica).")
    notice: str | None = Field(None, description="Something an operator should act on (e.g. an index to rebuild).")
    data_dir: str | None = Field(None, description="Where the index lives (shown to tokens that cover every folder).")
    index_bytes: int | None = Field(None, description="The whole index's size (tokens that cover every folder).")
    embedder: EmbedderStatus
    folders: list[Folder]
    files: int
    chunks: int
    vector_index: str = Field(
        description="`IVF_SQ` once the table has SEMSEARCH_ANN_MIN_ROWS chunks (built by the indexer's "
        "optimize step; an index of another kind an earlier version built is named as it is until that "
        "step rebuilds it), else `flat` (exact scan)."
    )
    full_text_index: bool
    in_memory: int | None = Field(
        None,
        description="Chunks held in memory for searches at the table's current version (SEMSEARCH_RESIDENT_ROWS); "
        "null while none is: over the bound, just written to (a reload follows within seconds), or switched off.",
    )
    in_memory_bytes: int | None = Field(
        None,
        description="What that copy takes: its rows and vectors, and from SEMSEARCH_ANN_MIN_ROWS chunks its IVF index.",
    )
    local_copy: LocalCopyStatus | None = Field(
        None,
        description="A query replica over object storage: its copy of the index on local disk (tokens that "
        "cover every folder).",
    )
    snapshot: SnapshotOrigin | None = Field(None, description="Set when the index was imported from a snapshot.")
    model_switch: ModelSwitch | None = Field(
        None, description="A switch to another model, under way or just done (tokens that cover every folder)."
    )
    workers: list[str] = Field(
        default_factory=list,
        description="Indexer workers polling for runs or running one now (empty on a query replica: "
        "workers talk to the writer). None: requested runs wait.",
    )
