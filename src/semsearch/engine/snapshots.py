"""Index snapshots: some folders' index in one portable archive — built once (in CI, on a bigger
machine) and used elsewhere, verified before it replaces anything, and swapped in whole.

An archive is an uncompressed tar: `snapshot.json` first (`SnapshotManifest`: model identity,
chunker, folders relative to a root, each member's sha256 and a digest over all of it), then the
rows of the three tables as Arrow IPC streams with zstd-compressed buffers. Rows, not Lance's own
files: an archive holds only the chosen folders and no version history, and reading one needs
only pyarrow.

An import checks everything before the index changes — the digest, every member's sha256, size
and schema, that every row belongs to a declared folder, the model against the running embedder,
the chunker against this API's setting, the folders' new paths as `add` checks them — then
builds a complete index (the snapshot's folders plus the folders kept from this one) beside the
current one and swaps it in (`Store.swap`). A journal lets `recover` finish or undo a swap that a
crash interrupted: a killed import leaves the old index or the new one, never a mix.

The next `semsearch index` costs only what changed: the manifest keeps each file's sha256, and
a file whose mtime differs but whose content does not is only re-stamped (`indexer/run.py`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import ValidationError

from semsearch.config import Settings
from semsearch.corpus.files import file_list
from semsearch.corpus.folders import FolderRegistry, RegisteredFolder, inside
from semsearch.embedder.interface import Embedder
from semsearch.engine.filters import sql_in
from semsearch.engine.runs import Leases
from semsearch.engine.store import (
    CHUNKS,
    FILE_SCHEMA,
    FILES,
    LATER_COLUMNS,
    LATER_FILE_COLUMNS,
    SCHEMA_VERSION,
    SYMBOL_SCHEMA,
    SYMBOLS,
    ModelMismatch,
    Store,
    build,
    chunk_schema,
    folder_views,
)
from semsearch.schemas import (
    SNAPSHOT_FORMAT,
    SNAPSHOT_MANIFEST,
    SnapshotFolder,
    SnapshotImported,
    SnapshotManifest,
    SnapshotMember,
    SnapshotOrigin,
    relative_path_problem,
)
from semsearch.version import __version__

MEMBERS = {CHUNKS: "chunks.arrow", SYMBOLS: "symbols.arrow", FILES: "files.arrow"}
JOURNAL = "snapshot-import.json"  # in the data dir while a swap is under way
STAGED = "index.importing"  # the new index while it is built, beside the current one
TEMPORARY = "snapshot-"  # prefix of uploads and work directories: whatever a crash leaves is removed at start
MAX_MANIFEST_BYTES = 16 * 1024 * 1024  # snapshot.json lists folders and members, never files
# A member's rows may unpack to this many times its archived size (vectors hardly compress, text
# 3-5x), and always to MIN_DECODED_CAP: past that it is a compression bomb, refused while reading.
DECODED_RATIO = 64
MIN_DECODED_CAP = 256 * 1024 * 1024
COPY_CHUNK = 1024 * 1024


class SnapshotRefused(ValueError):
    """The archive cannot be exported or imported; the message says why and what to do.
    Nothing in the index changed."""


# --- export ---------------------------------------------------------------------------------


def export(store: Store, registry: FolderRegistry, settings: Settings, names: list[str], root: str | None) -> Path:
    """Writes an archive of the named folders (all when none) to a temporary file in the data
    dir and returns its path; the caller sends it and deletes it."""
    chosen = [registry.get(name) for name in names] if names else registry.all()
    if not chosen:
        raise SnapshotRefused("no folders are registered, so there is nothing to export; add one with `semsearch add`")
    if store.model_id is None:
        raise SnapshotRefused("the index is empty; run `semsearch index` before exporting it")
    base = _export_root(chosen, root)
    excluded, left_out = _excluded(store, chosen, settings)
    keys = pa.array(sorted(left_out), pa.string())

    def admitted(batch: pa.RecordBatch) -> pa.RecordBatch:
        if not len(keys):
            return batch
        key = pc.binary_join_element_wise(batch["folder"], batch["path"], "\x00")
        return batch.filter(pc.invert(pc.is_in(key, value_set=keys)))

    work = Path(tempfile.mkdtemp(prefix=f"{TEMPORARY}export-", dir=settings.data_dir))
    try:
        where = sql_in("folder", [f.name for f in chosen])
        members: dict[str, SnapshotMember] = {}
        counts: dict[str, int] = {}
        for table, member in MEMBERS.items():
            counts[table] = _write_rows(work / member, store.rows(table, where), admitted)
            members[member] = SnapshotMember(sha256=_sha256(work / member), bytes=(work / member).stat().st_size)
        skipped = store.skipped()
        body = SnapshotManifest(
            semsearch_version=__version__,
            created_at=datetime.now(UTC),
            schema_version=SCHEMA_VERSION,
            model_id=store.model_id,
            dimension=int(store.meta["dimension"]),
            chunker=store.meta.get("chunker"),
            chunking=store.meta.get("chunking") or {},
            root=base,
            folders=[SnapshotFolder(name=f.name, path=os.path.relpath(f.path, base)) for f in chosen],
            files=counts[FILES],
            chunks=counts[CHUNKS],
            symbols=counts[SYMBOLS],
            excluded=excluded,
            skipped={f.name: skipped[f.name] for f in chosen if f.name in skipped},
            members=members,
            digest="",
        ).dump()
        body.pop("digest")
        body["digest"] = _digest(body)
        fd, name = tempfile.mkstemp(prefix=f"{TEMPORARY}export-", suffix=".tar", dir=settings.data_dir)
        os.close(fd)
        archive = Path(name)
        with tarfile.open(archive, "w", format=tarfile.PAX_FORMAT) as tar:
            _add_bytes(tar, SNAPSHOT_MANIFEST, json.dumps(body, indent=2).encode())
            for member in MEMBERS.values():
                tar.add(work / member, arcname=member)
        return archive
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _export_root(chosen: list[RegisteredFolder], root: str | None) -> str:
    """The directory the folders' paths are recorded relative to: the one given, else the
    folders' common parent (a single folder's parent, so its own name survives)."""
    paths = [os.path.normpath(f.path) for f in chosen]
    if root is None:
        common = os.path.commonpath(paths)
        return os.path.dirname(common) if common in paths else common
    if not os.path.isabs(root):
        raise SnapshotRefused(f"root {root!r} is not an absolute path; send the directory the folders are under")
    root = os.path.normpath(root)
    outside = [f.name for f, p in zip(chosen, paths, strict=True) if not inside(p, root)]
    if outside:
        raise SnapshotRefused(f"folders {', '.join(outside)} are not under the root {root}; choose a root above them")
    return root


def _excluded(store: Store, chosen: list[RegisteredFolder], settings: Settings) -> tuple[dict[str, int], set[str]]:
    """Indexed files the indexer's rules exclude today (a pattern added to .indexignore, a file
    renamed to look like a secret, a file gone): counts by rule, and their `folder\\0path` keys."""
    counts: dict[str, int] = {}
    keys: set[str] = set()
    for folder in chosen:
        if not os.path.isdir(folder.path):
            raise SnapshotRefused(
                f"folder {folder.name!r} ({folder.path}) is not a directory the API can see, so its files "
                "cannot be checked against the indexer's rules; mount it or export the other folders"
            )
        files = file_list(folder.path, settings)
        for entry in store.manifest(folder.name):
            verdict = files.explain(entry.path)
            if not verdict.included:
                counts[verdict.rule] = counts.get(verdict.rule, 0) + 1
                keys.add(f"{folder.name}\x00{entry.path}")
    return counts, keys


def _write_rows(path: Path, reader: pa.RecordBatchReader, admitted: Any) -> int:
    rows = 0
    options = pa.ipc.IpcWriteOptions(compression="zstd")
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, reader.schema, options=options) as writer:
        for batch in reader:
            kept = admitted(batch)
            writer.write_batch(kept)
            rows += kept.num_rows
    return rows


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), int(datetime.now(UTC).timestamp()), 0o644
    tar.addfile(info, _BytesReader(data))


class _BytesReader:
    def __init__(self, data: bytes) -> None:
        self._data, self._at = data, 0

    def read(self, n: int = -1) -> bytes:
        end = len(self._data) if n < 0 else self._at + n
        out, self._at = self._data[self._at : end], min(end, len(self._data))
        return out


# --- import ---------------------------------------------------------------------------------


def import_(
    archive: Path,
    store: Store,
    registry: FolderRegistry,
    leases: Leases,
    embedder: Embedder,
    settings: Settings,
    root: str | None,
    allow_outside_root: bool = False,
) -> SnapshotImported:
    if store.location.local is None:
        raise SnapshotRefused(
            f"the index is on object storage ({store.location}); import snapshots into a local index (the swap "
            "is a directory rename), or index the folders where the store is"
        )
    work = Path(tempfile.mkdtemp(prefix=f"{TEMPORARY}import-", dir=settings.data_dir))
    try:
        manifest = _unpack(archive, work)
        names = [f.name for f in manifest.folders]
        base = os.path.normpath(root) if root else manifest.root
        if not os.path.isabs(base):
            raise SnapshotRefused(f"root {root!r} is not an absolute path; send where the folders are on this machine")
        incoming = [RegisteredFolder(f.name, os.path.normpath(os.path.join(base, f.path))) for f in manifest.folders]
        planned = registry.plan(incoming, allow_outside_root)
        kept = [f.name for f in planned if f.name not in names]
        _check_identity(manifest, store, embedder, settings, kept)
        held = []
        try:
            for name in names:  # an indexing run of these folders would write into the index being replaced
                held.append(leases.acquire(name, "a snapshot import"))
            with store.paused():  # no write lands in a kept folder between reading it and the swap
                staged = settings.data_dir / STAGED
                shutil.rmtree(staged, ignore_errors=True)
                build(
                    staged,
                    _meta(manifest),
                    {**{k: v for k, v in store.skipped().items() if k in kept}, **manifest.skipped},
                    {table: _rows(table, manifest, work, store, kept) for table in MEMBERS},
                    settings.ann_min_rows,
                )
                journal = settings.data_dir / JOURNAL
                _write_atomic(journal, json.dumps([asdict(f) for f in planned]).encode())

                def commit() -> None:
                    registry.install(planned)
                    journal.unlink()

                store.swap(staged, commit)
        finally:
            for lease in held:
                leases.release(lease.folder, lease.id)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(settings.data_dir / STAGED, ignore_errors=True)
    views = folder_views([f for f in planned if f.name in names], store)
    return SnapshotImported(
        digest=manifest.digest,
        folders=views,
        kept=kept,
        files=manifest.files,
        chunks=manifest.chunks,
        next_step="run `semsearch index` to bring it up to date with the files here: only files whose "
        "content differs from the snapshot's are embedded again",
    )


def _unpack(archive: Path, work: Path) -> SnapshotManifest:
    """The verified manifest; the data members copied into `work`, each checked against it."""
    try:
        with tarfile.open(archive, "r:") as tar:
            first = tar.next()
            if first is None or first.name != SNAPSHOT_MANIFEST or not first.isfile():
                raise SnapshotRefused(
                    f"this is not a semsearch snapshot (its first member is {first.name if first else 'missing'!r}, "
                    f"not {SNAPSHOT_MANIFEST}); make one with `semsearch snapshot export`"
                )
            if first.size > MAX_MANIFEST_BYTES:
                raise SnapshotRefused(f"{SNAPSHOT_MANIFEST} is {first.size:,} bytes, far more than any snapshot lists")
            manifest = _verified_manifest(_read(tar, first))
            expected = {member: spec for member, spec in manifest.members.items() if member in MEMBERS.values()}
            if set(expected) != set(MEMBERS.values()):
                raise SnapshotRefused(
                    f"the snapshot lists members {sorted(manifest.members)}, not {sorted(MEMBERS.values())}"
                )
            seen: set[str] = set()
            while (info := tar.next()) is not None:  # iterating the TarFile would start over
                spec = expected.get(info.name)
                if spec is None or not info.isfile() or info.issparse() or info.name in seen:
                    raise SnapshotRefused(
                        f"the archive holds an unexpected member {info.name!r}; it was not made by semsearch"
                    )
                if info.size != spec.bytes:
                    raise SnapshotRefused(
                        f"{info.name} is {info.size:,} bytes, the manifest says {spec.bytes:,}: {_DAMAGED}"
                    )
                source = tar.extractfile(info)
                assert source is not None
                if _copy(source, work / info.name) != spec.sha256:
                    raise SnapshotRefused(f"{info.name} does not match its sha256 in the manifest: {_DAMAGED}")
                seen.add(info.name)
    except (tarfile.TarError, EOFError) as exc:
        raise SnapshotRefused(f"the archive cannot be read ({exc}): {_DAMAGED}") from exc
    missing = sorted(set(MEMBERS.values()) - seen)
    if missing:
        raise SnapshotRefused(f"the archive ends before {', '.join(missing)}: {_DAMAGED}")
    _check_rows(manifest, work)
    return manifest


_DAMAGED = "the archive is truncated or damaged, and nothing was changed; copy or export it again"


def _read(tar: tarfile.TarFile, info: tarfile.TarInfo) -> bytes:
    source = tar.extractfile(info)
    data = source.read() if source is not None else b""
    if len(data) != info.size:
        raise SnapshotRefused(f"{info.name} is cut short: {_DAMAGED}")
    return data


def _verified_manifest(data: bytes) -> SnapshotManifest:
    try:
        body = json.loads(data)
        claimed = body.pop("digest")
    except (ValueError, AttributeError, KeyError, TypeError, RecursionError) as exc:  # 200k nested `[`: recursion
        raise SnapshotRefused(f"{SNAPSHOT_MANIFEST} is not valid: {_DAMAGED}") from exc
    if body.get("format") != SNAPSHOT_FORMAT:
        raise SnapshotRefused(
            f"this is not a semsearch snapshot ({SNAPSHOT_MANIFEST} has format {body.get('format')!r})"
        )
    if _digest(body) != claimed:
        raise SnapshotRefused(f"{SNAPSHOT_MANIFEST} does not match its digest: {_DAMAGED}")
    try:
        manifest = SnapshotManifest.model_validate({**body, "digest": claimed})
    except ValidationError as exc:  # a folder named `a/b`, `..` or `<script>` among them
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
        raise SnapshotRefused(
            f"{SNAPSHOT_MANIFEST} does not describe a snapshot this version can import ({problems})"
        ) from exc
    if manifest.format_version != 1 or manifest.schema_version != SCHEMA_VERSION:
        raise SnapshotRefused(
            f"the snapshot was written by semsearch {manifest.semsearch_version} (format "
            f"{manifest.format_version}, schema v{manifest.schema_version}); this version reads format 1, schema "
            f"v{SCHEMA_VERSION}: export it again with this version, or index the folders here"
        )
    return manifest


def _check_rows(manifest: SnapshotManifest, work: Path) -> None:
    """Each member has the schema this version writes, the rows the manifest counts, and rows of
    the declared folders only (an archive cannot write into a folder it does not name)."""
    schemas = {CHUNKS: chunk_schema(manifest.dimension), FILES: FILE_SCHEMA, SYMBOLS: SYMBOL_SCHEMA}
    counts = {CHUNKS: manifest.chunks, FILES: manifest.files, SYMBOLS: manifest.symbols}
    names = pa.array([f.name for f in manifest.folders], pa.string())
    for table, member in MEMBERS.items():
        packed = (work / member).stat().st_size
        cap = max(MIN_DECODED_CAP, DECODED_RATIO * packed)
        try:
            with pa.ipc.open_stream(pa.memory_map(str(work / member))) as reader:
                if not any(reader.schema.equals(schema) for schema in _accepted(schemas[table])):
                    raise SnapshotRefused(f"{member} does not have the columns this version of semsearch writes")
                rows = decoded = 0
                for batch in reader:
                    rows += batch.num_rows
                    decoded += batch.nbytes
                    if decoded > cap:  # a zstd bomb: a few KB that unpack to gigabytes
                        raise SnapshotRefused(
                            f"{member} unpacks to more than {cap:,} bytes from {packed:,}; no export compresses "
                            "that well, so it was refused and nothing was changed"
                        )
                    if not pc.all(pc.is_in(batch["folder"], value_set=names)).as_py() and batch.num_rows:
                        raise SnapshotRefused(f"{member} holds rows of folders the manifest does not name")
                    for path in pc.unique(batch["path"]).to_pylist():
                        problem = relative_path_problem(path)
                        if problem is not None:
                            raise SnapshotRefused(
                                f"{member} holds a row whose path {path[:200]!r} has {problem}; a snapshot's paths are "
                                "relative to their folder, so it was refused and nothing was changed"
                            )
        except pa.ArrowInvalid as exc:
            raise SnapshotRefused(f"{member} cannot be read ({exc}): {_DAMAGED}") from exc
        finally:
            pa.default_memory_pool().release_unused()
        if rows != counts[table]:
            raise SnapshotRefused(f"{member} holds {rows:,} rows, the manifest says {counts[table]:,}: {_DAMAGED}")


def _check_identity(
    manifest: SnapshotManifest, store: Store, embedder: Embedder, settings: Settings, kept: list[str]
) -> None:
    """The snapshot's vectors must come from the model this API embeds queries with, its
    chunks from the chunker its indexer uses; the folders kept must share both."""
    info = embedder.info()
    theirs = f"{manifest.model_id} ({manifest.dimension} dims)"
    if (info.model_id, info.dimension) != (manifest.model_id, manifest.dimension):
        raise ModelMismatch(
            f"the snapshot was built with {theirs} but the embedder here serves {info.model_id} "
            f"({info.dimension} dims); import it where that model runs, or index the folders here "
            "with `semsearch index`"
        )
    family = (manifest.chunker or "paragraph").split("-")[0]
    if family != settings.code_chunker:
        raise ModelMismatch(
            f"the snapshot's code was chunked by the {manifest.chunker or 'paragraph'} chunker but this server uses "
            f"{settings.code_chunker} (SEMSEARCH_CODE_CHUNKER); set it to {family}, or index the folders here"
        )
    if kept and store.model_id is not None:
        ours = (store.model_id, store.meta.get("dimension"), store.meta.get("chunker"))
        if ours != (manifest.model_id, manifest.dimension, manifest.chunker):
            raise ModelMismatch(
                f"the folders kept here ({', '.join(kept)}) were indexed with {ours[0]} and the {ours[2]} chunker, "
                f"the snapshot with {theirs} and the {manifest.chunker} chunker; one index never mixes them — "
                "remove those folders first (`semsearch remove NAME`) or import elsewhere"
            )


def _meta(manifest: SnapshotManifest) -> dict[str, Any]:
    origin = SnapshotOrigin(
        digest=manifest.digest,
        created_at=manifest.created_at,
        imported_at=datetime.now(UTC),
        semsearch_version=manifest.semsearch_version,
        folders=[f.name for f in manifest.folders],
    )
    return {
        "schema_version": SCHEMA_VERSION,
        "model_id": manifest.model_id,
        "dimension": manifest.dimension,
        "chunker": manifest.chunker,
        "chunking": manifest.chunking,
        "snapshot": origin.dump(),
    }


def _accepted(schema: pa.Schema) -> list[pa.Schema]:
    """The member's schema as this version writes it, and as earlier versions did: without the
    columns added later (`LATER_COLUMNS`, `LATER_FILE_COLUMNS`: still imported, read as null), and
    chunks whose vector could not be null."""
    later = [name for name in (*LATER_COLUMNS, *LATER_FILE_COLUMNS) if name in schema.names]
    layouts = [pa.schema(list(schema)[: len(schema) - k]) for k in range(len(later) + 1)]
    if "vector" in schema.names:  # before a run's lexical pass every chunk had its vector
        at = schema.get_field_index("vector")
        layouts += [layout.set(at, layout.field(at).with_nullable(False)) for layout in layouts]
    return layouts


def _rows(table: str, manifest: SnapshotManifest, work: Path, store: Store, kept: list[str]) -> pa.RecordBatchReader:
    """The new table's rows: the kept folders' from the current index, then the snapshot's."""
    schema = {CHUNKS: chunk_schema(manifest.dimension), FILES: FILE_SCHEMA, SYMBOLS: SYMBOL_SCHEMA}[table]

    def batches() -> Iterator[pa.RecordBatch]:
        if kept:
            for batch in store.rows(table, sql_in("folder", kept)):
                yield pa.RecordBatch.from_arrays(
                    [batch.column(name).cast(field.type) for name, field in zip(schema.names, schema, strict=True)],
                    schema=schema,
                )
        with pa.ipc.open_stream(pa.memory_map(str(work / MEMBERS[table]))) as reader:
            for batch in reader:
                if batch.schema.equals(schema):
                    yield batch
                else:  # an export made before chunks kept their embedded context, or their names
                    missing = [pa.nulls(batch.num_rows, field.type) for field in list(schema)[batch.num_columns :]]
                    yield pa.RecordBatch.from_arrays([*batch.columns, *missing], schema=schema)

    return pa.RecordBatchReader.from_batches(schema, batches())


