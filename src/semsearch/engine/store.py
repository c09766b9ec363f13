"""The LanceDB index: a `chunks` table (text + vectors), a `symbols` table (definitions in
source code) and a `files` table (the manifest).

Only the API process opens these tables, and all writes go through one lock, so there
is a single writer. Each file's chunks are replaced in one LanceDB commit
(`merge_insert` that inserts the new rows and deletes the old ones together), so a
reader or a crash sees either the old or the new version of a file, never both.
A file's symbols are replaced the same way right after its chunks, and its `files` row is
written after both: if we die in between, the manifest still holds the old stamp and the
next indexing run redoes that file.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final, TypeVar, cast

import lancedb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from lancedb.background_loop import LOOP
from lancedb.index import FTS, IvfSq
from lancedb.query import AsyncFTSQuery, AsyncVectorQuery
from lancedb.table import AsyncTable

from semsearch.corpus.folders import RegisteredFolder
from semsearch.engine.facts import IndexFacts
from semsearch.engine.filters import HIDDEN_STATUSES, TRUE, sql_in, sql_str
from semsearch.engine.lexical import lexical_document
from semsearch.engine.local_copy import CopyState, LocalCopy
from semsearch.engine.location import IndexLocation, StoreUnavailable, reason
from semsearch.engine.postings import by_score
from semsearch.engine.resident import (
    SCORE,
    SEARCH_VECTORS,
    Held,
    Resident,
    ResidentCache,
    Stale,
    name_matrices,
    vector_matrix,
)
from semsearch.malloc import trim
from semsearch.schemas import FileChunks, FileStamp, Folder, IndexBatch, ManifestEntry

SCHEMA_VERSION = 2  # 2: chunks have `kind`; the `symbols` table
CHUNKS = "chunks"
# A model switch builds the new model's vectors in the other of these two tables while the one
# named by `meta.json` keeps answering; the switch's commit point is the rewrite of that file.
CHUNK_TABLES = (CHUNKS, "chunks_next")
FILES = "files"
SYMBOLS = "symbols"
RESULT_COLUMNS = [
    "id", "folder", "path", "start_line", "end_line", "page", "heading", "kind", "flags", "text", "mtime_ns",
    "status", "superseded_by", "date",
]  # fmt: skip
# LanceDB's BM25 and vector-distance columns, named in every query's columns: left out, Lance adds
# them anyway and logs a deprecation warning on every search (a line in the API's log each time).
DISTANCE = "_distance"  # and SCORE, the BM25 one (resident.py, whose postings read it too)
# A full-text search asks LanceDB for this many more than it needs, to see whether equal scores run
# past the cut (`Store._fts`).
TIES_AT_THE_CUT = 16
SYMBOL_COLUMNS = ["folder", "path", "name", "kind", "symbol_path", "start_line", "end_line", "signature", "mtime_ns"]
# Stemmed and stop-worded like a good BM25 baseline; our `lexical` column adds identifier parts.
FTS_CONFIG = FTS(stem=True, remove_stop_words=True, lower_case=True, ascii_folding=True, max_token_length=60)
VERSION_RETENTION = timedelta(minutes=5)  # readers older than this may hold old versions open
# A table with rows from before search lists: their vectors are searched beside the lists.
_BESIDE = ThreadPoolExecutor(4, thread_name_prefix="vectors")
# `meta.json` says so once every row of the answering table has a search list (`search_vectors`):
# the writer knows, and counting them (a scan: 0.1-0.4 s at 100k) has no place in a replica's search.
LISTS_COMPLETE = "search_lists_complete"


@dataclass(frozen=True)
class AnnQuery:
    """The query side of the ANN index, chosen with `python -m bench.ann_study` on tables of
    100k to 1M rows (docs/guides/scaling-estimates.md): `nprobes` IVF partitions are scanned (None:
    LanceDB's default, 20), and `refine` x limit candidates go to an exact re-rank. `ef` is
    read by an HNSW index only (one an earlier version built, until `optimize` rebuilds it):
    its graph looks at `ef` x the candidates."""

    refine: int = 2
    ef: int = 4
    nprobes: int | None = 40


ANN_QUERY: Final = AnnQuery()
# IVF over 8-bit scalar-quantised vectors, scanned whole in each probed partition: no graph to
# get lost in. One HNSW graph per partition (IVF_HNSW_SQ) missed whole clusters of near-duplicate
# chunks at 1M rows unless it walked 8 x longer, and took ~30 x longer to build (docs/guides/scaling-estimates.md).
ANN_CONFIG = IvfSq(distance_type="cosine")


def index_kind(index_type: str) -> str:
    """LanceDB's name for an index kind ("IvfHnswSq") as its docs spell it ("IVF_HNSW_SQ")."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", index_type).upper()


ANN_KIND: Final = index_kind(type(ANN_CONFIG).__name__)


class ModelMismatch(ValueError):
    """Vectors from a different model than the one that built the index."""


class InvalidBatch(ValueError):
    """A write whose parts do not fit together (e.g. vectors vs chunks)."""


def chunk_schema(dimension: int) -> pa.Schema:
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("folder", pa.string(), nullable=False),
            pa.field("path", pa.string(), nullable=False),
            pa.field("chunk_index", pa.int32(), nullable=False),
            pa.field("start_line", pa.int32(), nullable=False),
            pa.field("end_line", pa.int32(), nullable=False),
            pa.field("page", pa.int32()),
            pa.field("heading", pa.string()),
            pa.field("kind", pa.string()),
            pa.field("flags", pa.list_(pa.string())),  # what screening found (corpus/screening.py)
            pa.field("text", pa.string(), nullable=False),
            # Null while the chunk is found by its words only (a cold run's first pass, `withoutVectors`).
            pa.field("vector", pa.list_(pa.float32(), dimension)),
            pa.field("mtime_ns", pa.int64(), nullable=False),
            pa.field("sha256", pa.string(), nullable=False),
            pa.field("model_id", pa.string(), nullable=False),
            # Markdown frontmatter, for lifecycle and filters.
            pa.field("title", pa.string()),
            pa.field("status", pa.string()),
            pa.field("superseded_by", pa.string()),
            pa.field("doc_date", pa.string()),
            pa.field("tags", pa.list_(pa.string())),
            pa.field("date", pa.string()),  # frontmatter date, else the file's mtime (YYYY-MM-DD), for filters
            pa.field("lexical", pa.string(), nullable=False),  # what BM25 indexes: text + identifier parts
            # What the model saw before the text (code: path › breadcrumb, a split function's
            # signature), kept so a model switch embeds what a rebuild would. Last: added to older tables.
            pa.field("context", pa.string()),
            # Code: the definitions starting in the chunk, in words (null without any). What the
            # vector arm searches: the chunk's own vector, then its definitions' — one query scores
            # a chunk by the best of them (a second one cost ~10 ms at 100k). Null in rows written
            # before it (the arm then searches `vector` too).
            pa.field("names", pa.list_(pa.string())),
            pa.field(SEARCH_VECTORS, pa.list_(pa.list_(pa.float32(), dimension))),
        ]
    )


# A model's vectors for chunk rows, and for each row its definitions' (None: it has none).
Embedded = tuple[np.ndarray, list[np.ndarray | None]]

# Columns later versions added at the end of the chunks table: an older table gets them (null) when
# the writer opens it; an older snapshot's rows are read without them.
LATER_COLUMNS = ("context", "names", SEARCH_VECTORS)


