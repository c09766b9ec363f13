"""The REST adapter's routes, one module per resource, each a thin layer over the engine.

`health` answers without a token; every `/v1` router authenticates (and each route states its
scope). Each router carries the full `/v1` prefix itself, so a route's path is the one the
audit log and the scope test read. Endpoints are plain `def` where they block (LanceDB, gRPC):
FastAPI runs them in its thread pool.
"""

from __future__ import annotations

from fastapi import APIRouter

from semsearch.api.routes import folders, health, index, model, reads, runs, search, status, tokens

ROUTERS: list[APIRouter] = [
    health.router,
    *(part.router for part in (folders, runs, search, reads, index, model, tokens, status)),
]
