"""The FastAPI application: the engine (with the gRPC embedder client), tokens, guards and routes."""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline

from semsearch.api import errors, routes, webui
from semsearch.api.audit import Audit
from semsearch.api.auth import TOKENS_NAME, Limits, TokenBook
from semsearch.api.middleware import BodyLimit, HostGuard, PagePolicy
from semsearch.config import Settings
from semsearch.embedder.client import EmbedderClient
from semsearch.embedder.interface import Embedder
from semsearch.engine.core import Engine
from semsearch.engine.writer import WriterLease
from semsearch.shared import SharedDocument
from semsearch.version import __version__


def create_app(
    settings: Settings | None = None, lease: WriterLease | None = None, embedder: Embedder | None = None
) -> FastAPI:
    """`lease`: the writer lease over a shared index, taken before the app starts (api/__main__.py).
    `embedder`: the model in this process (`mcp --standalone`); by default the gRPC embedder service."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        model = embedder or EmbedderClient(settings.embedder_target, timeout=settings.embedder_timeout_s)
        app.state.engine = Engine(settings, model, lease)
        app.state.settings = settings  # auth reads it before any route's dependencies run
        engine: Engine = app.state.engine
        beside = engine.shared if settings.tokens_file is None else None
        app.state.tokens = TokenBook(
            settings.tokens_path,
            settings.token,
            settings.token_rate_per_s,
            settings.token_long_polls,
            shared=SharedDocument(beside, TOKENS_NAME, engine.shared_refresh_s) if beside is not None else None,
        )
        app.state.limits = Limits(heavy_per_caller=settings.token_heavy_reads, heavy_total=settings.heavy_reads)
        app.state.lease = lease
        _resume_switch(engine, settings)
        yield
        app.state.engine.close()

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
    # Set when the server begins to shut down: long polls (a worker's claim) end at once instead of
    # holding the shutdown until they time out.
    app.state.draining = threading.Event()

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

    for router in routes.ROUTERS:
        app.include_router(router)
    app.include_router(webui.router)
    return app


def _resume_switch(engine: Engine, settings: Settings) -> None:
    """A model switch this API was running when it stopped goes on from where it was; one a
    library's process ran (its model in that process) waits for that process."""
    record = engine.store.meta.get("switch")
    if record is None or record.get("address") in (None, "in-process") or settings.role == "query":
        return
    target = EmbedderClient(record["address"], timeout=settings.embedder_timeout_s)
    try:
        engine.switch_model(target, record["target"], wait=False)
    except Exception as exc:  # the old model answers on; status shows the switch paused
        target.close()
        logging.getLogger("semsearch.api").warning("the model switch to %s did not resume: %s", record["target"], exc)
