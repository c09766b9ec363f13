"""The FastAPI application: wiring of settings, store, embedder client and routes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from api import errors, routes
from api.folders import FolderRegistry
from api.runs import Leases, Runs
from api.store import Store
from embedder.client import EmbedderClient
from semsearch import __version__
from semsearch.config import Settings


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.settings = settings
        app.state.store = Store(settings.index_dir)
        app.state.folders = FolderRegistry(settings.folders_file)
        app.state.leases = Leases(settings.lease_ttl_s)
        app.state.runs = Runs()
        app.state.embedder = EmbedderClient(settings.embedder_target, timeout=settings.embedder_timeout_s)
        yield
        app.state.embedder.close()

    app = FastAPI(
        title="semsearch",
        version=__version__,
        summary="Self-hosted retrieval over folders of code and documents: chunks, never answers.",
        lifespan=lifespan,
    )
    errors.install(app)

    @app.middleware("http")
    async def limit_body(request: Request, call_next):  # type: ignore[no-untyped-def]
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > settings.max_body_bytes:
            return errors.problem(
                413, "Request too large", f"body of {length} bytes exceeds the limit of {settings.max_body_bytes}"
            )
        return await call_next(request)

    app.include_router(routes.health)
    app.include_router(routes.v1)

    @app.get("/", include_in_schema=False)
    def root() -> JSONResponse:
        return JSONResponse({"service": "semsearch", "version": __version__, "docs": "/docs"})

    return app
