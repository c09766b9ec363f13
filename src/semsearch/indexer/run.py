"""One indexing run: compare disk with the index's manifest and send only what changed.

Per file: same mtime and size as indexed -> skipped without reading; different mtime
but same sha256 -> only the new stamp is recorded (no embedding); otherwise it is read,
chunked, embedded and its chunks replaced atomically. Files in the manifest that are no
longer in the file list are deleted. Reading and chunking run on `concurrency` threads
ahead of embedding; chunks of many files go to the embedder in one call, and many files
go to the API in one request. The run holds the folder's lease, so two runs never interleave.
"""

from __future__ import annotations

import base64
import math
import os
import socket
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import numpy as np

from semsearch.client import ApiError
from semsearch.config import Settings
from semsearch.corpus import screening
from semsearch.corpus.discovery import FileList, size_limit
from semsearch.corpus.extract import Document, Unindexable, extract
from semsearch.corpus.repositories import RepositoryError
from semsearch.embedder.client import EmbedderError, calls_in_flight
from semsearch.embedder.interface import Embedder
from semsearch.index_target import IndexTarget
from semsearch.indexer.chunker import Chunked, ChunkSizes, CountTokens, SharedCounts, chunk_document
from semsearch.indexer.progress import Reporter
from semsearch.indexer.syntax import CHUNKER, language_for
from semsearch.report import summary_line
from semsearch.schemas import (
    ChunkIn,
    DocMeta,
    FileChunks,
    FileStamp,
    Folder,
    IndexBatch,
    ManifestEntry,
    RunPlan,
    RunSummary,
    SymbolIn,
    UnindexableFile,
)

T = TypeVar("T")
R = TypeVar("R")
BYTES_PER_CHUNK_OVERHEAD = 384 * 4 + 300  # vector + row overhead, for --dry-run's disk estimate
STARTUP_WAIT_S = 10.0  # how long a run waits for the embedder to come up before it gives up
# The lexical pass keeps the files it read and chunked, up to this much text, for the embedding
# pass: chunking a file again (its token counts asked of the embedder, which is busy embedding)
# cost the run's model time. Bounded, so a large corpus's run holds ~this much more, not all of it.
KEPT_FOR_EMBEDDING_CHARS = 16_000_000


class Summary(RunSummary):
    """The wire summary, counted up while a run goes."""

    def add(self, other: RunSummary) -> None:
        self.files_processed += other.files_processed
        self.files_skipped += other.files_skipped
        self.files_deleted += other.files_deleted
        self.chunks_written += other.chunks_written
        self.truncated = self.truncated or other.truncated
        for reason, count in other.skipped_by.items():
            self.skipped_by[reason] = self.skipped_by.get(reason, 0) + count
        self.unindexable += other.unindexable
        self.errors += other.errors

    def skip(self, reason: str) -> None:
        self.files_skipped += 1
        self.skipped_by[reason] = self.skipped_by.get(reason, 0) + 1

    def line(self, seconds: float) -> str:
        return summary_line(self, seconds)

    def as_json(self) -> dict[str, object]:
        return self.wire().dump()

    def wire(self) -> RunSummary:
        return RunSummary.model_validate(
            self.model_dump() | {"seconds": round(self.seconds, 2), "skipped_by": dict(sorted(self.skipped_by.items()))}
        )


@dataclass
class Prepared:
    """A file read and chunked, ready to embed."""

    stamp: FileStamp
    chunks: list[ChunkIn]
    meta: DocMeta
    embedded: list[str]  # what the model sees of each chunk (code: its breadcrumb first)
    symbols: list[SymbolIn]

    @property
    def chars(self) -> int:
        """About how much text it holds: its chunks, what is embedded of them, their names."""
        return sum(len(c.text) + sum(map(len, c.names)) for c in self.chunks) + sum(map(len, self.embedded))


class _Kept:
    """Files the lexical pass prepared, for the embedding pass (`KEPT_FOR_EMBEDDING_CHARS`): one is
    used only while the file on disk has the size and mtime it was read with — the test every run
    uses to call a file unchanged — and only once."""

    def __init__(self, budget: int = KEPT_FOR_EMBEDDING_CHARS) -> None:
        self.files: dict[str, Prepared] = {}
        self.left = budget

    def keep(self, rel: str, prepared: Prepared) -> None:
        if prepared.chars <= self.left:
            self.files[rel] = prepared
            self.left -= prepared.chars

    def take(self, root: Path, rel: str) -> Prepared | None:
        prepared = self.files.pop(rel, None)
        if prepared is None:
            return None
        try:
            st = os.lstat(root / rel)
        except OSError:
            return None
        return prepared if (st.st_mtime_ns, st.st_size) == (prepared.stamp.mtime_ns, prepared.stamp.size) else None


