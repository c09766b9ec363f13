"""Search, gather and grep: the answers (gather and grep are heavy reads, capped per caller)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response

from semsearch.api.auth import Read, authenticate
from semsearch.api.deps import (
    EngineDep,
    FoldersDep,
    SettingsDep,
)
from semsearch.engine import grep
from semsearch.schemas import (
    GatherRequest,
    GatherResponse,
    GrepRequest,
    GrepResponse,
    SearchRequest,
    SearchResponse,
)
from semsearch.timing import HEADER, Timings

router = APIRouter(prefix="/v1", tags=["search"], dependencies=[Depends(authenticate)])


@router.post("/search")
def search(
    body: SearchRequest, request: Request, response: Response, engine: EngineDep, principal: Read
) -> SearchResponse:
    """Rank chunks for a query (hybrid vector + BM25, filters inside the query). Every interface calls this.
    The `Server-Timing` header says where the time went (embed, vector, lexical, fuse, …)."""
    request.state.query = body.query  # for the audit log, if SEMSEARCH_AUDIT_QUERIES asks for it
    timings = Timings()
    found = engine.search(body.model_copy(update={"folder": principal.limit(body.folder)}), timings)
    response.headers[HEADER] = timings.header()
    return found


@router.post("/gather")
def gather_(
    body: GatherRequest, request: Request, response: Response, engine: EngineDep, folders: FoldersDep, principal: Read
) -> GatherResponse:
    """Search, then pack the hits (with context lines) into one Markdown block for a context window.
    The `Server-Timing` header has search's stages and `pack`."""
    request.state.query = body.query
    timings = Timings()
    with request.app.state.limits.heavy(principal):
        gathered = engine.gather(body.model_copy(update={"folder": principal.limit(body.folder)}), folders, timings)
    response.headers[HEADER] = timings.header()
    return gathered


@router.post("/grep")
def grep_(
    body: GrepRequest, request: Request, folders: FoldersDep, settings: SettingsDep, principal: Read
) -> GrepResponse:
    """Find a literal (or RE2 regex) in the indexed files — never in ignored ones."""
    with request.app.state.limits.heavy(principal):
        return grep.grep(body.model_copy(update={"folder": principal.limit(body.folder)}), folders, settings)