FILE_SCHEMA = pa.schema(
    [
        pa.field("folder", pa.string(), nullable=False),
        pa.field("path", pa.string(), nullable=False),
        pa.field("mtime_ns", pa.int64(), nullable=False),
        pa.field("size", pa.int64(), nullable=False),
        pa.field("sha256", pa.string(), nullable=False),
        pa.field("chunks", pa.int32(), nullable=False),
        pa.field("indexed_at", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("embedded", pa.bool_()),  # False: its chunks have no vectors yet; null (older rows): they have
    ]
)
# Columns later versions added at the end of the files table (null in older rows: embedded).
LATER_FILE_COLUMNS = ("embedded",)


SYMBOL_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("folder", pa.string(), nullable=False),
        pa.field("path", pa.string(), nullable=False),
        pa.field("name", pa.string(), nullable=False),
        pa.field("name_lower", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("symbol_path", pa.string(), nullable=False),
        pa.field("start_line", pa.int32(), nullable=False),
        pa.field("end_line", pa.int32(), nullable=False),
        pa.field("signature", pa.string(), nullable=False),
        pa.field("mtime_ns", pa.int64(), nullable=False),
    ]
)


class ServingGate:
    """Readers share the index; a snapshot's swap waits for the readers in flight, holds new ones
    back for the few milliseconds of the rename and re-open, then lets them in on the new tables.
    Without it a search that ran during the swap read tables whose files had just moved away (a
    500 naming the data path). Re-entrant per thread, so a read that calls another read never waits
    on itself."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._closed = False
        self._depth = threading.local()

    @contextmanager
    def reading(self) -> Iterator[None]:
        depth = getattr(self._depth, "n", 0)
        if depth == 0:
            with self._cond:
                self._cond.wait_for(lambda: not self._closed)
                self._readers += 1
        self._depth.n = depth + 1
        try:
            yield
        finally:
            self._depth.n = depth
            if depth == 0:
                with self._cond:
                    self._readers -= 1
                    self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._closed)
            self._closed = True
            self._cond.wait_for(lambda: self._readers == 0)
        try:
            yield
        finally:
            with self._cond:
                self._closed = False
                self._cond.notify_all()


R = TypeVar("R")


def served(method: Callable[..., R]) -> Callable[..., R]:
    """A read of the tables, under the serving gate (see ServingGate)."""

    @functools.wraps(method)
    def wrapper(self: Store, *args: Any, **kwargs: Any) -> R:
        with self.gate.reading():
            return method(self, *args, **kwargs)

    return wrapper


@dataclass(frozen=True)
class FolderStats:
    files: int
    chunks: int
    last_indexed: datetime | None
    embedded: int  # chunks of files the manifest does not mark as waiting for their vectors


class Store:
    def __init__(
        self,
        location: IndexLocation,
        retention: timedelta,
        housekeeping_every: int,
        read_consistency: timedelta | None = None,
        resident_rows: int = 0,
        local_copy: LocalCopy | None = None,
        ann_min_rows: int = 0,
    ) -> None:
        """`read_consistency`: a query replica's — it never writes, and sees what the writer commits
        within that interval (LanceDB re-checks for new versions, `refresh` for new tables).
        `resident_rows`: a chunks table up to this size is also held in memory for searches
        (engine/resident.py), from `ann_min_rows` chunks with an ANN index of its own; 0: never.
        `local_copy`: a query replica's copy of an index on object storage (engine/local_copy.py),
        answering once it is made."""
        self.location = location
        self.read_consistency = read_consistency
        self.local_copy = local_copy
        self._next_refresh = 0.0
        if location.local is not None:
            location.local.mkdir(parents=True, exist_ok=True)
        self.notice: str | None = None
        self._set_aside_other_layouts()
        self._lock = threading.RLock()  # re-entered by a snapshot import: paused(), then swap()
        self.gate = ServingGate()
        # Bumped whenever the chunks table is replaced (a model switch): a search that began on
        # the previous one runs again rather than mix two models' vectors.
        self.generation = 0
        self.retention = retention
        self.housekeeping_every = housekeeping_every
        self._writes = 0
        self.resident = ResidentCache(resident_rows, RESULT_COLUMNS, ann_min_rows)
        # Moves with every write to the manifest this process makes or sees (what coverage caches
        # is then old); a counter, as reading the table's version costs a search ~0.2 ms.
        self.manifest_epoch = 0
        self._open()
        if local_copy is not None:
            local_copy.start(self._reopen)

    @property
    def index_dir(self) -> Path:
        """The index's directory, for what only a local index can do (a snapshot import's swap)."""
        if self.location.local is None:
            raise StoreUnavailable(f"the index is on object storage ({self.location}); this needs a local index")
        return self.location.local

    def _open(self) -> None:
        self.meta: dict[str, Any] = self.location.read_json("meta.json") or {}
        copy = self.local_copy
        self.on_local_copy = copy is not None and copy.serving and copy.has([FILES, SYMBOLS, self.chunks_table])
        if copy is not None and self.on_local_copy:
            # No version checks of its own: the copy re-opens the store after each sync that lands one.
            self._db, names = connect(IndexLocation(str(copy.tables_dir)))
        else:
            self._db, names = connect(self.location, self.read_consistency)
        self.resident.drop()
        self._files = self._db.open_table(FILES) if FILES in names else self._db.create_table(FILES, schema=FILE_SCHEMA)
        if self.read_consistency is None:  # the writer brings older tables up to this version's columns
            self._upgrade_files()
        self._symbols = (
            self._db.open_table(SYMBOLS) if SYMBOLS in names else self._db.create_table(SYMBOLS, schema=SYMBOL_SCHEMA)
        )
        current = self.chunks_table
        self._chunks = self._db.open_table(current) if current in names else None
        if self._chunks is not None and self.read_consistency is None:  # a table written before they were kept
            have, schema = self._chunks.schema.names, chunk_schema(int(self.meta.get("dimension") or 1))
            if missing := [schema.field(name) for name in LATER_COLUMNS if name not in have]:
                self._chunks.add_columns(missing)
                if SEARCH_VECTORS not in have and self.meta.get(LISTS_COMPLETE):  # its rows have none yet
                    self.meta = {key: value for key, value in self.meta.items() if key != LISTS_COMPLETE}
                    self.location.write_json("meta.json", self.meta)
            if not self._chunks.schema.field("vector").nullable:  # written before a run's lexical pass
                self._chunks.alter_columns(cast(Any, {"path": "vector", "nullable": True}))  # typed as str: str
        self._side: lancedb.table.Table | None = None
        if self.read_consistency is None:  # the writer: the table a switch replaced, once no replica reads it
            self._drop_retired()
        # Which indices exist, read once: only this process creates them (optimize) or drops
        # them (reset), so a list_indices() call per query would only repeat what we know.
        # By column, then kind: a missed index meant unrefined queries and a rebuild on every run.
        indices = self._chunks.list_indices() if self._chunks is not None else []
        self.fts_ready = any(i.columns == ["lexical"] for i in indices)
        vector = next((i for i in indices if i.columns == ["vector"]), None)
        self.ann_kind: str | None = None if vector is None else index_kind(vector.index_type)
        self.search_ann = any(i.columns == [SEARCH_VECTORS] for i in indices)
        self.lists = self._chunks is not None and SEARCH_VECTORS in self._chunks.schema.names
        self.lists_complete = bool(self.meta.get(LISTS_COMPLETE)) and self.lists
        self.facts = self._read_facts()
        self.manifest_epoch += 1
        self._seen_versions = (self._files.version, self._chunks.version if self._chunks is not None else None)

    def _upgrade_files(self) -> None:
        have = self._files.schema.names
        if missing := [FILE_SCHEMA.field(name) for name in LATER_FILE_COLUMNS if name not in have]:
            self._files.add_columns(missing)

    def _reopen(self) -> None:
        """The tables again, as the writer or the local copy now has them (a version landed, the
        copy started or stopped answering); a search that began on another model's table runs again."""
        with self._lock:
            before = self.chunks_table
            self._open()
            if self.chunks_table != before:  # the writer switched models
                self.generation += 1

    def local_copy_state(self) -> CopyState | None:
        return None if self.local_copy is None else self.local_copy.state()

    def refresh(self) -> None:
        """A query replica's view of what the writer did that a table's own re-check does not show:
        a table created, an index built, folders' files added or removed (the facts filters skip
        clauses by). At most once per consistency interval, and only when a version moved."""
        if self.read_consistency is None or time.monotonic() < self._next_refresh:
            return
        with self._lock:
            self._next_refresh = time.monotonic() + self.read_consistency.total_seconds()
            seen = (self._files.version, self._chunks.version if self._chunks is not None else None)
            meta = self.location.read_json("meta.json") or {}
            switched = meta.get("chunks_table", CHUNKS) != self.chunks_table  # the writer switched models
            if seen != self._seen_versions or self._chunks is None or switched:
                self._reopen()

    def _read_facts(self) -> IndexFacts:
        paths: dict[str, set[str]] = {}
        for row in self._files.search().select(["folder", "path"]).limit(None).to_arrow().to_pylist():
            paths.setdefault(row["folder"], set()).add(row["path"])
        hidden = self._chunks is not None and self._chunks.count_rows(sql_in("status", list(HIDDEN_STATUSES))) > 0
        return IndexFacts({folder: frozenset(p) for folder, p in paths.items()}, hidden)

    def _set_aside_other_layouts(self) -> None:
        """An index written with another schema is never read: it is moved aside, and a notice
        (in /v1/status and the log) says to re-index."""
        meta = self.location.read_json("meta.json")
        if meta is None:
            return
        found = meta.get("schema_version")
        if found == SCHEMA_VERSION:
            return
        if self.location.local is None:  # a prefix cannot be renamed in one step: the operator decides
            raise StoreUnavailable(
                f"the index at {self.location} was written with schema v{found}, this version uses v{SCHEMA_VERSION}; "
                "delete that prefix or point SEMSEARCH_INDEX_URI at a new one, then run `semsearch index`"
            )
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        aside = self.index_dir.with_name(f"{self.index_dir.name}.schema-v{found}.{stamp}")
        self.index_dir.rename(aside)
        self.index_dir.mkdir()
        self.notice = (
            f"the index at {self.index_dir} was written with schema v{found}, this version uses "
            f"v{SCHEMA_VERSION}; it was moved to {aside} and the index is empty: run `semsearch index` "
            "to rebuild it (delete the old copy when you are happy)"
        )
        logging.getLogger("semsearch.api").warning(self.notice)

    # --- identity --------------------------------------------------------------

    @property
    def model_id(self) -> str | None:
        return self.meta.get("model_id")

    @property
    def chunks_table(self) -> str:
        """The chunks table that answers (the other one is where a model switch builds)."""
        return str(self.meta.get("chunks_table", CHUNKS))

    def _claim_model(self, batch: IndexBatch) -> None:
        """The first write fixes the model and the code chunker (and records the chunk sizes);
        later writes must match them."""
        model_id, dimension = batch.model_id, batch.dimension
        if self.model_id is None:
            self.meta = {
                "schema_version": SCHEMA_VERSION,
                "model_id": model_id,
                "dimension": dimension,
                "chunker": batch.chunker,
                "chunking": batch.chunking,
                LISTS_COMPLETE: True,  # a new table: every row is written with its list
            }
            self.location.write_json("meta.json", self.meta)
        elif (self.model_id, self.meta.get("dimension")) != (model_id, dimension):
            raise ModelMismatch(
                f"the index was built with {self.model_id} ({self.meta.get('dimension')} dims) but these vectors "
                f"come from {model_id} ({dimension} dims); vectors of two models are never mixed — "
                "rebuild with `semsearch index --rebuild`"
            )
        elif batch.upserts and self.meta.get("chunker") != batch.chunker:
            raise ModelMismatch(
                f"the index was built with the {self.meta.get('chunker') or 'paragraph'} code chunker but this indexer "
                f"uses {batch.chunker or 'paragraph'} (SEMSEARCH_CODE_CHUNKER); chunks of two chunkers are never "
                "mixed — rebuild with `semsearch index --rebuild`, or set the chunker the index was built with"
            )
        if self._chunks is None:
            self._chunks = self._db.create_table(self.chunks_table, schema=chunk_schema(dimension), exist_ok=True)
            self.lists, self.lists_complete = True, bool(self.meta.get(LISTS_COMPLETE))

    # --- a model switch: the new model's vectors beside the old ---------------------------

    def switch_begin(self, model_id: str, dimension: int, target: str, address: str) -> dict[str, Any]:
        """Starts building `model_id`'s vectors in the other chunks table, or resumes a build of
        the same model that a stop interrupted (its rows are kept); a build of another model is
        dropped. `address`: the embedder's, or "in-process" (`target` then names the model). Returns
        the switch's record (kept in `meta.json` until the swap)."""
        with self._lock:
            if self.model_id is None or self._chunks is None:
                raise ModelMismatch(
                    "the index is empty, so there is nothing to switch: set the model "
                    "(SEMSEARCH_MODEL or SEMSEARCH_EMBEDDINGS_URL) and run `semsearch index`"
                )
            if model_id == self.model_id:
                raise ModelMismatch(f"the index already uses {model_id}; nothing to switch")
            side = next(name for name in CHUNK_TABLES if name != self.chunks_table)
            record = self.meta.get("switch") or {}
            names = set(self._db.list_tables().tables)
            if (record.get("model_id"), record.get("dimension")) != (model_id, dimension) or side not in names:
                if side in names:
                    self._db.drop_table(side)
                record = {
                    "model_id": model_id,
                    "dimension": dimension,
                    "table": side,
                    "target": target,
                    "from_model": self.model_id,
                    "started_at": datetime.now(UTC).isoformat(),
                }
                self._db.create_table(side, schema=chunk_schema(dimension))
            record.update(target=target, address=address)
            self.meta = {**self.meta, "switch": record}
            self.location.write_json("meta.json", self.meta)
            self._side = self._db.open_table(side)
            return record

    def switch_abandon(self) -> None:
        """Drops a switch's half-built table; the index goes on as it was."""
        with self._lock:
            record = self.meta.get("switch")
            if record is None:
                return
            if record["table"] in set(self._db.list_tables().tables):
                self._db.drop_table(record["table"])
            self.meta = {k: v for k, v in self.meta.items() if k != "switch"}
            self.location.write_json("meta.json", self.meta)
            self._side = None

    def _side_table(self) -> lancedb.table.Table:
        if self._side is None:
            raise ModelMismatch("no model switch is under way (it was cancelled, or the index was reset or replaced)")
        return self._side

    def switch_pending(self) -> tuple[dict[tuple[str, str], set[str]], int, int]:
        """What the side table lacks, by (folder, path): the ids of chunks it has yet to embed; and
        how many chunks the index holds and the side table already has."""
        side = self._side_table()
        ours = self._ids(["id", "folder", "path"])
        built = set(side.search().select(["id"]).limit(None).to_arrow()["id"].to_pylist())
        pending: dict[tuple[str, str], set[str]] = {}
        total = 0
        if ours is not None:
            total = ours.num_rows
            for row in ours.to_pylist():
                if row["id"] not in built:
                    pending.setdefault((row["folder"], row["path"]), set()).add(row["id"])
        return pending, total, total - sum(len(ids) for ids in pending.values())

    @served
    def _ids(self, columns: list[str]) -> pa.Table | None:
        return None if self._chunks is None else self._chunks.search().select(columns).limit(None).to_arrow()

    def switch_rows(self, folder: str, paths: list[str], ids: set[str]) -> pa.Table:
        """The index's rows for those ids (every column but the vector), read by file."""
        if self._chunks is None:
            return pa.table({})
        where = f"folder = {sql_str(folder)} AND {sql_in('path', paths)}"
        columns = [name for name in chunk_schema(1).names if name != "vector"]
        with self.gate.reading():
            rows = self._chunks.search().where(where).select(columns).limit(None).to_arrow()
        return rows.filter(pc.is_in(rows["id"], value_set=pa.array(sorted(ids), pa.string())))

    def switch_add(self, rows: pa.Table, embedded: Embedded, model_id: str) -> None:
        """The new model's vectors for `rows` (from `switch_rows`), and their names', into the side
        table; written twice (a resumed batch), a row is replaced, not doubled."""
        vectors, names = embedded
        side = self._side_table()
        dimension = int(self.meta["switch"]["dimension"])
        schema = chunk_schema(dimension)
        flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1), pa.float32())
        arrays = {name: rows[name] for name in rows.column_names}
        arrays["vector"] = pa.FixedSizeListArray.from_arrays(flat, dimension)
        arrays[SEARCH_VECTORS] = _search_lists(vectors, names, dimension)
        arrays["model_id"] = pa.array([model_id] * rows.num_rows, pa.string())
        table = pa.table([arrays[name].cast(schema.field(name).type) for name in schema.names], schema=schema)
        side.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(table)

    def switch_index(self, ann_min_rows: int) -> None:
        """The side table's indices, built before the swap so the first query after it is as fast as any."""
        side = self._side_table()
        side.optimize(cleanup_older_than=self.retention, delete_unverified=True)
        if side.count_rows() >= ann_min_rows and not any(i.columns == ["vector"] for i in side.list_indices()):
            side.create_index("vector", config=ANN_CONFIG, replace=True)
        # Every row of the side table has its search list (switch_add).
        if side.count_rows() >= ann_min_rows and not any(i.columns == [SEARCH_VECTORS] for i in side.list_indices()):
            side.create_index(SEARCH_VECTORS, config=ANN_CONFIG, replace=True)
        if side.count_rows() and not any(i.columns == ["lexical"] for i in side.list_indices()):
            side.create_index("lexical", config=FTS_CONFIG)
        trim()

    def switch_commit(self, embed: Callable[[pa.Table], Embedded], on_swap: Callable[[], None]) -> int:
        """Under the write lock (no indexer write can land in between): the last rows the side
        table lacks (`embed` makes their vectors), the rows of files changed or removed meanwhile
        dropped from it, then the swap — `meta.json` names the side table and the new model (the
        commit point: killed before it, the old index is whole and the switch resumes), searches
        wait the few milliseconds of the re-open, `on_swap` runs (the engine's embedder changes
        with the table), and the old table goes. Returns the chunks the new table holds."""
        with self._lock:
            side, record = self._side_table(), self.meta["switch"]
            pending, _, _ = self.switch_pending()
            for (folder, path), ids in sorted(pending.items()):
                rows = self.switch_rows(folder, [path], ids)
                if rows.num_rows:
                    self.switch_add(rows, embed(rows), record["model_id"])
            index = self._ids(["id"])
            ours = set(index["id"].to_pylist()) if index is not None else set()
            theirs = side.search().select(["id", "folder", "path", "sha256"]).limit(None).to_arrow().to_pylist()
            stale = {(r["folder"], r["path"], r["sha256"]) for r in theirs if r["id"] not in ours}
            for group in _groups(sorted(stale), 100):
                side.delete(" OR ".join(
                    f"(folder = {sql_str(f)} AND path = {sql_str(p)} AND sha256 = {sql_str(h)})" for f, p, h in group
                ))  # fmt: skip
            old = self.chunks_table
            meta = {k: v for k, v in self.meta.items() if k != "switch"}
            meta.update(
                model_id=record["model_id"],
                dimension=record["dimension"],
                chunks_table=record["table"],
                **{LISTS_COMPLETE: True},  # every row of the side table was written with its list
                switched_from=self.model_id,
                switched_at=datetime.now(UTC).isoformat(),
            )
            with self.gate.exclusive():
                self.location.write_json("meta.json", meta)
                self._open()
                on_swap()
                self.generation += 1
            if self.location.local is not None and old in set(self._db.list_tables().tables):
                self._db.drop_table(old)  # replicas on object storage may still read it: optimize drops it later
            return self.chunk_count()

    # --- writes ------------------------------------------------------------------

    def apply(self, folder: str, batch: IndexBatch) -> int:
        """Applies a batch of file changes; returns the number of chunks written."""
        with self._lock:
            self._claim_model(batch)
            assert self._chunks is not None
            rows = self._chunk_rows(folder, batch)
            replaced = [f.path for f in batch.upserts] + list(batch.deletes)
            if replaced:
                gone = f"folder = {sql_str(folder)} AND {sql_in('path', replaced)}"
                _replace(self._chunks, rows, gone)
                _replace(self._symbols, _symbol_rows(folder, batch), gone)
            self._write_manifest(folder, batch)
            self.facts = self.facts.with_files(
                folder,
                added=[f.path for f in batch.upserts],
                removed=batch.deletes,
                hidden=any(f.meta.status in HIDDEN_STATUSES for f in batch.upserts),
            )
            self._writes += 1
            self.manifest_epoch += 1
            if self._writes % self.housekeeping_every == 0:
                # Many small writes (watch mode, single-file runs) must not grow versions and
                # fragments without bound, even if no run ever ends with an optimize.
                self._compact()
            return rows.num_rows

    def _chunk_rows(self, folder: str, batch: IndexBatch) -> pa.Table:
        columns: dict[str, list[Any]] = {name: [] for name in chunk_schema(batch.dimension).names}
        vectors: list[np.ndarray] = []
        definitions: list[np.ndarray | None] = []
        for f in batch.upserts:
            if batch.without_vectors:
                if f.vectors or f.name_vectors:
                    raise InvalidBatch(f"{f.path}: a batch `withoutVectors` carries no vectors; send them without it")
                named: list[np.ndarray | None] = [None] * len(f.chunks)
            else:
                vectors.append(self._vectors(f, batch.dimension))
                named = _name_vectors(f, batch.dimension)
            mtime_date = datetime.fromtimestamp(f.mtime_ns / 1e9, UTC).date().isoformat()
            for i, chunk in enumerate(f.chunks):
                columns["id"].append(f"{folder}\x00{f.path}\x00{f.sha256}\x00{i}")
                columns["folder"].append(folder)
                columns["path"].append(f.path)
                columns["chunk_index"].append(i)
                columns["start_line"].append(chunk.start_line)
                columns["end_line"].append(chunk.end_line)
                columns["page"].append(chunk.page)
                columns["heading"].append(chunk.heading)
                columns["kind"].append(chunk.kind)
                columns["flags"].append(chunk.flags)
                columns["text"].append(chunk.text)
                columns["mtime_ns"].append(f.mtime_ns)
                columns["sha256"].append(f.sha256)
                columns["model_id"].append(batch.model_id)
                own = chunk.meta or f.meta  # a message's facts, within a mailbox
                columns["title"].append(own.title)
                columns["status"].append(f.meta.status)
                columns["superseded_by"].append(f.meta.superseded_by)
                columns["doc_date"].append(own.date)
                columns["tags"].append(own.tags)
                columns["date"].append(own.date[:10] if own.date else mtime_date)
                columns["lexical"].append(lexical_document(chunk.text, chunk.heading))
                columns["context"].append(chunk.context)
                columns["names"].append(chunk.names if batch.without_vectors or named[i] is not None else None)
                definitions.append(named[i])
        flat = np.concatenate(vectors).reshape(-1) if vectors else np.empty(0, dtype=np.float32)
        columns.pop("vector")
        schema = chunk_schema(batch.dimension)
        columns.pop(SEARCH_VECTORS)
        arrays = {name: pa.array(values, type=schema.field(name).type) for name, values in columns.items()}
        if batch.without_vectors:  # found by their words until the same files come with vectors
            rows = len(columns["id"])
            arrays["vector"] = pa.nulls(rows, schema.field("vector").type)
            arrays[SEARCH_VECTORS] = pa.nulls(rows, schema.field(SEARCH_VECTORS).type)
        else:
            arrays["vector"] = pa.FixedSizeListArray.from_arrays(pa.array(flat, pa.float32()), batch.dimension)
            matrix = flat.reshape(-1, batch.dimension)
            arrays[SEARCH_VECTORS] = _search_lists(matrix, definitions, batch.dimension)
        return pa.table([arrays[name] for name in schema.names], schema=schema)

    @staticmethod
    def _vectors(f: FileChunks, dimension: int) -> np.ndarray:
        vecs = np.frombuffer(f.vectors, dtype="<f4")
        if vecs.size != len(f.chunks) * dimension:
            raise InvalidBatch(
                f"{f.path}: {vecs.size} floats for {len(f.chunks)} chunks of dimension {dimension} "
                f"(expected {len(f.chunks) * dimension})"
            )
        return vecs.reshape(len(f.chunks), dimension)

    def _write_manifest(self, folder: str, batch: IndexBatch) -> None:
        now = datetime.now(UTC)
        embedded = not batch.without_vectors
        stamps: list[tuple[FileStamp, int, bool]] = [(f, len(f.chunks), embedded) for f in batch.upserts]
        touched = {t.path for t in batch.touches}
        if touched:
            current = {e.path: e for e in self.manifest(folder, paths=sorted(touched))}
            stamps += [
                (t, e.chunks, e.embedded) if (e := current.get(t.path)) is not None else (t, 0, True)
                for t in batch.touches
            ]
        rows = pa.table(
            {
                "folder": [folder] * len(stamps),
                "path": [s.path for s, _, _ in stamps],
                "mtime_ns": [s.mtime_ns for s, _, _ in stamps],
                "size": [s.size for s, _, _ in stamps],
                "sha256": [s.sha256 for s, _, _ in stamps],
                "chunks": [n for _, n, _ in stamps],
                "indexed_at": [now] * len(stamps),
                "embedded": [e for _, _, e in stamps],
            },
            schema=FILE_SCHEMA,
        )
        if batch.deletes and rows.num_rows:
            (
                self._files.merge_insert(["folder", "path"])
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .when_not_matched_by_source_delete(f"folder = {sql_str(folder)} AND {sql_in('path', batch.deletes)}")
                .execute(rows)
            )
        elif rows.num_rows:
            self._files.merge_insert(
                ["folder", "path"]
            ).when_matched_update_all().when_not_matched_insert_all().execute(rows)
        elif batch.deletes:
            self._files.delete(f"folder = {sql_str(folder)} AND {sql_in('path', batch.deletes)}")

    def record_skipped(self, folder: str, skipped_by: dict[str, int]) -> None:
        """What the last full pass over a folder left out, by rule (for coverage notes)."""
        with self._lock:
            known = self.skipped()
            known[folder] = {rule: n for rule, n in skipped_by.items() if n > 0}
            self._write_skipped(known)

    def _write_skipped(self, known: dict[str, dict[str, int]]) -> None:
        self.location.write_json("skipped.json", known)

    def skipped(self) -> dict[str, dict[str, int]]:
        try:
            return dict(self.location.read_json("skipped.json") or {})
        except (StoreUnavailable, ValueError):
            return {}

    def drop_folder(self, folder: str) -> None:
        with self._lock:
            if self._chunks is not None:
                self._chunks.delete(f"folder = {sql_str(folder)}")
            self._symbols.delete(f"folder = {sql_str(folder)}")
            self._files.delete(f"folder = {sql_str(folder)}")
            self.facts = self.facts.without_folder(folder)
            self.manifest_epoch += 1
            known = self.skipped()
            if known.pop(folder, None) is not None:
                self._write_skipped(known)

    # --- reads -------------------------------------------------------------------

    @served
    def manifest(self, folder: str, paths: list[str] | None = None) -> list[ManifestEntry]:
        where = f"folder = {sql_str(folder)}"
        if paths:
            where += f" AND {sql_in('path', paths)}"
        # Only the entry's columns, each converted whole: rows as dicts (every column, timestamps as
        # datetimes) took half of this read, which a search's coverage note makes per folder.
        fields = ["path", "mtime_ns", "size", "sha256", "chunks"]
        marked = ["embedded"] if "embedded" in self._files.schema.names else []
        table = self._files.search().where(where).select([*fields, *marked]).limit(None).to_arrow()
        embedded = table["embedded"].to_pylist() if marked else [None] * table.num_rows
        return [
            ManifestEntry(
                path=path,
                mtime_ns=mtime_ns,
                size=size,
                sha256=sha256,
                chunks=chunks,
                embedded=done is not False,  # null: a row from before lexical passes
            )
            for path, mtime_ns, size, sha256, chunks, done in zip(
                *(table[c].to_pylist() for c in fields), embedded, strict=True
            )
        ]

    @served
    def flagged(self, folder: str, path: str) -> list[dict[str, Any]]:
        """A file's chunks that screening flagged: lines and flags."""
        if self._chunks is None:
            return []
        where = f"folder = {sql_str(folder)} AND path = {sql_str(path)}"
        rows = self._chunks.search().where(where).select(["start_line", "end_line", "flags"]).limit(None).to_arrow()
        return sorted((r for r in rows.to_pylist() if r["flags"]), key=lambda r: r["start_line"])

    @served
    def symbols(self, where: str, limit: int | None = None) -> pa.Table:
        """Symbol rows (SYMBOL_COLUMNS plus `name_lower`) matching a SQL filter."""
        query = self._symbols.search()
        if where != TRUE:
            query = query.where(where)
        return query.select([*SYMBOL_COLUMNS, "name_lower"]).limit(limit).to_arrow()

    @served
    def folder_stats(self) -> dict[str, FolderStats]:
        marked = ["embedded"] if "embedded" in self._files.schema.names else []
        table = self._files.search().select(["folder", "chunks", "indexed_at", *marked]).limit(None).to_arrow()
        if table.num_rows == 0:
            return {}
        waiting = pc.fill_null(pc.invert(table["embedded"]), False) if marked else pa.nulls(table.num_rows, pa.bool_())
        done = pc.if_else(pc.fill_null(waiting, False), 0, table["chunks"])
        table = table.append_column("embedded_chunks", done)
        grouped = table.group_by("folder").aggregate(
            [("chunks", "count"), ("chunks", "sum"), ("indexed_at", "max"), ("embedded_chunks", "sum")]
        )
        return {
            row["folder"]: FolderStats(
                row["chunks_count"], row["chunks_sum"] or 0, row["indexed_at_max"], row["embedded_chunks_sum"] or 0
            )
            for row in grouped.to_pylist()
        }

    @served
    def vector_search(
        self,
        vector: np.ndarray,
        limit: int,
        where: str,
        ann: AnnQuery = ANN_QUERY,
        names: bool = True,
        held: Held | None = None,
    ) -> list[dict[str, Any]]:
        """Nearest chunks by cosine, filtered inside the query; each row has `cosine`: the best of the
        chunk's own and (`names`) its definitions', so a chunk is found by what it defines as well as
        by what its body says. `held`: the search's copy (`held()`)."""
        if self._chunks is None:
            return []
        copy = self._copy(held)
        if copy is not None:
            try:
                return copy.nearest(vector, limit, where, names)
            except Stale:
                pass  # written to meanwhile: LanceDB answers
        search_kind = ANN_KIND if self.search_ann else None
        if names and self.lists_complete:  # one query: each chunk's own vector and its definitions'
            return self._nearest(SEARCH_VECTORS, search_kind, vector, limit, where, ann)
        if not names or not self.lists:
            return self._nearest("vector", self.ann_kind, vector, limit, where, ann)
        # Rows written before search lists (until they are indexed again): both columns, side by side.
        named = _BESIDE.submit(self._nearest, SEARCH_VECTORS, search_kind, vector, limit, where, ann)
        rows = self._nearest("vector", self.ann_kind, vector, limit, where, ann)
        # The best `limit` by the better of two cosines are among the best `limit` by each.
        best = {row["id"]: row for row in rows}
        for row in named.result():
            if row["id"] not in best or row["cosine"] > best[row["id"]]["cosine"]:
                best[row["id"]] = row
        return sorted(best.values(), key=lambda row: -row["cosine"])[:limit]

    def _nearest(
        self, column: str, ann_kind: str | None, vector: np.ndarray, limit: int, where: str, ann: AnnQuery
    ) -> list[dict[str, Any]]:
        assert self._chunks is not None
        # Cosine is set on every query: LanceDB's default metric is L2. Over `search_vectors` (a list of
        # vectors a row) LanceDB's distance is to the row's nearest one.
        query = _native(self._chunks).query().nearest_to(vector.astype(np.float32)).column(column)
        if ann_kind is not None:
            query = query.refine_factor(ann.refine)
            if ann.nprobes is not None:
                query = query.nprobes(ann.nprobes)
            if "HNSW" in ann_kind:
                query = query.ef(ann.ef * limit * ann.refine)
        if where != TRUE:
            query = query.where(where)  # before the search (LanceDB's default: a prefilter)
        result = _answer(query.distance_type("cosine").select([*RESULT_COLUMNS, DISTANCE]).limit(limit))
        cosine = pc.subtract(1.0, result[DISTANCE]).to_pylist()
        rows = result.drop([DISTANCE]).to_pylist()
        return [dict(row, cosine=float(c)) for row, c in zip(rows, cosine, strict=True)]

    def held(self) -> Held:
        """The in-memory copy at the table's current version, for both arms of one search. Reading
        it asks LanceDB for the version (a round trip to its event loop, ~0.5 ms): once a search,
        while the model embeds the query, rather than once an arm."""
        return Held(None if self._chunks is None else self.resident.current(self._chunks))

    def _copy(self, held: Held | None) -> Resident | None:
        """The copy an arm answers from: the search's (`held`), or read now."""
        if self._chunks is None:
            return None
        if held is None:
            return self.resident.current(self._chunks)
        # A model switch may have swapped the table since the search read its copy: LanceDB answers.
        return held.copy if held.copy is not None and held.copy.source is self._chunks else None

    def lexical_in_memory(self, held: Held) -> bool:
        """Whether the BM25 arm is answered from the in-memory copy. A search then scores it itself
        while the embedder works, since scoring holds the interpreter; LanceDB's search lets go of
        it, so that one runs on a thread beside."""
        copy = self._copy(held)
        return copy is not None and copy.postings is not None and self.fts_ready

    @served
    def lexical_search(
        self, terms: list[str], limit: int, where: str, held: Held | None = None
    ) -> list[dict[str, Any]]:
        """BM25 over the `lexical` column (OR of the terms); each row has `bm25`, and its vector and its
        search list (or None) for the cosine (`best_cosines`). `held`: the search's copy (`held()`)."""
        if self._chunks is None or not terms or not self.fts_ready:
            return []
        query = " ".join(terms)
        copy = self._copy(held)
        if copy is not None and copy.postings is not None:  # scored in memory, as LanceDB's index scores
            try:
                found = copy.bm25([t.text for t in self._chunks.tokenize(query, column="lexical")], limit, where)
                if found is not None:
                    return found
            except Stale:
                pass  # written to meanwhile: LanceDB answers
        if copy is not None:  # ids and scores from LanceDB's index, the rest from memory
            rows = self._lexical_ids(copy, query, limit, where)
            if rows is not None:
                return rows
        named = [SEARCH_VECTORS] if self.lists else []
        # Once every embedded row has its list, a list's first vector is the row's own: read once.
        own = [] if self.lists_complete else ["vector"]
        result = self._fts(query, where, [*RESULT_COLUMNS, *own, *named, SCORE], limit)
        names = name_matrices(result[SEARCH_VECTORS]) if named else [None] * result.num_rows
        if own:
            vectors = optional_vectors(result["vector"])
        else:
            vectors = [None if block is None else block[0] for block in names]
        rows = cast(list[dict[str, Any]], result.drop([*own, *named]).to_pylist())
        for i, row in enumerate(rows):
            row["vector"], row[SEARCH_VECTORS] = vectors[i], names[i]
            row["bm25"] = float(row.pop(SCORE))
        return rows

    def _fts(self, query: str, where: str, columns: list[str], limit: int, ranked: bool = True) -> pa.Table:
        """The best `limit` chunks by BM25 over the `lexical` column, filtered before ranking. `ranked`:
        best first and equal scores by chunk id, as the in-memory postings rank them (`postings.by_score`)
        — LanceDB's own order among equal scores is its heap's, and which of several equal scores at the
        cut it returns is too, so it is asked for more until the last score it returns is lower."""
        assert self._chunks is not None
        search: AsyncFTSQuery = _native(self._chunks).query().nearest_to_text(query, columns="lexical")
        search = search if where == TRUE else search.where(where)  # LanceDB's default: a prefilter
        if not ranked:
            return _answer(search.select(columns).limit(limit))
        wanted = list(dict.fromkeys(["id", *columns, SCORE]))
        asked = limit + TIES_AT_THE_CUT
        while True:
            found = _answer(search.select(wanted).limit(asked))
            scores = found[SCORE].to_numpy()
            if found.num_rows < asked or scores[limit - 1] > scores[-1]:
                break
            asked *= 4
        ids = found["id"].to_pylist()
        order = by_score(list(range(found.num_rows)), lambda i: scores[i], lambda i: ids[i])[:limit]
        return found.take(pa.array(order, type=pa.int64())).select(columns)

    def _lexical_ids(self, copy: Resident, query: str, limit: int, where: str) -> list[dict[str, Any]] | None:
        """LanceDB's BM25 ids and scores with the rows from the copy; None if the table moved on."""
        found = self._fts(query, where, ["id", SCORE], limit)
        ranked = list(zip(found["id"].to_pylist(), found[SCORE].to_pylist(), strict=True))
        held = copy.lookup([chunk_id for chunk_id, _ in ranked])
        if held is None or self._chunks is None or self._chunks.version != copy.version:
            return None
        rows, vectors, names = held
        for row, vector, named, (_, score) in zip(rows, vectors, names, ranked, strict=True):
            row["vector"], row[SEARCH_VECTORS], row["bm25"] = vector, named, float(score)
        return rows

    @served
    def doc_freq(self, term: str, cap: int) -> int:
        """In how many chunks `term` occurs, counted up to cap + 1 (enough to say "too common")."""
        if self._chunks is None or not self.fts_ready:
            return 0
        return int(self._fts(term, TRUE, ["id", SCORE], cap + 1, ranked=False).num_rows)

    @served
    def warm(self) -> None:
        """Starts reading the chunks table into memory for searches, in the background (if it is
        within the bound), so the copy is ready before the first search asks for it."""
        self.resident.current(self._chunks)

    def in_memory(self) -> tuple[int, int] | None:
        """(chunks, bytes) of the copy searches use now; None when LanceDB answers every arm (asking
        starts a load, as a search would)."""
        copy = self.resident.current(self._chunks)
        return None if copy is None else (len(copy.positions), copy.nbytes)

    @served
    def unembedded_chunks(self) -> int:
        """Chunks a run has made findable by their words and not embedded yet (from the manifest)."""
        return unembedded(self._files)

    @served
    def count_where(self, where: str) -> int:
        return 0 if self._chunks is None else int(self._chunks.count_rows(where))

    @served
    def chunk_count(self) -> int:
        return 0 if self._chunks is None else int(self._chunks.count_rows())

    # --- maintenance ---------------------------------------------------------------

    def optimize(self, ann_min_rows: int = 8_000) -> dict[str, Any]:
        """After an indexing run: compact small fragments, fold new rows into the indices, drop
        old versions (kept for a few minutes so readers in flight never break), then build the
        full-text index and, once the table is big enough for it to win over a flat scan, the
        ANN index, if they do not exist yet."""
        with self._lock:
            if self._chunks is None:
                return {"chunks": 0}
            # Compact first: the indices are then built over a few large fragments, and compacting
            # 100 fragments that already carry them peaked 200 MB higher (100k rows, measured).
            self._compact()
            trim()  # what the compaction freed, before the index builds need it
            built: list[str] = []
            # Only embedded rows train and fill a vector index (a cold run's first pass has none yet).
            embedded = self.chunk_count() - unembedded(self._files)
            if self.ann_kind != ANN_KIND and embedded >= ann_min_rows:
                # Built once, or rebuilt once over an index of another kind (an earlier version's).
                # Before the BM25 index, whose leftovers would otherwise sit under its peak.
                self._chunks.create_index("vector", config=ANN_CONFIG, replace=True)
                self.ann_kind = ANN_KIND
                built.append(ANN_KIND)
                trim()
            if not self.lists_complete and self._chunks.count_rows(f"{SEARCH_VECTORS} IS NULL") == unembedded(
                self._files
            ):
                self.meta = {**self.meta, LISTS_COMPLETE: True}  # the last rows from before them rewritten
                self.location.write_json("meta.json", self.meta)
                self.lists_complete = True
            if not self.search_ann and embedded >= ann_min_rows and self.lists_complete:
                self._chunks.create_index(SEARCH_VECTORS, config=ANN_CONFIG, replace=True)
                self.search_ann = True
                built.append(f"{ANN_KIND} (search lists)")
                trim()
            if not self.fts_ready:
                self._chunks.create_index("lexical", config=FTS_CONFIG)
                self.fts_ready = True
                built.append("FTS")
            self._drop_retired()
            return {"chunks": self.chunk_count(), "version": self._chunks.version, "built": built}

    def _drop_retired(self) -> None:
        """The table a model switch replaced, once no query replica can still be reading it."""
        switched = self.meta.get("switched_at")
        if switched is None or datetime.fromisoformat(switched) + self.retention > datetime.now(UTC):
            return  # a query replica on object storage may still be reading it
        keep = {self.chunks_table, (self.meta.get("switch") or {}).get("table")}
        for name in set(CHUNK_TABLES) & set(self._db.list_tables().tables) - keep:
            self._db.drop_table(name)

    def _compact(self) -> None:
        """Compact fragments, fold new rows into the indices, drop versions older than the retention.

        `delete_unverified` also removes data files no version references (left behind by
        merge_insert rewrites; they doubled the table after 1,000 updates in `make bench`). Lance
        keeps such files for 7 days in case a concurrent writer is still committing them; here
        every write holds `self._lock`, as this call does, so no write can be in flight."""
        if self._chunks is not None:
            self._chunks.optimize(cleanup_older_than=self.retention, delete_unverified=True)
        self._files.optimize(cleanup_older_than=self.retention, delete_unverified=True)
        self._symbols.optimize(cleanup_older_than=self.retention, delete_unverified=True)

    @served
    def sample_vectors(self, n: int, seed: int | None = None, folders: list[str] | None = None) -> np.ndarray:
        """Up to n random chunk vectors (for the noise calibration); with `folders`, of those folders only."""
        if folders is not None:
            if self._chunks is None or not folders:
                return np.empty((0, 0), dtype=np.float32)
            where = f"{sql_in('folder', folders)} AND vector IS NOT NULL"
            rows = self._chunks.search().where(where).select(["vector"]).limit(4 * n).to_arrow()
            vectors = np.asarray(rows["vector"].to_pylist(), dtype=np.float32)
            picked = np.random.default_rng(seed).permutation(len(vectors))[:n]
            return vectors[np.sort(picked)] if len(vectors) else vectors
        total = self.chunk_count()
        if total == 0 or self._chunks is None:
            return np.empty((0, 0), dtype=np.float32)
        rng = np.random.default_rng(seed)
        offsets = sorted(int(o) for o in rng.choice(total, size=min(n, total), replace=False))
        table = self._chunks.take_offsets(offsets).select(["vector"]).to_arrow()
        return np.asarray([v for v in table["vector"].to_pylist() if v is not None], dtype=np.float32)

    def reset(self) -> None:
        """Forget everything: used by `semsearch index --rebuild` (new model, new chunking)."""
        with self._lock:
            existing = set(self._db.list_tables().tables)
            for name in (*CHUNK_TABLES, FILES, SYMBOLS):
                if name in existing:
                    self._db.drop_table(name)
            self.location.delete("meta.json")
            self.location.delete("skipped.json")
            self.meta = {}
            self._chunks, self._side, self.fts_ready, self.ann_kind = None, None, False, None
            self.search_ann = self.lists = self.lists_complete = False
            self.generation += 1
            self._files = self._db.create_table(FILES, schema=FILE_SCHEMA)
            self._symbols = self._db.create_table(SYMBOLS, schema=SYMBOL_SCHEMA)
            self.facts = IndexFacts()
            self.manifest_epoch += 1
            self.resident.drop(forget_lists=True)

    # --- snapshots -------------------------------------------------------------------

    def rows(self, table: str, where: str, batch_size: int = 4096) -> pa.RecordBatchReader:
        """A table's rows matching a SQL filter, streamed (an export never holds a table in memory)."""
        source = {CHUNKS: self._chunks, FILES: self._files, SYMBOLS: self._symbols}[table]
        if source is None:  # no chunks yet
            return pa.RecordBatchReader.from_batches(chunk_schema(self.meta.get("dimension") or 1), iter([]))
        query = source.search()
        if where != TRUE:
            query = query.where(where)
        return query.limit(None).to_batches(batch_size)

    def paused(self) -> AbstractContextManager[bool]:
        """Holds every write back while it is held (a snapshot import reads the folders it keeps,
        builds the new index and swaps it in)."""
        return self._lock

    def swap(self, staged: Path, commit: Callable[[], None]) -> None:
        """Puts a complete index built elsewhere (`build`) in place of this one, under the write
        lock: this directory becomes `<name>.previous`, the staged one takes its name (the commit
        point), `commit` runs, and the old copy is deleted. `snapshots.recover` finishes or undoes
        a swap that a crash interrupted."""
        with self._lock:
            previous = self.index_dir.with_name(f"{self.index_dir.name}.previous")
            shutil.rmtree(previous, ignore_errors=True)
            with self.gate.exclusive():  # searches wait out the rename and re-open, none fails
                self.index_dir.rename(previous)
                staged.rename(self.index_dir)
                commit()
                self.notice = None
                self.resident.drop(forget_lists=True)  # another index: its lists are trained anew
                self._open()
                self.generation += 1
            shutil.rmtree(previous, ignore_errors=True)

    def disk_bytes(self) -> int:
        return self.location.size()


