"""`Engine`: one index and everything that answers over it, in this process.

Built once from a service's settings and an embedder (the gRPC client in the API, the model
itself in `semsearch.connect`); the REST routes are thin adapters over its methods, and it is
also what an indexer writes through when it runs in the same process (`Indexer` takes it where it
would take the REST client: the same methods, the same wire types). Nothing here knows of HTTP:
who may call what, and which folders a caller sees, is the adapter's business — a method that
takes a folder name trusts that the caller was allowed it.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import threading
from datetime import timedelta
from pathlib import Path

import numpy as np

from semsearch.config import Settings
from semsearch.corpus import repositories
from semsearch.corpus.folders import FolderError, FolderRegistry, inside
from semsearch.embedder.client import EmbedderError
from semsearch.embedder.interface import Embedder
from semsearch.engine import gather as gathering
from semsearch.engine import snapshots
from semsearch.engine.local_copy import LocalCopy
from semsearch.engine.location import IndexLocation
from semsearch.engine.retrieval import SearchEngine
from semsearch.engine.runs import Leases, Runs
from semsearch.engine.store import Store, folder_views
from semsearch.engine.switch import SwitchBusy, SwitchJob, paused
from semsearch.engine.writer import WriterLease
from semsearch.schemas import (
    Calibration,
    EmbedderStatus,
    Folder,
    GatherRequest,
    GatherResponse,
    IndexBatch,
    IndexBatchResult,
    Lease,
    LocalCopyStatus,
    Manifest,
    ModelSwitch,
    Optimized,
    SearchRequest,
    SearchResponse,
    Status,
    Synced,
)
from semsearch.text import embedded
from semsearch.timing import Timings
from semsearch.version import __version__

log = logging.getLogger("semsearch.engine")


class Engine:
    def __init__(self, settings: Settings, embedder: Embedder, lease: WriterLease | None = None) -> None:
        """`lease`: the writer lease over a shared index, taken before (only a writer holds one)."""
        recovered = snapshots.recover(settings)
        if recovered:
            log.warning(recovered)
        self.settings, self.embedder, self.lease = settings, embedder, lease
        location = IndexLocation.from_settings(settings)
        replica = settings.role == "query"
        shared = location if location.local is None else None
        # Documents kept beside an index on object storage (None: a local index), and how often a
        # replica re-reads them; the API keeps its tokens there too (api/app.py).
        self.shared, self.shared_refresh_s = shared, settings.read_consistency_s if replica else 0.0
        copy = None
        if replica and shared is not None and settings.local_copy_mb:
            # Listed twice per interval, so a new version lands within it; a dropped file outlives
            # two intervals, as the writer keeps old versions for SEMSEARCH_VERSION_RETENTION_S.
            interval = settings.read_consistency_s
            copy = LocalCopy(location, settings.data_dir / "index-copy", settings.local_copy_mb << 20, interval / 2,
                             2 * interval)  # fmt: skip
        self.store = Store(
            location,
            timedelta(seconds=settings.version_retention_s),
            settings.housekeeping_every_writes,
            read_consistency=timedelta(seconds=settings.read_consistency_s) if replica else None,
            resident_rows=settings.resident_rows,
            local_copy=copy,
            ann_min_rows=settings.ann_min_rows,
        )
        self.store.warm()
        # With the index on object storage the folder list and the run queue live beside it:
        # every API over that index (the writer, its query replicas) reads the same ones.
        self.registry = FolderRegistry(
            settings.folders_file,
            settings.corpus_root,
            [settings.data_dir, settings.model_cache_dir],
            shared=shared,
            refresh_s=settings.read_consistency_s if replica else 0.0,
        )
        self.leases = Leases(settings.lease_ttl_s)
        self.runs = Runs(
            silence=timedelta(seconds=settings.run_silence_s),
            shared=shared,
            refresh_s=settings.read_consistency_s if replica else 0.0,
        )
        self.searcher = SearchEngine(self.store, embedder, self.registry, settings)
        self._switch: SwitchJob | None = None
        self._switching = threading.Lock()

    def close(self) -> None:
        if self.store.local_copy is not None:
            self.store.local_copy.stop()
        if self._switch is not None and self._switch.thread is not None:
            self._switch.stop(keep=True)  # stopped, not abandoned: its table stays for a resume
        self.embedder.close()
        if self.lease is not None:
            self.lease.release()

    # --- folders -----------------------------------------------------------------------

    def folders(self, registry: FolderRegistry | None = None) -> list[Folder]:
        """The registered folders (or those `registry`, a caller's view, holds) with their counts."""
        return folder_views((registry or self.registry).all(), self.store)

    def add_folder(
        self,
        path: str | None,
        name: str | None = None,
        allow_outside_root: bool = False,
        url: str | None = None,
        branch: str | None = None,
    ) -> Folder:
        """A directory by its path, or a git repository by its URL (cloned into the data dir now,
        so a wrong URL or missing credentials fail here rather than at the first run)."""
        if url is not None:
            added = self.registry.add_repository(url, branch, name, self.settings.repos_dir)
        elif path is not None:
            added = self.registry.add(path, name, allow_outside_root)
        else:
            raise FolderError("send a folder's path or a repository's URL")
        return Folder(name=added.name, path=added.path, url=added.url, branch=added.branch)

    def sync_folder(self, name: str) -> Synced:
        """Brings a repository folder's clone to its branch's newest commit (before an index run)."""
        folder = self.registry.get(name)
        if folder.url is None:
            raise FolderError(f"{name!r} is a folder on disk, not a repository added by URL; nothing to fetch")
        path = Path(folder.path)
        if not path.is_dir():  # removed by hand, or a replica that never had it: clone again
            after = repositories.clone(folder.url, folder.branch, path)
            return Synced(folder=name, url=folder.url, before="", after=after)
        before, after = repositories.update(folder.url, folder.branch, path)
        return Synced(folder=name, url=folder.url, before=before, after=after)

    def remove_folder(self, name: str, keep_index: bool = False) -> Folder:
        removed = self.registry.remove(name)
        if not keep_index:
            self.store.drop_folder(removed.name)
        repos = os.path.realpath(self.settings.repos_dir)
        if removed.url is not None and inside(os.path.realpath(removed.path), repos):
            shutil.rmtree(removed.path, ignore_errors=True)  # the clone is semsearch's own copy
        return Folder(name=removed.name, path=removed.path, url=removed.url, branch=removed.branch)

    # --- what an indexer writes through (the REST client's methods of the same names) ----

    def manifest(self, folder: str) -> Manifest:
        name = self.registry.get(folder).name
        return Manifest(folder=name, files=self.store.manifest(name))

    def take_lease(self, folder: str, holder: str) -> Lease:
        return self.leases.acquire(self.registry.get(folder).name, holder)

    def release_lease(self, folder: str, lease_id: str) -> None:
        self.leases.release(self.registry.get(folder).name, lease_id)

    def apply(self, folder: str, batch: IndexBatch) -> IndexBatchResult:
        name = self.registry.get(folder).name
        self.leases.check(name, batch.lease)
        if batch.model_id != self.store.model_id and batch.model_id == self.store.meta.get("switched_from"):
            batch = self._reembedded(batch)
        written = self.store.apply(name, batch)
        return IndexBatchResult(
            upserted=len(batch.upserts), touched=len(batch.touches), deleted=len(batch.deletes), chunks_written=written
        )

    def _reembedded(self, batch: IndexBatch) -> IndexBatch:
        """A batch from an indexer still pointed at the model the index was switched from: its
        chunks embedded here by the new one, so nothing written after a switch is lost or mixed."""
        info = self.embedder.info()
        self.store.notice = (
            f"the index was switched to {info.model_id}, but indexers still embed with "
            f"{batch.model_id}: the API embeds their chunks again; point them at {self.embedder.address} "
            "(SEMSEARCH_EMBEDDER_ADDR, or SEMSEARCH_MODEL where the model runs in process)"
        )
        identity = {"model_id": info.model_id, "dimension": info.dimension}
        if batch.without_vectors:  # nothing embedded yet: the same files come again, embedded here then
            return batch.model_copy(update=identity)
        upserts = []
        for f in batch.upserts:
            texts = [embedded(c.context, c.text) for c in f.chunks]
            vectors = self.embedder.embed(texts) if texts else np.empty((0, info.dimension), np.float32)
            names = [name for c in f.chunks for name in c.names] if f.name_vectors else []
            named = self.embedder.embed(names) if names else np.empty((0, info.dimension), np.float32)
            # The fields hold the decoded bytes once validated; model_copy does not validate again.
            update = {"vectors": vectors.astype("<f4").tobytes(), "name_vectors": named.astype("<f4").tobytes()}
            upserts.append(f.model_copy(update=update))
        return batch.model_copy(update={"upserts": upserts, **identity})

    # --- a switch to another model ------------------------------------------------------

    def switch_model(self, target: Embedder, where: str, wait: bool = True) -> ModelSwitch:
        """Re-embeds the index with `target`'s model beside the old vectors, then swaps both the
        table and the query embedder at once (engine/switch.py). `wait`: return when done (the
        library, the CLI in process); else run in a thread and return its state at once (the API).
        The same switch started again after a stop resumes it."""
        with self._switching:
            if self._switch is not None and self._switch.running():
                raise SwitchBusy(
                    f"a switch to {self._switch.state.to_model or self._switch.where} is under way; "
                    "wait for it (GET /v1/model/switch) or cancel it"
                )
            job = SwitchJob(self.store, self.settings, target, where, self._use)
            job.begin()
            self._switch = job
            if not wait:
                self._switch.start()
                return self._switch.state.model_copy()
        return self._switch.run()

    def _use(self, embedder: Embedder) -> None:
        old, self.embedder, self.searcher.embedder = self.embedder, embedder, embedder
        if old is not embedder:
            old.close()

    def model_switch(self) -> ModelSwitch:
        """The switch under way or last run by this process, else one a stopped process left."""
        job = self._switch
        if job is not None and (job.running() or self.store.meta.get("switch") is None):
            return job.state.model_copy()
        recorded = paused(self.store)
        if recorded is not None and job is not None and job.state.state == "failed":
            recorded.error = job.state.error
        return recorded or ModelSwitch(state="none")

    def cancel_switch(self) -> ModelSwitch:
        """Stops a switch and drops what it built; the index goes on with its model."""
        job = self._switch
        if job is not None and job.running():
            job.stop(keep=False)
            return job.state.model_copy()
        recorded = paused(self.store)
        self.store.switch_abandon()
        if recorded is None:
            return ModelSwitch(state="none")
        return recorded.model_copy(update={"state": "cancelled"})

    def report_skipped(self, folder: str, lease: str | None, skipped_by: dict[str, int]) -> None:
        name = self.registry.get(folder).name
        self.leases.check(name, lease)
        self.store.record_skipped(name, skipped_by)

    def optimize(self) -> Optimized:
        return Optimized.model_validate(self.store.optimize(self.settings.ann_min_rows))

    def calibration(self, pairs: int = 500, folders: list[str] | None = None) -> Calibration:
        """Cosine of random chunk pairs (of `folders` only, when given): its p99 is a floor for `minScore`."""
        vectors = self.store.sample_vectors(2 * pairs, folders=folders)
        min_score = self.settings.min_score
        if len(vectors) < 4:
            return Calibration(pairs=0, p99=None, suggested_min_score=None, min_score=min_score)
        half = len(vectors) // 2
        cosines = (vectors[:half] * vectors[half : 2 * half]).sum(axis=1)
        p99 = float(np.percentile(cosines, 99))
        return Calibration(
            pairs=half, p99=round(p99, 4), suggested_min_score=math.ceil(p99 * 20) / 20, min_score=min_score
        )

    def status(self, registry: FolderRegistry | None = None, every_folder: bool = True) -> Status:
        """Model, embedder, folders (those `registry` holds), totals; the index's size and place
        only for `every_folder` (a caller that sees every folder)."""
        embedder = self.embedder
        try:
            info = embedder.info()
            emb = EmbedderStatus(
                address=embedder.address,
                ready=True,
                model_id=info.model_id,
                dimension=info.dimension,
                max_sequence_length=info.max_sequence_length,
                quantisation=info.quantisation,
                cpu=info.cpu or None,
            )
        except EmbedderError as exc:
            emb = EmbedderStatus(address=embedder.address, ready=False, error=str(exc))
        views = self.folders(registry)
        store, settings = self.store, self.settings
        return Status(
            version=__version__,
            role=settings.role,
            notice=store.notice,
            data_dir=str(settings.data_dir) if every_folder else None,
            index_bytes=store.disk_bytes() if every_folder else None,
            embedder=emb,
            folders=views,
            files=sum(f.files for f in views),
            chunks=sum(f.chunks for f in views),
            vector_index=store.ann_kind or "flat",
            full_text_index=store.fts_ready,
            in_memory=held[0] if (held := store.in_memory()) else None,
            in_memory_bytes=held[1] if held else None,
            local_copy=local_copy_status(store) if every_folder else None,
            snapshot=store.meta.get("snapshot"),
            model_switch=switch if every_folder and (switch := self.model_switch()).state != "none" else None,
            workers=self.runs.workers() if settings.role != "query" else [],
        )

    # --- answers ---------------------------------------------------------------------------

    def search(self, request: SearchRequest, timings: Timings | None = None) -> SearchResponse:
        return self.searcher.search(request, timings)

    def gather(
        self, request: GatherRequest, registry: FolderRegistry | None = None, timings: Timings | None = None
    ) -> GatherResponse:
        """`registry`: the caller's view of the folders; context lines are read through it."""
        return gathering.gather(request, self.searcher, registry or self.registry, timings)


def local_copy_status(store: Store) -> LocalCopyStatus | None:
    state = store.local_copy_state()
    if state is None:
        return None
    return LocalCopyStatus(
        answering=state.serving and store.on_local_copy,
        files=state.files,
        bytes=state.bytes,
        synced_at=state.synced_at,
        error=state.error,
        store_bytes=state.store_bytes,
    )