@dataclass
class _Pending:
    upserts: list[Prepared] = field(default_factory=list)
    touches: list[FileStamp] = field(default_factory=list)
    chunks: int = 0

    def __len__(self) -> int:
        return len(self.upserts) + len(self.touches)


class _Writer:
    """Sends batches to the API on one background thread, at most one in flight."""

    def __init__(self, api: IndexTarget, folder: str, summary: Summary) -> None:
        self.api, self.folder, self.summary = api, folder, summary
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="write")
        self._inflight: Future[None] | None = None

    def _apply(self, batch: IndexBatch) -> None:
        result = self.api.apply(self.folder, batch)
        self.summary.files_processed += result.upserted
        self.summary.chunks_written += result.chunks_written

    def submit(self, batch: IndexBatch) -> None:
        self.drain()
        self._inflight = self._pool.submit(self._apply, batch)

    def drain(self) -> None:
        """Wait for the write in flight; its error, if any, is raised here."""
        inflight, self._inflight = self._inflight, None
        if inflight is not None:
            inflight.result()

    def close(self) -> None:
        self._pool.shutdown(wait=True)


# Reasons a run lists file by file (the others, `binary` or `too-large`, are only counted).
UNINDEXABLE_LISTED = frozenset({"corrupt", "encrypted", "unreadable", "failed", "front-matter"})


class _Queue:
    """A run's files in order, except that files touched meanwhile (`Indexer.urgent`) jump ahead."""

    def __init__(self, paths: list[str], folder: str, urgent: Callable[[str], set[str]] | None) -> None:
        self.waiting, self.folder, self.urgent = deque(paths), folder, urgent
        self.left = set(paths)

    def __iter__(self) -> Iterator[str]:
        while self.waiting:
            if self.urgent is not None:
                for rel in sorted(self.urgent(self.folder) & self.left, reverse=True):  # then in name order
                    self.waiting.remove(rel)
                    self.waiting.appendleft(rel)
            rel = self.waiting.popleft()
            self.left.discard(rel)
            yield rel


def chunk_file(
    root: Path, rel: str, settings: Settings, count: CountTokens, sizes: ChunkSizes
) -> tuple[Document, Chunked]:
    """A file read and chunked as a run reads and chunks it (`make bench` times the model alone on
    what a run embeds: each chunk's `embedded`, then its `names`)."""
    limit = size_limit(rel, settings.max_file_size_bytes, settings.max_document_bytes)
    doc = extract(root / rel, limit, settings.redact_secrets, settings.notebook_outputs)
    syntax = settings.code_chunker == "syntax"
    return doc, chunk_document(doc, count, sizes, language_for(rel) if syntax else None, rel, cells_by_syntax=syntax)


def _newest_first(root: Path, paths: list[str]) -> list[str]:
    def mtime(rel: str) -> int:
        try:
            return os.lstat(root / rel).st_mtime_ns
        except OSError:
            return 0

    return sorted(paths, key=mtime, reverse=True)


def ordered_map(fn: Callable[[T], R], items: Iterable[T], workers: int) -> Iterator[R]:
    """`map` on a thread pool that keeps at most 2 x workers items in flight (bounded memory)."""
    if workers <= 1:
        yield from map(fn, items)
        return
    with ThreadPoolExecutor(workers, thread_name_prefix="read") as pool:
        window: list[Future[R]] = []
        for item in items:
            window.append(pool.submit(fn, item))
            if len(window) >= 2 * workers:
                yield window.pop(0).result()
        for future in window:
            yield future.result()


