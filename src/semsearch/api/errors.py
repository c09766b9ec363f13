"""Every error leaves the API as RFC 9457 problem details with a message a person can act on."""

from __future__ import annotations

import errno

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from semsearch.api.auth import TokenError
from semsearch.corpus.files import Refused
from semsearch.corpus.folders import FolderError, FolderNotFound
from semsearch.corpus.repositories import RepositoryError, RepositoryUnavailable
from semsearch.embedder.client import EmbedderError
from semsearch.engine.filters import BadGlob
from semsearch.engine.grep import BadPattern
from semsearch.engine.location import StoreUnavailable
from semsearch.engine.runs import LeaseConflict, QueueFull, RunCancelled, RunNotFound
from semsearch.engine.snapshots import SnapshotRefused
from semsearch.engine.store import InvalidBatch, ModelMismatch
from semsearch.engine.switch import SwitchBusy, SwitchRefused

PROBLEM = "application/problem+json"


def problem(status: int, title: str, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(
        {"type": "about:blank", "title": title, "status": status, "detail": detail},
        status_code=status,
        media_type=PROBLEM,
        headers=headers,
    )


# Errors our modules raise on purpose, with the status and title they map to. Their
# messages are written for people already, so the detail is the message.
DOMAIN_ERRORS: dict[type[Exception], tuple[int, str]] = {
    ModelMismatch: (409, "Model mismatch"),
    SwitchBusy: (409, "Switch under way"),
    SwitchRefused: (400, "Switch refused"),
    SnapshotRefused: (400, "Snapshot refused"),
    TokenError: (400, "Token refused"),
    LeaseConflict: (409, "Folder busy"),
    RunNotFound: (404, "Not found"),
    RunCancelled: (409, "Run cancelled"),
    QueueFull: (429, "Too many queued runs"),
    FolderNotFound: (404, "No such folder"),
    FolderError: (400, "Folder refused"),
    RepositoryUnavailable: (502, "Repository unavailable"),
    RepositoryError: (400, "Repository refused"),
    Refused: (403, "Refused"),
    BadPattern: (400, "Invalid pattern"),
    BadGlob: (400, "Invalid glob"),
    InvalidBatch: (400, "Invalid batch"),
    EmbedderError: (503, "Embedder unavailable"),
    StoreUnavailable: (503, "Index store unavailable"),
}


def _domain_handler(status: int, title: str):  # type: ignore[no-untyped-def]
    async def handle(request: Request, exc: Exception) -> JSONResponse:
        return problem(status, title, str(exc.args[0]) if exc.args else str(exc))

    return handle


def install(app: FastAPI) -> None:
    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        return problem(exc.status_code, _title(exc.status_code), str(exc.detail), dict(exc.headers or {}))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        parts = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"] if p != "body")
            parts.append(f"{where}: {err['msg']}" if where else err["msg"])
        return problem(422, "Invalid request", "; ".join(parts))

    for exc_type, (status, title) in DOMAIN_ERRORS.items():
        app.add_exception_handler(exc_type, _domain_handler(status, title))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        if is_disk_full(exc):
            return problem(
                507,
                "Disk full",
                "disk full: the data volume has no space left, so nothing was written (searches keep "
                "working on what was committed); free some space and run `semsearch index` again",
            )
        return problem(500, "Internal error", f"{type(exc).__name__}: {exc}; details are in the API log")


def is_disk_full(exc: BaseException) -> bool:
    """ENOSPC, however the storage layer wraps it (LanceDB reports it as text)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno == errno.ENOSPC:
            return True
        if "No space left on device" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _title(status: int) -> str:
    return {
        400: "Bad request",
        401: "Unauthorized",
        403: "Forbidden",
        404: "Not found",
        409: "Conflict",
        413: "Request too large",
        503: "Unavailable",
    }.get(  # fmt: skip
        status, "Error"
    )