def _native(table: lancedb.table.Table) -> AsyncTable:
    """The async table under LanceDB's synchronous one, for queries that must hand off once."""
    return cast(AsyncTable, table._table)  # type: ignore[attr-defined]


def _answer(query: AsyncFTSQuery | AsyncVectorQuery) -> pa.Table:
    """A whole query in one hand-off to LanceDB's event loop. The synchronous builders' `to_arrow`
    makes six (the table's schema read three times, the reader's batches one by one), each waiting
    for the loop's thread: half of a full-text query's time in one process (docs/benchmarks.md)."""
    return cast(pa.Table, LOOP.run(query.to_arrow()))


def folder_views(folders: list[RegisteredFolder], store: Store) -> list[Folder]:
    """Registered folders as clients see them: with their files, chunks and last indexing."""
    stats = store.folder_stats()
    out = []
    for f in folders:
        s = stats.get(f.name)
        files, chunks, when, embedded = (s.files, s.chunks, s.last_indexed, s.embedded) if s else (0, 0, None, 0)
        out.append(
            Folder(
                name=f.name,
                path=f.path,
                url=f.url,
                branch=f.branch,
                files=files,
                chunks=chunks,
                embedded_chunks=embedded,
                last_indexed=when,
            )  # fmt: skip
        )
    return out