class Indexer:
    def __init__(
        self,
        settings: Settings,
        api: IndexTarget,
        embedder: Embedder,
        reporter: Reporter | None = None,
        concurrency: int = 2,
    ) -> None:
        self.settings = settings
        self.api = api
        self.embedder = embedder
        self.out = reporter or Reporter()
        self.concurrency = max(1, concurrency)
        # At start a missing embedder is most likely not started at all: say so within seconds.
        # Mid-run, calls wait out a restart for the client's full retry budget.
        patient, embedder.retry_for_s = embedder.retry_for_s, min(embedder.retry_for_s, STARTUP_WAIT_S)
        try:
            info = embedder.info()
        finally:
            embedder.retry_for_s = patient
        self.model_id = info.model_id
        self.dimension = info.dimension
        self.window = info.max_sequence_length or None
        self.holder = f"indexer pid {os.getpid()} on {socket.gethostname()}"
        self.chunker = CHUNKER if settings.code_chunker == "syntax" else "paragraph"
        self.counts = SharedCounts(self.embedder.count_tokens)
        self.sizes = ChunkSizes.from_settings(settings, self.window)  # what the model's window allows
        self.chunking = {"target": self.sizes.target, "overlap": self.sizes.overlap, "limit": self.sizes.limit}
        # Files touched while a run goes (a watcher's events: what an agent or a person edits): given
        # a folder's name, the relative paths changed since it was last asked. Those still to be
        # embedded in the run go next.
        self.urgent: Callable[[str], set[str]] | None = None
        # True once the process is asked to stop (a watcher's Ctrl-C): the run ends after the file in
        # hand, its written files kept; what it had not embedded yet the next run does.
        self.stopping: Callable[[], bool] | None = None

    def run(self, folders: list[Folder], scope: str = "", force: bool = False, max_files: int | None = None) -> Summary:
        """Index `folders`; with `scope`, only the part of the (single) folder under that relative path."""
        started = time.perf_counter()
        total = Summary()
        budget = max_files
        for number, folder in enumerate(folders, start=1):
            self.out.line(f"[{number}/{len(folders)}] {folder.name}  {folder.path}")
            t0 = time.perf_counter()
            summary = self.index_folder(folder, scope, force, budget)
            if budget is not None:
                budget -= summary.files_processed
            self.out.line("  " + summary.line(time.perf_counter() - t0))
            total.add(summary)
            if summary.truncated or summary.errors:
                break
        if total.files_processed or total.files_deleted:
            self.finish_run()
        total.seconds = time.perf_counter() - started
        return total

    def finish_run(self) -> None:
        """Fold new rows into the full-text index, compact, and report the noise calibration."""
        optimized = self.api.optimize()
        for kind in optimized.built:
            self.out.line(f"Built the {kind} index over {optimized.chunks:,} chunks")
        cal = self.api.calibration()
        if cal.p99 is not None:
            self.out.line(
                f"Calibration: background noise p99 = {cal.p99:.3f} over {cal.pairs} random pairs "
                f"-> suggested minScore {cal.suggested_min_score:.2f} (in use: {cal.min_score:.2f})"
            )

    def index_folder(self, folder: Folder, scope: str, force: bool, max_files: int | None) -> Summary:
        summary = Summary()
        if folder.url is not None:
            self._sync(folder)
        root = Path(folder.path)
        if not root.is_dir():
            # Never prune a folder whose disk vanished (unmounted drive): that would wipe its index.
            summary.errors.append(f"{folder.name}: {root} is not a directory now; skipped, index kept")
            return summary
        lease = self.api.take_lease(folder.name, self.holder)
        try:
            self._index_folder(folder, root, scope, force, max_files, lease.id, summary)
        finally:
            self.api.release_lease(folder.name, lease.id)
        return summary

    def _sync(self, folder: Folder) -> None:
        """A repository folder: its clone brought to the newest commit first. When the remote cannot
        be reached the clone is indexed as it is (its last fetch), and the run says so."""
        try:
            synced = self.api.sync_folder(folder.name)
        except (ApiError, RepositoryError) as exc:  # over REST, or the engine in this process
            self.out.line(f"  ! {exc}; indexing the copy from the last fetch")
            return
        if synced.before == synced.after:
            self.out.line(f"  {synced.url}: up to date at {synced.after[:12]}")
        else:
            self.out.line(f"  {synced.url}: fetched {synced.before[:12] or '(new clone)'} -> {synced.after[:12]}")

    def _index_folder(
        self, folder: Folder, root: Path, scope: str, force: bool, max_files: int | None, lease: str, summary: Summary
    ) -> None:
        prefix = scope.rstrip("/") + "/" if scope else ""
        manifest = {e.path: e for e in self.api.manifest(folder.name).files if e.path.startswith(prefix)}
        listing = FileList.from_settings(root, self.settings)
        candidates = [v for v in listing.verdicts() if v.path.startswith(prefix)]
        for verdict in candidates:
            if not verdict.included:
                summary.skip(verdict.rule)
                self.out.file("excluded", verdict.path, f"{verdict.rule}: {verdict.detail}")
        included = [v.path for v in candidates if v.included]
        todo: list[str] = []
        for rel in included:
            if not force and self._unchanged(root, rel, manifest.get(rel)):
                summary.skip("unchanged")
            else:
                todo.append(rel)
        if max_files is not None and len(todo) > max_files:
            todo, summary.truncated = todo[:max_files], True
        kept = _Kept(0)
        if self.settings.lexical_first_files and len(todo) >= self.settings.lexical_first_files:
            kept = self._lexical_pass(folder.name, root, todo, manifest, lease)
            todo = _newest_first(root, todo)  # what is being worked on is embedded first

        def prepare(rel: str) -> tuple[str, Prepared | Unindexable]:
            return rel, kept.take(root, rel) or self._prepare(root, rel)

        self.out.start_folder(folder.name, len(todo))
        started, done = time.perf_counter(), 0
        pending = _Pending()
        # One write in flight while the next batch embeds: the embedder, the physical limit,
        # never waits for LanceDB. A failed write surfaces at the next flush or at the end.
        writer = _Writer(self.api, folder.name, summary)
        try:
            queued = _Queue(todo, folder.name, self.urgent)
            for rel, prepared in ordered_map(prepare, queued, self.concurrency):
                done += 1
                if isinstance(prepared, Unindexable):
                    summary.skip(prepared.reason)
                    if prepared.reason in UNINDEXABLE_LISTED:
                        summary.unindexable.append(
                            UnindexableFile(path=rel, reason=prepared.reason, detail=str(prepared))
                        )
                    self.out.file("skipped", rel, f"{prepared.reason}: {prepared}")
                    continue
                known = manifest.get(rel)
                if known is not None and not force and known.embedded and known.sha256 == prepared.stamp.sha256:
                    pending.touches.append(prepared.stamp)
                    summary.skip("unchanged")
                else:
                    pending.upserts.append(prepared)
                    pending.chunks += len(prepared.chunks)
                    self.out.file("↺ indexed", rel, f"{len(prepared.chunks)} chunks")
                if (
                    len(pending) >= self.settings.write_batch_files
                    or pending.chunks >= self.settings.embed_batch_chunks
                ):
                    self._flush(pending, lease, writer)
                    pending = _Pending()
                rate = summary.chunks_written / max(1e-6, time.perf_counter() - started)
                self.out.advance(folder.name, done, len(todo), summary.chunks_written, rate)
                if self.stopping is not None and self.stopping():
                    summary.truncated = True  # not everything was looked at: nothing is pruned
                    self.out.line(
                        f"  stopped after {done:,} of {len(todo):,} files; `semsearch index` goes on from there"
                    )
                    break
            self._flush(pending, lease, writer)
            writer.drain()
        finally:
            writer.close()
            self.out.end_folder()
        if summary.truncated:
            return  # we have not looked at everything, so we cannot say what is gone
        if not prefix:  # a full pass: what it left out is what the folder's answers do not cover
            self.api.report_skipped(folder.name, lease, dict(summary.skipped_by))
        gone = sorted(set(manifest) - set(included))
        for start in range(0, len(gone), 500):
            part = gone[start : start + 500]
            batch = IndexBatch(
                lease=lease, model_id=self.model_id, dimension=self.dimension, chunker=self.chunker, deletes=part
            )
            self.api.apply(folder.name, batch)
            summary.files_deleted += len(part)
            for rel in part:
                self.out.file("✗ deleted", rel)

    def _lexical_pass(
        self, folder: str, root: Path, todo: list[str], manifest: dict[str, ManifestEntry], lease: str
    ) -> _Kept:
        """Every file to embed written first without vectors (reading and chunking need no model), so
        BM25, symbols and grep find all of them within seconds of a cold start; the run then embeds them
        and writes each again with its vectors. The manifest marks them not embedded meanwhile, so a run
        that stops between the two passes is finished by the next one. Returns what it prepared, for
        the embedding pass (up to a bound)."""
        started, files, chunks = time.perf_counter(), 0, 0
        kept = _Kept()
        writer = _Writer(self.api, folder, Summary())  # counted once, by the pass that embeds
        pending: list[FileChunks] = []
        try:
            for rel, prepared in zip(
                todo, ordered_map(lambda r: self._prepare(root, r), todo, self.concurrency), strict=True
            ):
                if isinstance(prepared, Unindexable):
                    continue  # the embedding pass reports it
                kept.keep(rel, prepared)
                known = manifest.get(rel)
                if known is not None and known.embedded and known.sha256 == prepared.stamp.sha256:
                    continue  # the same text (a new mtime, or --force): its vectors stand until it is embedded again
                pending.append(self._file_chunks(prepared, None, None))
                files, chunks = files + 1, chunks + len(prepared.chunks)
                if len(pending) >= self.settings.write_batch_files:
                    writer.submit(self._batch(lease, pending, without_vectors=True))
                    pending = []
            if pending:
                writer.submit(self._batch(lease, pending, without_vectors=True))
            writer.drain()
        finally:
            writer.close()
        if files:
            self.api.optimize()  # a new index's full-text index, built over them now
            self.out.line(
                f"  {files:,} files ({chunks:,} chunks) findable by their words after "
                f"{time.perf_counter() - started:.1f} s; embedding them now, newest first"
            )
        return kept

    @staticmethod
    def _file_chunks(p: Prepared, vectors: np.ndarray | None, names: np.ndarray | None) -> FileChunks:
        # Base64Bytes validates base64 text, so the packed floats are encoded here.
        return FileChunks(
            **p.stamp.model_dump(),
            chunks=p.chunks,
            meta=p.meta,
            vectors=base64.b64encode(b"" if vectors is None else vectors.astype("<f4").tobytes()),
            name_vectors=base64.b64encode(b"" if names is None else names.astype("<f4").tobytes()),
            symbols=p.symbols,
        )

    def _batch(
        self,
        lease: str,
        upserts: list[FileChunks],
        touches: list[FileStamp] | None = None,
        without_vectors: bool = False,
    ) -> IndexBatch:
        return IndexBatch(
            lease=lease,
            chunking=self.chunking,
            chunker=self.chunker,
            model_id=self.model_id,
            dimension=self.dimension,
            upserts=upserts,
            touches=touches or [],
            without_vectors=without_vectors,
        )

    @staticmethod
    def _unchanged(root: Path, rel: str, known: ManifestEntry | None) -> bool:
        if known is None or not known.embedded:  # a run stopped before it embedded this file
            return False
        try:
            st = os.lstat(root / rel)
        except OSError:
            return False
        return st.st_mtime_ns == known.mtime_ns and st.st_size == known.size

    def _prepare(self, root: Path, rel: str) -> Prepared | Unindexable:
        """One file's chunks; whatever goes wrong with the file itself is an `Unindexable` with its
        reason (one hostile file never stops a run). The embedder's and API's own failures are not
        the file's: they end the run."""
        try:
            return self._prepare_file(root, rel)
        except Unindexable as exc:
            return exc
        except (EmbedderError, ApiError):
            raise
        except Exception as exc:  # a parser's RecursionError, a chunk over the wire's bounds, a library's bug
            return Unindexable("failed", f"{rel}: {type(exc).__name__}: {str(exc)[:300]}")

    def _prepare_file(self, root: Path, rel: str) -> Prepared:
        doc, chunked = chunk_file(root, rel, self.settings, self.counts, self.sizes)
        stamp = FileStamp(path=rel, mtime_ns=doc.mtime_ns, size=doc.size, sha256=doc.sha256)
        code = language_for(rel)
        meta = chunked.meta
        return Prepared(
            stamp,
            [
                ChunkIn(
                    start_line=c.start_line,
                    end_line=c.end_line,
                    text=c.text,
                    heading=c.heading,
                    page=c.page,
                    kind=c.kind,
                    context=c.context,
                    flags=screening.flags(c.text, prose=code is None),
                    meta=c.meta,
                    names=list(c.names),
                )  # fmt: skip
                for c in chunked.chunks
            ],
            DocMeta(
                title=meta.title, status=meta.status, superseded_by=meta.superseded_by, date=meta.date, tags=meta.tags
            ),
            [c.embedded for c in chunked.chunks],
            [
                SymbolIn(
                    name=s.name,
                    kind=s.kind,
                    symbol_path=s.symbol_path,
                    start_line=s.start_line,
                    end_line=s.end_line,
                    signature=s.signature,
                )  # fmt: skip
                for s in chunked.symbols
            ],
        )

    def _embed(self, texts: list[str]) -> np.ndarray:
        """Vectors in input order, sent in calls of at most `embed_batch_chunks`, up to
        `embed_in_flight` at once (by default one per embedder replica). The texts go out sorted
        by length, so each call holds similar lengths and the embedder's padded batches waste
        little (a call of mixed lengths pads short chunks to the longest)."""
        step = self.settings.embed_batch_chunks
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        calls = [order[start : start + step] for start in range(0, len(order), step)]
        asked = calls_in_flight(self.settings.embedder_target, self.settings.embed_in_flight)
        in_flight = min(asked, len(calls))

        def embed(idx: list[int]) -> tuple[list[int], np.ndarray]:
            return idx, self.embedder.embed([texts[i] for i in idx])

        if in_flight == 1:
            parts = [embed(idx) for idx in calls]
        else:  # a pool of embedders: gRPC's round robin sends each call to the next replica
            with ThreadPoolExecutor(in_flight, thread_name_prefix="embed") as pool:
                parts = list(pool.map(embed, calls))
        vectors = np.empty((len(texts), parts[0][1].shape[1]), dtype=np.float32)
        for idx, part in parts:
            vectors[idx] = part
        return vectors

    def _flush(self, pending: _Pending, lease: str, writer: _Writer) -> None:
        if not len(pending):
            return
        # Each file's chunks, then its chunks' names (a dozen tokens each), in one embedding pass.
        texts = [text for p in pending.upserts for text in [*p.embedded, *(n for c in p.chunks for n in c.names)]]
        vectors = self._embed(texts) if texts else None
        upserts, offset = [], 0
        for p in pending.upserts:
            n, named = len(p.chunks), sum(len(c.names) for c in p.chunks)
            block = None if vectors is None else vectors[offset : offset + n]
            names = None if vectors is None else vectors[offset + n : offset + n + named]
            offset += n + named
            upserts.append(self._file_chunks(p, block, names))
        writer.submit(self._batch(lease, upserts, pending.touches))

    # --- dry run -----------------------------------------------------------------------

    def plan(self, folders: list[Folder], scope: str = "", force: bool = False) -> RunPlan:
        """What a run would do, without embedding: files, chunks (real tokenizer), time, disk."""
        files = changed = chunks = text_bytes = 0
        skipped: Counter[str] = Counter()
        for folder in folders:
            root = Path(folder.path)
            prefix = scope.rstrip("/") + "/" if scope else ""
            manifest = {e.path: e for e in self.api.manifest(folder.name).files}
            self.out.line(f"{folder.name}  {folder.path}")
            for verdict in FileList.from_settings(root, self.settings).verdicts():
                if not verdict.path.startswith(prefix):
                    continue
                if not verdict.included:
                    skipped[verdict.rule] += 1
                    continue
                files += 1
                if not force and self._unchanged(root, verdict.path, manifest.get(verdict.path)):
                    continue
                prepared = self._prepare(root, verdict.path)
                if isinstance(prepared, Unindexable):
                    skipped[prepared.reason] += 1
                    continue
                changed += 1
                chunks += len(prepared.chunks)
                text_bytes += sum(len(c.text.encode()) for c in prepared.chunks)
                self.out.line(f"  would index  {verdict.path}  ({len(prepared.chunks)} chunks)")
        rate = self.embedder.info().measured_chunks_per_second or 0.0
        seconds = chunks / rate if rate else None
        disk = text_bytes + chunks * BYTES_PER_CHUNK_OVERHEAD
        eta = f"~{seconds:,.0f}s at {rate:.1f} chunks/s" if seconds is not None else "unknown (no throughput yet)"
        self.out.line(
            f"dry run: {files:,} files ({changed:,} new or changed), ~{chunks:,} chunks, "
            f"embedding {eta}, ~{disk / 1e6:.1f} MB on disk"
        )
        return RunPlan(
            files=files,
            files_to_index=changed,
            chunks=chunks,
            # Up to the next tenth: a few chunks on a fast embedder are not an estimate of no time at all.
            embed_seconds=math.ceil(seconds * 10) / 10 if seconds is not None else None,
            chunks_per_second=round(rate, 2),
            disk_bytes=disk,
            skipped_by=dict(sorted(skipped.items())),
        )
