"""One indexing run: compare disk with the index's manifest and send only what changed.

Per file: same mtime and size as indexed -> skipped without reading; different mtime
but same sha256 -> only the new mtime is recorded (no embedding); otherwise it is read,
chunked, embedded and its chunks replaced. Files in the manifest but gone from disk are
deleted. Work is batched: chunks of many files go to the embedder in one call, and many
files go to the API in one request.
"""

from __future__ import annotations

import base64
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from embedder.client import EmbedderClient
from indexer.chunker import chunk_text
from indexer.discovery import list_files
from indexer.extract import Unindexable, read_file
from semsearch.client import ApiClient
from semsearch.config import Settings
from semsearch.schemas import ChunkIn, FileChunks, FileStamp, Folder, IndexBatch, ManifestEntry

Log = Callable[[str], None]


@dataclass
class Summary:
    files_processed: int = 0
    files_skipped: int = 0
    files_deleted: int = 0
    chunks_written: int = 0
    truncated: bool = False
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)
    skipped_by: Counter[str] = field(default_factory=Counter)

    def add(self, other: Summary) -> None:
        self.files_processed += other.files_processed
        self.files_skipped += other.files_skipped
        self.files_deleted += other.files_deleted
        self.chunks_written += other.chunks_written
        self.truncated = self.truncated or other.truncated
        self.errors += other.errors
        self.skipped_by.update(other.skipped_by)

    def as_json(self) -> dict[str, object]:
        return {
            "filesProcessed": self.files_processed,
            "filesSkipped": self.files_skipped,
            "filesDeleted": self.files_deleted,
            "chunksWritten": self.chunks_written,
            "truncated": self.truncated,
            "seconds": round(self.seconds, 2),
            "skippedBy": dict(sorted(self.skipped_by.items())),
            "errors": self.errors,
        }


@dataclass
class _Pending:
    """Files read and chunked, waiting to be embedded and written together."""

    upserts: list[tuple[FileStamp, list[ChunkIn]]] = field(default_factory=list)
    touches: list[FileStamp] = field(default_factory=list)
    chunks: int = 0

    def __len__(self) -> int:
        return len(self.upserts) + len(self.touches)


class Indexer:
    def __init__(self, settings: Settings, api: ApiClient, embedder: EmbedderClient, log: Log = print) -> None:
        self.settings = settings
        self.api = api
        self.embedder = embedder
        self.log = log
        info = embedder.info()
        self.model_id = info.model_id
        self.dimension = info.dimension

    def run(self, folders: list[Folder], scope: str = "", force: bool = False, max_files: int | None = None) -> Summary:
        """Index `folders`; with `scope`, only the part of the (single) folder under that relative path."""
        started = time.perf_counter()
        total = Summary()
        budget = max_files
        for number, folder in enumerate(folders, start=1):
            self.log(f"[{number}/{len(folders)}] {folder.name}  {folder.path}")
            t0 = time.perf_counter()
            summary = self.index_folder(folder, scope, force, budget)
            if budget is not None:
                budget -= summary.files_processed
            self.log(
                f"  {summary.files_processed:,} indexed  {summary.files_skipped:,} skipped  "
                f"{summary.files_deleted:,} deleted  {summary.chunks_written:,} chunks  {time.perf_counter() - t0:.1f}s"
            )
            total.add(summary)
            if summary.truncated:
                break
        total.seconds = time.perf_counter() - started
        return total

    def index_folder(self, folder: Folder, scope: str, force: bool, max_files: int | None) -> Summary:
        summary = Summary()
        root = Path(folder.path)
        if not root.is_dir():
            # Never prune a folder whose disk vanished (unmounted drive): that would wipe its index.
            summary.errors.append(f"{folder.name}: {root} is not a directory now; skipped, index kept")
            return summary
        prefix = scope.rstrip("/") + "/" if scope else ""
        manifest: dict[str, ManifestEntry] = {
            e.path: e for e in self.api.manifest(folder.name).files if e.path.startswith(prefix)
        }
        seen: set[str] = set()
        pending = _Pending()
        for rel in list_files(root / prefix if prefix else root, self.settings.max_file_size_bytes):
            rel = prefix + rel
            seen.add(rel)
            if max_files is not None and summary.files_processed + len(pending.upserts) >= max_files:
                summary.truncated = True
                break
            self._consider(folder, root, rel, manifest.get(rel), force, pending, summary)
            if len(pending) >= self.settings.write_batch_files or pending.chunks >= self.settings.embed_batch_chunks:
                self._flush(folder, pending, summary)
                pending = _Pending()
        self._flush(folder, pending, summary)
        if not summary.truncated:
            gone = sorted(set(manifest) - seen)
            for start in range(0, len(gone), 500):
                part = gone[start : start + 500]
                self.api.apply(folder.name, IndexBatch(model_id=self.model_id, dimension=self.dimension, deletes=part))
                summary.files_deleted += len(part)
        return summary

    def _consider(
        self,
        folder: Folder,
        root: Path,
        rel: str,
        known: ManifestEntry | None,
        force: bool,
        pending: _Pending,
        summary: Summary,
    ) -> None:
        path = root / rel
        if known is not None and not force:
            try:
                st = os.lstat(path)
            except OSError:
                st = None
            if st is not None and st.st_mtime_ns == known.mtime_ns and st.st_size == known.size:
                summary.files_skipped += 1
                summary.skipped_by["unchanged"] += 1
                return
        try:
            content = read_file(path, self.settings.max_file_size_bytes)
        except Unindexable as exc:
            summary.files_skipped += 1
            summary.skipped_by[exc.reason] += 1
            return
        stamp = FileStamp(path=rel, mtime_ns=content.mtime_ns, size=content.size, sha256=content.sha256)
        if known is not None and not force and known.sha256 == content.sha256:
            pending.touches.append(stamp)
            summary.files_skipped += 1
            summary.skipped_by["unchanged"] += 1
            return
        chunks = chunk_text(
            content.text, self.embedder.count_tokens, self.settings.chunk_tokens, self.settings.chunk_max_tokens
        )
        pending.upserts.append(
            (stamp, [ChunkIn(start_line=c.start_line, end_line=c.end_line, text=c.text) for c in chunks])
        )
        pending.chunks += len(chunks)

    def _flush(self, folder: Folder, pending: _Pending, summary: Summary) -> None:
        if not len(pending):
            return
        texts = [c.text for _, chunks in pending.upserts for c in chunks]
        vectors = self.embedder.embed(texts) if texts else None
        upserts, offset = [], 0
        for stamp, chunks in pending.upserts:
            block = b"" if vectors is None else vectors[offset : offset + len(chunks)].astype("<f4").tobytes()
            offset += len(chunks)
            # Base64Bytes validates base64 text, so the packed floats are encoded here.
            upserts.append(FileChunks(**stamp.model_dump(), chunks=chunks, vectors=base64.b64encode(block)))
        batch = IndexBatch(model_id=self.model_id, dimension=self.dimension, upserts=upserts, touches=pending.touches)
        result = self.api.apply(folder.name, batch)
        summary.files_processed += result.upserted
        summary.chunks_written += result.chunks_written