def connect(
    location: IndexLocation, read_consistency: timedelta | None = None
) -> tuple[lancedb.DBConnection, set[str]]:
    """The database and its table names; a store that cannot be reached is one line naming it."""
    try:
        db = lancedb.connect(
            location.uri, storage_options=location.storage_options or None, read_consistency_interval=read_consistency
        )
        return db, set(db.list_tables().tables)
    except Exception as exc:  # LanceDB reports storage errors as OSError, RuntimeError or ValueError
        raise StoreUnavailable(
            f"the index at {location} cannot be opened ({reason(exc)}); check {location.to_check}"
        ) from exc


def build(
    index_dir: Path,
    meta: dict[str, Any],
    skipped: dict[str, dict[str, int]],
    tables: dict[str, pa.RecordBatchReader],
    ann_min_rows: int,
) -> None:
    """A complete index in a new directory, from rows: the three tables, their indices (so the
    first query after a swap is as fast as any), then `skipped.json` and, last, `meta.json` —
    a directory without it is an index that was never finished."""
    index_dir.mkdir(parents=True)
    db = lancedb.connect(str(index_dir))
    schemas = {CHUNKS: chunk_schema(int(meta["dimension"])), FILES: FILE_SCHEMA, SYMBOLS: SYMBOL_SCHEMA}
    for name, schema in schemas.items():
        db.create_table(name, data=tables[name], schema=schema)
    chunks = db.open_table(CHUNKS)
    embedded = chunks.count_rows() - unembedded(db.open_table(FILES))  # an export made mid-run has some without
    if embedded >= ann_min_rows:
        chunks.create_index("vector", config=ANN_CONFIG)
    # An older export's rows have no lists.
    complete = chunks.count_rows(f"{SEARCH_VECTORS} IS NULL") == chunks.count_rows() - embedded
    if complete and embedded >= ann_min_rows:
        chunks.create_index(SEARCH_VECTORS, config=ANN_CONFIG)
    meta = {**meta, LISTS_COMPLETE: complete}
    if chunks.count_rows():
        chunks.create_index("lexical", config=FTS_CONFIG)
    (index_dir / "skipped.json").write_text(json.dumps(skipped, indent=2))
    (index_dir / "meta.json").write_text(json.dumps(meta, indent=2, default=str))


