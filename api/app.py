"""The FastAPI application: wiring of settings, store, embedder client and routes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

from fastapi import FastAPI, HTTPException
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api import errors, routes
from api.folders import FolderRegistry
from api.runs import Leases, Runs
from api.store import Store
from embedder.client import EmbedderClient
from semsearch import __version__
from semsearch.config import Settings


class BodyLimit:
    """Pure ASGI (not BaseHTTPMiddleware, which hides client disconnects from long polls):
    refuses bodies over the limit, by header and while streaming."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length", b"")
        if length.isdigit() and int(length) > self.limit:
            detail = f"body of {int(length)} bytes exceeds the limit of {self.limit}"
            await errors.problem(413, "Request too large", detail)(scope, receive, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise HTTPException(413, f"body exceeds the limit of {self.limit} bytes")
            return message

        await self.app(scope, limited, send)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.settings = settings
        app.state.store = Store(
            settings.index_dir, timedelta(seconds=settings.version_retention_s), settings.housekeeping_every_writes
        )
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

    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)

    app.include_router(routes.health)
    app.include_router(routes.v1)

    @app.get("/", include_in_schema=False)
    def root() -> JSONResponse:
        return JSONResponse({"service": "semsearch", "version": __version__, "docs": "/docs"})

    return app
