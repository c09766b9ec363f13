"""Search, gather and grep: the answers (gather and grep are heavy reads, capped per caller)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

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

router = APIRouter(prefix="/v1", tags=["search"], dependencies=[Depends(authenticate)])


@router.post("/search")
def search(body: SearchRequest, request: Request, engine: EngineDep, principal: Read) -> SearchResponse:
    """Rank chunks for a query (hybrid vector + BM25, filters inside the query). Every interface calls this."""
    request.state.query = body.query  # for the audit log, if SEMSEARCH_AUDIT_QUERIES asks for it
    return engine.search(body.model_copy(update={"folder": principal.limit(body.folder)}))


@router.post("/gather")
def gather_(
    body: GatherRequest, request: Request, engine: EngineDep, folders: FoldersDep, principal: Read
) -> GatherResponse:
    """Search, then pack the hits (with context lines) into one Markdown block for a context window."""
    request.state.query = body.query
    with request.app.state.limits.heavy(principal):
        return engine.gather(body.model_copy(update={"folder": principal.limit(body.folder)}), folders)


@router.post("/grep")
def grep_(
    body: GrepRequest, request: Request, folders: FoldersDep, settings: SettingsDep, principal: Read
) -> GrepResponse:
    """Find a literal (or RE2 regex) in the indexed files — never in ignored ones."""
    with request.app.state.limits.heavy(principal):
        return grep.grep(body.model_copy(update={"folder": principal.limit(body.folder)}), folders, settings)