def unembedded(files: lancedb.table.Table) -> int:
    """Chunks without vectors yet, from the manifest: counting `vector IS NULL` in the chunks table
    reads every vector (+200 MB of peak at 100k rows)."""
    if "embedded" not in files.schema.names:
        return 0
    rows = files.search().where("embedded = false").select(["chunks"]).limit(None).to_arrow()
    return int(pc.sum(rows["chunks"]).as_py() or 0)


def _groups(items: list[R], size: int) -> Iterator[list[R]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _replace(table: lancedb.table.Table, rows: pa.Table, gone: str) -> None:
    """One commit: insert the new rows, delete the old rows of the same files."""
    if rows.num_rows:
        (
            table.merge_insert("id")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .when_not_matched_by_source_delete(gone)
            .execute(rows, on_bad_vectors="null")  # a chunk without its vector yet is a null, not a bad vector
        )
    else:
        table.delete(gone)


def _search_lists(own: np.ndarray, definitions: list[np.ndarray | None], dimension: int) -> pa.Array:
    """The `search_vectors` column: each row's own vector, then its definitions' (without Python floats)."""
    blocks = [own[i : i + 1] if d is None else np.vstack([own[i : i + 1], d]) for i, d in enumerate(definitions)]
    flat = np.concatenate(blocks).astype(np.float32).reshape(-1) if blocks else np.empty(0, dtype=np.float32)
    offsets = np.cumsum([0, *(len(block) for block in blocks)], dtype=np.int32)
    values = pa.FixedSizeListArray.from_arrays(pa.array(flat, pa.float32()), dimension)
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values)


