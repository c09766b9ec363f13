"""Every tunable of semsearch, in one place, each with the reason for its default.

Settings come from the environment (`SEMSEARCH_<NAME>`, e.g. `SEMSEARCH_PORT=9000`)
and fall back to the defaults below. All services and the CLI read this same class,
so a value means the same thing everywhere.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, EnvSettingsSource, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict

from semsearch.ranking import SHIPPED, SHIPPED_GATE

Compute = Literal["int8", "fp32"]  # how the embedding model runs its MatMuls

# Tokens that are only placeholders: `.env.example`'s value and the usual stand-ins.
EXAMPLE_TOKENS = frozenset({"change-me", "changeme", "change_me", "your-token", "token", "secret", "xxx", "example"})
GENERATE_TOKEN = "generate one with `semsearch token generate` (or `openssl rand -hex 24`)"
# The examples' stand-ins for a value the reader fills in (`replace-with-openssl-rand-hex-24`).
PLACEHOLDER_PREFIXES = ("replace-with", "replace-me", "replace_me", "change-me", "changeme", "your-", "<")


def placeholder(value: str) -> bool:
    """A value copied from an example without filling it in."""
    text = value.strip().lower()
    return text in EXAMPLE_TOKENS or text.startswith(PLACEHOLDER_PREFIXES)


def default_data_dir() -> Path:
    # XDG: state that must survive reinstalling belongs under the data home.
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "semsearch"


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "semsearch"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SEMSEARCH_", extra="ignore")

    # --- where things live -------------------------------------------------
    data_dir: Path = Field(
        default_factory=default_data_dir,
        description="Config and index live here together, so one directory is the whole state.",
    )
    index_uri: str | None = Field(
        None,
        description="Where the index lives: default $SEMSEARCH_DATA_DIR/index; or s3://bucket/prefix with the "
        "standard AWS_ENDPOINT_URL / AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_REGION; az://container/prefix "
        "with AZURE_STORAGE_ACCOUNT_NAME / AZURE_STORAGE_ACCOUNT_KEY; gs:// as LanceDB accepts it.",
    )
    s3_allow_http: bool = Field(False, description="Allow a plain-HTTP object-store endpoint (a local SeaweedFS).")
    role: Literal["all", "query", "writer"] = Field(
        "all",
        description="all: one API does everything. Over an index on object storage, query replicas "
        "(`query`) answer searches and reads and refuse writes, naming the writer (`writer`).",
    )
    read_consistency_s: float = Field(
        2.0, gt=0, description="How stale a query replica's view may be: it checks for new versions this often."
    )
    writer_url: str | None = Field(None, description="Where a query replica sends writers (in its refusal).")
    writer_lease_s: float = Field(
        30.0,
        gt=0,
        description="A writer over a shared index holds a lease this long (renewed every third): a "
        "writer that dies is replaced after it; a second writer is refused until then.",
    )
    model: Path | None = Field(
        None,
        # SEMSEARCH_MODEL_DIR: the name before model folders were read as sentence-transformers lays them out.
        validation_alias=AliasChoices("model", "model_dir", "SEMSEARCH_MODEL", "SEMSEARCH_MODEL_DIR"),
        description="A downloaded sentence-embedding model to use instead of the packaged int8 MiniLM: its "
        "folder (an ONNX graph, tokenizer.json, and sentence-transformers' pooling, prompt and length files "
        "when present) or its .onnx file. The index records which model made its vectors.",
    )

    embeddings_url: str | None = Field(
        None,
        description="Embed through an OpenAI-compatible server instead of the local model (Ollama: "
        "http://127.0.0.1:11434/v1; LM Studio, vLLM, llama.cpp's server, TEI): the embedder service forwards to "
        "its /embeddings. Vectors then leave nothing but this machine's network to that server.",
    )
    embeddings_model: str | None = Field(None, description="With embeddingsUrl: the model the server embeds with.")
    embeddings_key: SecretStr | None = Field(
        None, description="With embeddingsUrl: a bearer key, sent in the Authorization header only, never logged."
    )
    embeddings_batch: int = Field(
        32,
        ge=1,
        le=1024,
        description="Inputs per call to the endpoint; halved when the server refuses a call as too large.",
    )
    embeddings_timeout_s: float = Field(
        60.0, gt=0, description="One call's limit; a slower call is retried with back-off, as 429 and 5xx are."
    )
    embeddings_tokenizer: Path | None = Field(
        None,
        description="With embeddingsUrl: the served model's tokenizer.json, for exact chunk budgets; without it "
        "tokens are estimated at one per 3 characters (more than real text has, so chunks stay in the window).",
    )

    # --- network -----------------------------------------------------------
    host: str = Field("127.0.0.1", description="API bind address; loopback so nothing is exposed by accident.")
    port: int = Field(8765, description="API port.")
    embedder_host: str = Field("127.0.0.1", description="Embedder bind address; loopback by default.")
    embedder_port: int = Field(8766, description="Embedder gRPC port.")
    embedder_addr: str | None = Field(
        None,
        description="host:port clients dial for the embedder (compose sets `embedder:8766`); a pool as "
        "host1:8766,host2:8766 or dns:///name:8766, balanced round-robin and health-checked.",
    )
    url: str | None = Field(None, description="Base URL clients use for the API; defaults to loopback:port.")
    token: SecretStr | None = Field(
        None, description="Bearer token the API requires when set; required for a non-loopback bind."
    )
    allowed_hosts: Annotated[list[str], NoDecode] = Field(
        [],
        description="Host names the API answers besides loopback (and its own bind address), e.g. `api` in "
        "compose: any other Host header is refused, which defeats DNS rebinding. `*` allows any.",
    )
    allowed_origins: Annotated[list[str], NoDecode] = Field(
        [],
        description="Browser origins allowed to call the API besides its own pages (e.g. `https://tools.lan`); "
        "other cross-origin requests are refused.",
    )
    corpus_root: Path = Field(
        default_factory=Path.home,
        description="Folders can be registered only under this directory (default: the home directory), so "
        "a stray request cannot register `/` or `/etc`; `semsearch add --allow-outside-root` overrides it.",
    )

    # --- MCP bridge ---------------------------------------------------------
    mcp_host: str = Field("127.0.0.1", description="MCP streamable-HTTP bind; loopback by default.")
    mcp_port: int = Field(8767, description="MCP streamable-HTTP port.")
    tokens_file: Path | None = Field(
        None,
        description="Scoped tokens (JSON or TOML: name, sha256 of the secret, scope, folders); default "
        "$SEMSEARCH_DATA_DIR/tokens.json, written by `semsearch token create` — or, with the index on object "
        "storage, tokens.json beside the index, so the writer and every query replica accept the same tokens.",
    )
    token_rate_per_s: float = Field(
        50.0,
        ge=0,
        description="Requests per second a scoped token may send (0: unlimited): an agent in a loop slows "
        "down instead of starving the others. SEMSEARCH_TOKEN (the operator's, the indexer's) is never limited.",
    )
    token_long_polls: int = Field(
        4, ge=0, description="Long polls (run waits, worker claims) one scoped token may hold open at once (0: any)."
    )
    token_heavy_reads: int = Field(
        2,
        ge=1,
        description="Greps and gathers (reads of files, up to seconds each) one caller may run at once: 40 greps "
        "in flight from one read token, far inside its request rate, once left other clients 5 searches in 30 s.",
    )
    heavy_reads: int = Field(
        8,
        ge=1,
        description="Greps and gathers running at once for all callers together, kept below the server's 40 worker "
        "threads so searches, health checks and other tokens always find a free one.",
    )
    forwarded_allow_ips: str | None = Field(
        None,
        description="Proxies whose X-Forwarded-For the API believes (comma list or `*`); none by default, so the "
        "audit log records the address that connected, not one a local process claims.",
    )
    audit_log: Path | None = Field(
        None, description="Where the audit log's JSON lines go (appended, mode 0600); default: stderr."
    )
    audit_queries: Literal["off", "hash", "text"] = Field(
        "off",
        description="Searches in the audit log: off (private by default), hash (sha256 and length), or the text.",
    )
    mcp_token: SecretStr | None = Field(None, description="Bearer token for MCP over HTTP (default: SEMSEARCH_TOKEN).")
    mcp_server_name: str | None = Field(None, description="The MCP server's name (or `serverName` in .semsearch.json).")
    mcp_tool_description: str | None = Field(
        None, description="What the corpus holds: agents read it to decide when to search (`toolDescription`)."
    )
    mcp_session_idle_s: float = Field(
        600.0, description="An MCP HTTP session with no request for this long is closed (each one holds memory)."
    )
    mcp_max_sessions: int = Field(200, description="Open MCP HTTP sessions at most; more get a 503 until some close.")
    mcp_sessions_per_token: int = Field(
        16,
        ge=1,
        description="Open MCP HTTP sessions one token may hold; more get a 429, so one client cannot take every "
        "session (mcp_max_sessions) from the others.",
    )

    malloc_arenas: int = Field(
        2,
        description="glibc malloc arenas per service (0 = glibc's default of 8 per core): one per thread "
        "let the API's peak reach 859 MB building a 100k index, vs 661 MB with 2 (semsearch/malloc.py).",
    )

    # --- embedder ----------------------------------------------------------
    max_seq_length: int = Field(256, description="MiniLM was trained with 256-token windows; longer is truncated.")
    model_batch_size: int = Field(
        4,
        description="Sequences per onnxruntime call with fp32 compute (requests are length-sorted first); "
        "make bench: 1-8 run alike within noise. int8 compute runs one per call (see embedder/model.py).",
    )
    model_batch_tokens: int = Field(
        512,
        description="…and at most this many padded tokens per call: 2 x 256 instead of 4 x 256 tokens "
        "peaked 50 MB lower at the same chunks/s.",
    )
    query_grace_ms: float = Field(
        50.0,
        description="After a query, bulk embedding pauses this long so the API's search for it runs on idle cores.",
    )
    threads: int | None = Field(None, description="onnxruntime intra-op threads; default = CPUs in our quota.")
    query_threads: int = Field(
        1,
        ge=0,
        description="A short query (up to 32 tokens) runs on a model session of its own with this many threads, "
        "so it does not wait for the core the API's BM25 arm is using (the same vectors, bit for bit). Side by side "
        "at 1M chunks held in memory, where BM25 outlasts the embedding: p50 22.5 -> 20.4 ms, p99 45.8 -> 37.6; "
        "up to 100k chunks alike within noise. The session costs ~60 MB of the embedder's memory; 0: queries "
        "share the documents' session.",
    )
    model_compute: Compute = Field(
        "int8",
        description="int8: the MatMuls run on int8 weights and activations, 1.45-1.6x the chunks/s and queries "
        "in 3.7 vs 6.2 ms, same retrieval quality (make eval); fp32: the reference numerics. Changing it "
        "needs `semsearch index --rebuild` (vectors differ slightly).",
    )
    model_cache_dir: Path = Field(
        default_factory=default_cache_dir,
        description="The prepared model graph (optimised, quantised) is cached here: later starts skip that "
        "work and its memory. Rebuilt when missing; the container image bakes it in.",
    )

    # --- indexer -----------------------------------------------------------
    max_file_size_bytes: int = Field(
        500_000, description="Larger files are almost always generated or data, and would flood results."
    )
    max_document_bytes: int = Field(
        25_000_000, description="PDF/DOCX limit: their size is mostly layout and images, not text."
    )
    global_indexignore: Path | None = Field(
        None, description="An .indexignore applied to every folder; default: `indexignore` in the data dir."
    )
    redact_secrets: bool = Field(
        True, description="Replace private keys and provider tokens with [REDACTED:…] before indexing and reads."
    )
    notebook_outputs: bool = Field(
        False,
        description="Also index notebooks' text outputs (printed streams, results' plain text), under their cell. "
        "Off: outputs are results, often long logs, not the notebook's text; images and widgets are never read.",
    )
    embedder_retry_s: float = Field(
        120.0, description="How long the indexer keeps retrying an unreachable embedder (restarts, upgrades)."
    )
    chunk_tokens: int = Field(200, description="Target chunk size: long enough for context, short of the window.")
    chunk_overlap_tokens: int = Field(35, description="Shared between neighbours so a sentence cut in two is found.")
    chunk_max_tokens: int = Field(254, description="Hard cap: 254 + [CLS] + [SEP] = the model's 256 window.")
    code_chunker: Literal["syntax", "paragraph"] = Field(
        "syntax",
        description="syntax: source code chunked at definitions with symbol paths (tree-sitter), which `make "
        "eval` measured above paragraphs on every code set; paragraph: code chunked like prose.",
    )
    embed_batch_chunks: int = Field(64, description="Chunks per Embed call: amortises gRPC, bounds memory.")
    embed_in_flight: int | None = Field(
        None,
        ge=1,
        le=64,
        description="Embed calls a run keeps in flight. Each embedder runs its calls one after another, so one "
        "call at a time keeps one replica of a pool busy and the rest idle, and calls beyond the pool's size "
        "wait in a replica's queue. Default: one per address of a comma list, 4 for a dns:/// pool, else 1.",
    )
    index_concurrency: int = Field(2, description="Threads reading and chunking ahead of the embedder.")
    write_batch_files: int = Field(32, description="Files per write to the API: few commits, small fragments.")
    lexical_first_files: int = Field(
        64,
        ge=0,
        description="A run with at least this many files to embed first writes them all without vectors, so every "
        "file is found by BM25, symbols and grep within seconds, then embeds them, newest first (what is being "
        "worked on). Measured (make bench's rich, 83 files cold, beside the one-pass run, 2 runs): three rare "
        "identifiers found 3.3-3.4 s after the start, against 5-51 s; the run took x1.00-1.04 as long. The embedding "
        "pass takes what the first pass read and chunked (up to 16M characters): the run x0.94-0.97 in five of six "
        "alternating pairs (x1.07 in one). 0: never; below it a run finishes in seconds anyway.",
    )

    # --- API / search ------------------------------------------------------
    hybrid_search: bool = Field(True, description="Vector + BM25 fused; off = vector only.")
    fusion: Literal["convex", "rrf"] = Field(
        SHIPPED.fusion,  # type: ignore[arg-type]
        description="How the two arms become one ranking: rrf adds 1/(rrf_k + rank) with the per-query balance "
        "below; convex adds their scores, each arm's rescaled per query (its best 1, its 50th 0), weighted by "
        "vector_share. Held out on 22 units convex fell more than 0.02 under the better arm on one, rrf on two; "
        "rrf stays the default because a convex score follows every cosine, so near-ties can swap between the "
        "in-memory copy and LanceDB (docs/evaluation.md).",
    )
    vector_share: float = Field(
        SHIPPED.vector_share, ge=0, le=1, description="convex: the vector arm's share for a query not a question."
    )
    question_vector_share: float = Field(
        SHIPPED.question_vector_share,
        ge=0,
        le=1,
        description="convex: the vector arm's share for a question in words (fusion.is_question), whose common words "
        "BM25 ranks by.",
    )
    rrf_k: float = Field(
        SHIPPED.rrf_k, description="RRF damping: 1/(rrf_k + rank); 10 won on SciFact train (60 is the classic)."
    )
    vector_weight: float = Field(SHIPPED.vector_weight, description="Weight of the vector arm in the fusion.")
    lexical_weight: float = Field(SHIPPED.lexical_weight, description="Weight of the BM25 arm in the fusion.")
    # Per-query arm balance (engine.fusion.lexical_balance): log2(BM25 weight multiplier) =
    # lexical_gain x decisiveness(BM25) - vector_gain x decisiveness(cosine) + bias (+ the question
    # offset). Each default is the shipped one in semsearch/ranking.json, which `make eval` writes with
    # the setting it chose on all its sets (each set's own figure comes from a choice made without it).
    lexical_decisiveness_gain: float = Field(
        SHIPPED.lexical_gain,
        description="How much a decisive BM25 top hit (one score far above the rest) raises BM25's weight.",
    )
    vector_decisiveness_gain: float = Field(
        SHIPPED.vector_gain,
        description="How much a decisive vector top hit lowers BM25's weight (0 and 0 = plain RRF).",
    )
    arm_balance_bias: float = Field(
        SHIPPED.bias, description="log2 offset of BM25's weight when both arms are as decisive."
    )
    arm_balance_bound: float = Field(
        SHIPPED.bound, description="The balance never moves BM25's weight beyond 2**±this."
    )
    question_lexical_bias: float = Field(
        SHIPPED.question_bias,
        description="log2 offset of BM25's weight for a question in words (fusion.is_question): BM25 "
        "ranks by the words a question shares with the whole corpus; held out, every FAQ set gained.",
    )
    lexical_only_weight: float = Field(
        SHIPPED.lexical_only_weight,
        description="Scales BM25's share for a chunk the vector arm did not find at all: 1 counts it as any "
        "other (a quoted line is often one the vector arm never found); under 1 a keyword match adds to an "
        "answer without displacing what both arms agree on.",
    )
    flagged: Literal["show", "label", "hide"] = Field(
        "label",
        description="Chunks screening flagged (hidden characters or instructions): label adds ⚠ and the flag to "
        "the why-label; show leaves the label alone; hide keeps them out of answers (explain still lists them).",
    )
    query_guard: bool = Field(
        True,
        description="A query that is a pasted prompt (over the window, code blocks, instructions to an assistant) "
        "is searched by its request sentence and identifiers, with a queryNote saying so; off = searched as sent.",
    )
    path_boosts: dict[str, float] = Field(
        {"**/tests/**": 0.8, "**/examples/**": 0.8},
        description="Path globs to multipliers of the fused score after fusion. Tests and examples at 0.8: "
        "with code chunked at definitions, a test named for a behaviour outranked its implementation on the "
        "code set with tests, and this moved only that set (make eval). A request's pathBoosts replaces them; "
        "{} for none.",
    )
    pool_multiplier: int = Field(4, description="Each arm returns k x this many candidates, so fusion can reorder.")
    pool_min: int = Field(50, description="…and at least this many: small k still gets a real candidate pool.")
    lexical_max_doc_freq: float = Field(
        SHIPPED_GATE,
        description="In hybrid, a query term counts for BM25 only if in <= max(5, this x chunks) chunks "
        "(1.0 = off: on SciFact train it cost more than it saved).",
    )
    min_score: float = Field(
        0.18,
        description="Cosine below which a result is noise: the highest value that removed no relevant "
        "top-5 result on any eval set (make eval, 'top-5 lost to minScore'); the calibration line after "
        "indexing suggests one for your own index.",
    )
    default_exclude: list[str] = Field(
        ["archive"], description="Path fragments hidden unless --all (case-insensitive), e.g. old material."
    )
    ann_min_rows: int = Field(
        8_000,
        description="From this many chunks an ANN index answers the vector arm: LanceDB's IVF_SQ on disk, and the "
        "in-memory copy's own (resident_rows); below it a flat scan is faster. In process on a quiet machine the two "
        "cross near 9k chunks (5k: flat 1.2 vs ANN 1.5 ms; 10k: 1.9 vs 1.7); in the API, beside the embedder, the "
        "flat scan costs more (10k chunks, side by side: vector arm 3.4 -> 1.6 ms, p50 15.1 -> 11.4 ms; recall@10 "
        "through the API 0.991, the flat scan's).",
    )
    definition_search: bool = Field(
        True,
        description="Code: a chunk is also found by the definitions starting in it, each embedded alone in words "
        "(`method set from in Itertools`), the vector arm taking the better cosine. make eval, held out: function "
        "Hit@10 up on every code set (Go 0.650 -> 0.748, TypeScript 0.560 -> 0.610). Over the in-memory bound "
        "LanceDB searches each chunk's own vector and its definitions' in one query (side by side, 100k chunks: "
        "p50 x1.11); false: the chunk's own cosine only (the definitions are still stored).",
    )
    resident_rows: int = Field(
        200_000,
        ge=0,
        description="A chunks table up to this size is also held in memory for searches: from ann_min_rows chunks "
        "an IVF index of 8-bit codes over its vectors finds candidates, scored exactly from float16 copies; below "
        "it a full scan; BM25 is scored from postings of LanceDB's own terms (its index's scores and order, "
        "checked at load). Side by side over REST at 100k chunks (rich's code with "
        "its definitions): hybrid p50 48-55 -> 24-26 ms, eight clients 22-23 -> 44-47 q/s, recall@10 against exact "
        "search >= 0.99; it costs ~2.7 KB a chunk (API RSS 460 -> 685 MB at 100k). Raised to hold 1M chunks: p50 "
        "20.5-21.2 vs 111-115 ms from LanceDB alone, API RSS 3.7 vs 1.0 GB (make bench-scale). 0: never.",
    )
    local_copy_mb: int = Field(
        10_240,
        ge=0,
        description="A query replica over an index on object storage keeps a copy of the index's files on local disk "
        "(under the data dir), fetching only new ones, and answers from it: make bench-scale, 100k chunks on "
        "SeaweedFS, query p50 x1.0 of local disk with it, x3.5 reading the store. Up to this size (the tables with "
        "the versions the writer keeps: 463 MB at 100k); over it, or at 0, the replica reads the store.",
    )
    version_retention_s: float = Field(
        300, description="Old LanceDB versions are kept this long: a reader still on one must not break."
    )
    housekeeping_every_writes: int = Field(200, description="Compact and clean up after this many writes.")
    max_body_bytes: int = Field(
        1024 * 1024,
        description="Largest request body the API reads, except the indexer's batch writes: a parsed JSON "
        "list costs hundreds of times its size in memory, so bodies stay small.",
    )
    max_batch_body_bytes: int = Field(
        64 * 1024 * 1024, description="Largest indexer batch write (chunks with their vectors, base64)."
    )
    max_snapshot_bytes: int = Field(
        16 * 1024**3,
        description="Largest snapshot archive an import accepts. It is streamed to the data dir, never held in "
        "memory, and is about the size of the index it holds; the data dir needs twice that free.",
    )
    embedder_timeout_s: float = Field(
        60.0,
        description="How long a call to the embedder may take (a batch of 64 long chunks takes a few s on 2 cores); "
        "one over it fails as `embedder at … did not answer within N s` (up but busy or stuck), not as unreachable.",
    )
    lease_ttl_s: float = Field(
        60.0, description="A writer renews its folder lease with every batch; this only frees crashed ones."
    )
    api_timeout_s: float = Field(120.0, description="Writes of large batches can take a while on slow disks.")
    run_silence_s: float = Field(
        600.0,
        gt=0,
        description="A running index run whose worker has not reported for this long is failed (the worker "
        "died or hung; a live one reports with every file, at most every 0.5 s), so it never stays `running`.",
    )
    hook_coalesce_s: float = Field(
        30.0,
        gt=0,
        description="The agent edit hook asks for at most one run per this many seconds: an agent saves "
        "in bursts, and each run re-reads the folder's manifest; later edits wait for one follow-up run.",
    )
    hook_timeout_s: float = Field(
        5.0, gt=0, description="The edit hook's REST calls: an agent waits for the hook, so it must not hang."
    )
    run_claim_wait_s: float = Field(
        10.0,
        description="`semsearch index` gives up on a run no worker took this long: a live worker claims a "
        "queued run within its next long poll (well under a second), so this means none is running.",
    )

    @field_validator("token", "mcp_token")
    @classmethod
    def _real_token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None:
            return None
        secret = value.get_secret_value()
        if not secret.strip():
            raise ValueError(f"the token is empty or blank, which would let anyone in; unset it, or {GENERATE_TOKEN}")
        if placeholder(secret):
            raise ValueError(f"the token is the placeholder {secret.strip()!r}, not a secret; {GENERATE_TOKEN}")
        return value

    @field_validator("allowed_hosts", "allowed_origins", mode="before")
    @classmethod
    def _split_hosts(cls, value: object) -> object:
        # `SEMSEARCH_ALLOWED_HOSTS=api,search.lan` as well as a JSON list.
        if isinstance(value, str):
            return [h.strip() for h in value.strip("[]").replace('"', "").split(",") if h.strip()]
        return value

    @model_validator(mode="after")
    def _replicas_outlive_cleanup(self) -> Settings:
        # A query replica may still read a version up to its consistency interval old; cleanup
        # must keep versions longer than that, or its in-flight reads lose their files.
        if self.role != "all" and self.version_retention_s <= self.read_consistency_s:
            raise ValueError(
                f"SEMSEARCH_VERSION_RETENTION_S ({self.version_retention_s:g}) must be longer than "
                f"SEMSEARCH_READ_CONSISTENCY_S ({self.read_consistency_s:g}): query replicas read versions that old"
            )
        return self

    @cached_property
    def embedder_target(self) -> str:
        return self.embedder_addr or f"{self.embedder_host}:{self.embedder_port}"

    @cached_property
    def api_url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        return (self.url or f"http://{host}:{self.port}").rstrip("/")

    @property
    def index_dir(self) -> Path:
        return self.data_dir / "index"

    @property
    def global_indexignore_path(self) -> Path:
        return self.global_indexignore or self.data_dir / "indexignore"

    @property
    def folders_file(self) -> Path:
        return self.data_dir / "folders.json"

    @property
    def repos_dir(self) -> Path:
        """Where the clones of repositories added by URL live (the data dir's, like the index)."""
        return self.data_dir / "repos"

    @property
    def tokens_path(self) -> Path:
        return self.tokens_file or self.data_dir / "tokens.json"


def setting_problems(exc: ValidationError) -> str:
    """One line naming each bad setting by its variable, for start-up errors."""
    parts = []
    for err in exc.errors():
        name = "_".join(str(p) for p in err["loc"]).upper()
        parts.append(f"SEMSEARCH_{name}: {err['msg'].removeprefix('Value error, ')}")
    return "; ".join(parts)


class _GivenEnvironment(EnvSettingsSource):
    """The environment source reading a given mapping instead of `os.environ`."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = environ
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {name.lower(): value for name, value in self._environ.items()}  # names are case-insensitive


def settings_from(environ: Mapping[str, str], **overrides: Any) -> Settings:
    """Settings from a given environment (a child's, a test's) rather than this process's own, read
    with the same names and parsing, `overrides` on top; `os.environ` is neither read nor written."""

    class Given(Settings):
        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            return init_settings, _GivenEnvironment(settings_cls, environ)

    return Given(**overrides)


def load_settings(prog: str, **overrides: Any) -> Settings:
    """Settings for a service's start-up, built once there and passed down: the environment's, with
    `overrides` (a CLI flag's value; None: not given) on top. A bad value ends the process with one
    line, not a traceback."""
    try:
        return Settings(**{name: value for name, value in overrides.items() if value is not None})
    except ValidationError as exc:
        raise SystemExit(f"{prog}: {setting_problems(exc)}") from None
