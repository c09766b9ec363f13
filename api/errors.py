"""Every error leaves the API as RFC 9457 problem details with a message a person can act on."""

from __future__ import annotations

import errno

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from api.files import Refused
from api.folders import FolderError
from api.grep import BadPattern
from api.runs import LeaseConflict, RunNotFound
from api.store import InvalidBatch, ModelMismatch
from embedder.client import EmbedderError

PROBLEM = "application/problem+json"


def problem(status: int, title: str, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(
        {"type": "about:blank", "title": title, "status": status, "detail": detail},
        status_code=status,
        media_type=PROBLEM,
        headers=headers,
    )


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

    @app.exception_handler(FolderError)
    async def folder_error(request: Request, exc: FolderError) -> JSONResponse:
        return problem(404 if "no folder" in str(exc) or "not a registered" in str(exc) else 400, "Folder", str(exc))

    @app.exception_handler(ModelMismatch)
    async def model_mismatch(request: Request, exc: ModelMismatch) -> JSONResponse:
        return problem(409, "Model mismatch", str(exc))

    @app.exception_handler(LeaseConflict)
    async def lease_conflict(request: Request, exc: LeaseConflict) -> JSONResponse:
        return problem(409, "Folder busy", str(exc))

    @app.exception_handler(RunNotFound)
    async def run_not_found(request: Request, exc: RunNotFound) -> JSONResponse:
        return problem(404, "Not found", str(exc.args[0]))

    @app.exception_handler(Refused)
    async def refused(request: Request, exc: Refused) -> JSONResponse:
        return problem(403, "Refused", str(exc))

    @app.exception_handler(BadPattern)
    async def bad_pattern(request: Request, exc: BadPattern) -> JSONResponse:
        return problem(400, "Invalid pattern", str(exc))

    @app.exception_handler(InvalidBatch)
    async def invalid_batch(request: Request, exc: InvalidBatch) -> JSONResponse:
        return problem(400, "Invalid batch", str(exc))

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

    @app.exception_handler(EmbedderError)
    async def embedder_down(request: Request, exc: EmbedderError) -> JSONResponse:
        return problem(503, "Embedder unavailable", str(exc))


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
    return {400: "Bad request", 401: "Unauthorized", 404: "Not found", 409: "Conflict", 413: "Request too large"}.get(
        status, "Error"
    )
