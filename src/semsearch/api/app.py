"""The FastAPI application: wiring of settings, store, embedder client and routes."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline

from semsearch import __version__
from semsearch.api import errors, routes, webui
from semsearch.api.audit import Audit
from semsearch.api.auth import Limits, TokenBook
from semsearch.api.middleware import BodyLimit, HostGuard, PagePolicy
from semsearch.config import Settings
from semsearch.corpus.folders import FolderRegistry
from semsearch.embedder.client import EmbedderClient
from semsearch.engine import snapshots
from semsearch.engine.location import IndexLocation
from semsearch.engine.retrieval import SearchEngine
from semsearch.engine.runs import Leases, Runs
from semsearch.engine.store import Store
from semsearch.engine.writer import WriterLease


def create_app(settings: Settings | None = None, lease: WriterLease | None = None) -> FastAPI:
    """`lease`: the writer lease over a shared index, taken before the app starts (api/__main__.py)."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.settings = settings
        recovered = snapshots.recover(settings)
        if recovered:
            logging.getLogger("semsearch.api").warning(recovered)
        location = IndexLocation.from_settings(settings)
        consistency = timedelta(seconds=settings.read_consistency_s)
        replica = settings.role == "query"
        app.state.store = Store(
            location,
            timedelta(seconds=settings.version_retention_s),
            settings.housekeeping_every_writes,
            read_consistency=consistency if replica else None,
        )
        # With the index on object storage the folder list and the run queue live beside it:
        # every API over that index (the writer, its query replicas) reads the same ones.
        app.state.folders = FolderRegistry(
            settings.folders_file,
            settings.corpus_root,
            [settings.data_dir, settings.model_cache_dir],
            shared=location if location.local is None else None,
            refresh_s=settings.read_consistency_s if replica else 0.0,
        )
        app.state.tokens = TokenBook(
            settings.tokens_path, settings.token, settings.token_rate_per_s, settings.token_long_polls
        )
        app.state.limits = Limits(heavy_per_caller=settings.token_heavy_reads, heavy_total=settings.heavy_reads)
        app.state.leases = Leases(settings.lease_ttl_s)
        app.state.runs = Runs(
            silence=timedelta(seconds=settings.run_silence_s),
            shared=location if location.local is None else None,
            refresh_s=settings.read_consistency_s if replica else 0.0,
        )
        app.state.embedder = EmbedderClient(settings.embedder_target, timeout=settings.embedder_timeout_s)
        app.state.engine = SearchEngine(app.state.store, app.state.embedder, app.state.folders, settings)
        app.state.lease = lease
        yield
        app.state.embedder.close()
        if lease is not None:
            lease.release()

    # /docs and /redoc with Swagger UI's and ReDoc's files from inside the installed package
    # (fastapi-offline): the servers this runs on are often offline, where a CDN is a blank page.
    app = FastAPIOffline(
        static_url="/docs-assets",
        title="semsearch",
        version=__version__,
        summary="Self-hosted retrieval over folders of code and documents: chunks, never answers.",
        lifespan=lifespan,
        # A redirect would build its Location from the request's Host header.
        redirect_slashes=False,
    )
    errors.install(app)

    app.add_middleware(PagePolicy)
    app.add_middleware(
        BodyLimit,
        limit=settings.max_body_bytes,
        batch_limit=settings.max_batch_body_bytes,
        snapshot_limit=settings.max_snapshot_bytes,
    )
    app.add_middleware(Audit, log=settings.audit_log, queries=settings.audit_queries)
    # Added last, so it runs first: a request for another host name is refused before anything else.
    app.add_middleware(
        HostGuard,
        bind_host=settings.host,
        allowed_hosts=settings.allowed_hosts,
        allowed_origins=settings.allowed_origins,
    )

    app.include_router(routes.health)
    app.include_router(routes.v1)
    app.include_router(webui.router)
    return app