# --- a swap interrupted ------------------------------------------------------------------------


def recover(settings: Settings) -> str | None:
    """At start, before the index is opened: an import the process died in is finished (the new
    index was in place: the folder list is written) or undone (it was not: the old index is put
    back); leftovers are removed. Returns what was done, for the log."""
    data, index = settings.data_dir, settings.index_dir
    journal, staged = data / JOURNAL, data / STAGED
    previous = index.with_name(f"{index.name}.previous")
    done = None
    if journal.exists():
        if staged.exists():  # the swap's commit (staged -> index) never happened
            if previous.exists():  # so `index`, if there is one, is only what start-up made
                shutil.rmtree(index, ignore_errors=True)
                previous.rename(index)
            done = "an interrupted snapshot import was undone: the index is as it was before it"
        else:
            folders = [RegisteredFolder(**f) for f in json.loads(journal.read_text())]
            FolderRegistry(settings.folders_file, settings.corpus_root, []).install(folders)
            done = "an interrupted snapshot import was completed: its folders are registered"
        journal.unlink()
    if index.exists():
        shutil.rmtree(previous, ignore_errors=True)
    shutil.rmtree(staged, ignore_errors=True)
    for leftover in data.glob(f"{TEMPORARY}*") if data.exists() else []:
        if leftover.is_dir():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            leftover.unlink(missing_ok=True)
    return done


# --- helpers ------------------------------------------------------------------------------------


def _digest(body: dict[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(COPY_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _copy(source: IO[bytes], dest: Path) -> str:
    digest = hashlib.sha256()
    with dest.open("wb") as out:
        while block := source.read(COPY_CHUNK):
            digest.update(block)
            out.write(block)
    return digest.hexdigest()


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