def _name_vectors(f: FileChunks, dimension: int) -> list[np.ndarray | None]:
    """Each chunk's names' vectors, or None (no names, or an indexer older than them sent none)."""
    count = sum(len(chunk.names) for chunk in f.chunks)
    vecs = np.frombuffer(f.name_vectors, dtype="<f4")
    if vecs.size == 0:
        return [None] * len(f.chunks)
    if vecs.size != count * dimension:
        raise InvalidBatch(
            f"{f.path}: {vecs.size} floats for {count} chunk names of dimension {dimension} "
            f"(expected {count * dimension}, or none)"
        )
    return per_row(vecs.reshape(count, dimension), [len(chunk.names) for chunk in f.chunks])


def per_row(matrix: np.ndarray, counts: list[int]) -> list[np.ndarray | None]:
    """Consecutive blocks of `matrix`, `counts[i]` rows for row i (None for none): each chunk's
    definitions' vectors from one flat embedding of all of them."""
    ends = np.cumsum(counts)
    return [matrix[end - n : end] if n else None for n, end in zip(counts, ends, strict=True)]


def optional_vectors(column: pa.Array | pa.ChunkedArray) -> list[np.ndarray | None]:
    """A vector column's rows, None where a chunk has no vector yet."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if not len(column):
        return []
    if not column.null_count:
        return list(vector_matrix(column))
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    if not valid.any():
        return [None] * len(column)
    matrix = iter(vector_matrix(column.filter(pa.array(valid))))
    return [next(matrix) if ok else None for ok in valid]


def best_cosines(
    query: np.ndarray, vectors: list[np.ndarray | None], names: list[np.ndarray | None]
) -> list[float | None]:
    """Chunks' cosines to a query as the vector arm scores them: the best of each one's own vector's
    and its names' (stored vectors are unit length, so each is a dot product), in two products.
    None for a chunk not embedded yet."""
    held = [(i, v) for i, v in enumerate(vectors) if v is not None]
    present = [i for i, _ in held]
    cosines: list[float | None] = [None] * len(vectors)
    if not present:
        return cosines
    best = np.stack([v for _, v in held]).astype(np.float32, copy=False) @ query
    named = [j for j, i in enumerate(present) if (block := names[i]) is not None and len(block)]
    if named:
        blocks = [names[present[j]] for j in named]
        scores = np.concatenate(blocks) @ query  # type: ignore[arg-type]
        starts = np.cumsum([0, *(len(block) for block in blocks[:-1])])  # type: ignore[arg-type]
        best[named] = np.maximum(best[named], np.maximum.reduceat(scores, starts))
    for j, i in enumerate(present):
        cosines[i] = float(best[j])
    return cosines


def _symbol_rows(folder: str, batch: IndexBatch) -> pa.Table:
    rows = [
        {
            "id": f"{folder}\x00{f.path}\x00{f.sha256}\x00{i}",
            "folder": folder,
            "path": f.path,
            "name": s.name,
            "name_lower": s.name.lower(),
            "kind": s.kind,
            "symbol_path": s.symbol_path,
            "start_line": s.start_line,
            "end_line": s.end_line,
            "signature": s.signature,
            "mtime_ns": f.mtime_ns,
        }
        for f in batch.upserts
        for i, s in enumerate(f.symbols)
    ]
    return pa.Table.from_pylist(rows, schema=SYMBOL_SCHEMA)
