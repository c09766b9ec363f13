"""HTTP endpoints. Thin: validation is in the schemas, behaviour in store/retrieval/folders.

Endpoints are plain `def`: FastAPI runs them in its thread pool, which suits the
blocking LanceDB and gRPC calls they make.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Annotated

import anyio
from fastapi import APIRouter, Depends, HTTPException, Query, Request, status
from fastapi.responses import FileResponse, JSONResponse, Response
from starlette.background import BackgroundTask

from semsearch.api.auth import Principal, Read, TokenBook, Worker, Write, authenticate, needs
from semsearch.api.deps import (
    get_embedder,
    get_engine,
    get_folders,
    get_leases,
    get_runs,
    get_settings,
    get_store,
    get_tokens,
)
from semsearch.config import Settings
from semsearch.corpus import files
from semsearch.corpus.folders import FolderRegistry
from semsearch.embedder.client import EmbedderError
from semsearch.embedder.interface import Embedder
from semsearch.engine import explain, grep, snapshots, symbols
from semsearch.engine.core import Engine
from semsearch.engine.runs import Leases, RunNotFound, Runs
from semsearch.engine.store import Store
from semsearch.limits import MAX_CAT_LINES, MAX_FILTER_ITEMS, MAX_SYMBOL_RESULTS
from semsearch.schemas import (
    FINISHED,
    Calibration,
    ClaimIn,
    Explained,
    FileContent,
    Folder,
    FolderIn,
    GatherRequest,
    GatherResponse,
    GrepRequest,
    GrepResponse,
    IndexBatch,
    IndexBatchResult,
    Lease,
    LeaseIn,
    Manifest,
    Optimized,
    Outline,
    ResetIn,
    Run,
    RunFinish,
    RunProgress,
    RunRequest,
    SearchRequest,
    SearchResponse,
    SkippedIn,
    SnapshotImported,
    Status,
    Symbols,
    TokenCreated,
    TokenIn,
    TokenView,
)

StoreDep = Annotated[Store, Depends(get_store)]
FoldersDep = Annotated[FolderRegistry, Depends(get_folders)]
EmbedderDep = Annotated[Embedder, Depends(get_embedder)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
LeasesDep = Annotated[Leases, Depends(get_leases)]
RunsDep = Annotated[Runs, Depends(get_runs)]
EngineDep = Annotated[Engine, Depends(get_engine)]
TokensDep = Annotated[TokenBook, Depends(get_tokens)]

# Each route states the scope it needs (auth.py); a route without one would be admin-only by
# the OpenAPI-driven scope test, which fails on any endpoint it does not expect.
READ, WRITE, ADMIN = Depends(needs("read")), Depends(needs("write")), Depends(needs("admin"))


health = APIRouter(tags=["health"])
v1 = APIRouter(prefix="/v1", dependencies=[Depends(authenticate)])


@health.get("/healthz")
async def healthz() -> dict[str, str]:
    """Alive: the process answers. No auth, so orchestrators can probe it."""
    return {"status": "ok"}


@health.get("/readyz")
def readyz(
    store: StoreDep, embedder: EmbedderDep, principal: Annotated[Principal, Depends(authenticate)]
) -> JSONResponse:
    """Ready: the index is open and the embedder answers. Where the index lives is told only to a
    token that covers every folder."""
    try:
        info = embedder.info()
    except EmbedderError as exc:
        return JSONResponse({"status": "not ready", "embedder": str(exc)}, status_code=503)
    answer = {"status": "ready", "model": info.model_id}
    if principal.folders is None:
        answer["index"] = str(store.location)
    return JSONResponse(answer)


# A route that names a folder first looks it up in the caller's view (`folders`): a folder the
# caller's token does not cover does not exist for it. Then the engine does the work.


@v1.get("/folders", dependencies=[READ])
def list_folders(folders: FoldersDep, engine: EngineDep) -> list[Folder]:
    """The registered folders with their file and chunk counts."""
    return engine.folders(folders)


@v1.post("/folders", status_code=status.HTTP_201_CREATED, dependencies=[ADMIN])
def add_folder(body: FolderIn, engine: EngineDep) -> Folder:
    """Register a directory (absolute path as the API sees it). Run an index afterwards."""
    return engine.add_folder(body.path, body.name, body.allow_outside_root)


@v1.delete("/folders/{name}", dependencies=[ADMIN])
def remove_folder(
    name: str,
    engine: EngineDep,
    keep_index: Annotated[bool, Query(alias="keep_index")] = False,
) -> Folder:
    """Unregister a folder; its chunks are purged unless `keep_index=true`."""
    return engine.remove_folder(name, keep_index)


@v1.get("/folders/{name}/manifest", dependencies=[WRITE])
def manifest(name: str, folders: FoldersDep, engine: EngineDep) -> Manifest:
    """What is indexed under a folder, with mtime and sha256, so the indexer can skip unchanged files."""
    return engine.manifest(folders.get(name).name)


@v1.post("/folders/{name}/lease", status_code=status.HTTP_201_CREATED, dependencies=[WRITE])
def take_lease(name: str, body: LeaseIn, folders: FoldersDep, engine: EngineDep) -> Lease:
    """Become the folder's only writer until released (or `lease_ttl_s` without a write)."""
    return engine.take_lease(folders.get(name).name, body.holder)


@v1.delete("/folders/{name}/lease/{lease_id}", status_code=status.HTTP_204_NO_CONTENT, dependencies=[WRITE])
def release_lease(name: str, lease_id: str, folders: FoldersDep, engine: EngineDep) -> None:
    engine.release_lease(folders.get(name).name, lease_id)


@v1.post("/folders/{name}/batches", dependencies=[WRITE])
def apply_batch(name: str, batch: IndexBatch, folders: FoldersDep, engine: EngineDep) -> IndexBatchResult:
    """Apply indexer changes: replace each upserted file's chunks atomically, touch, delete."""
    return engine.apply(folders.get(name).name, batch)


@v1.put("/folders/{name}/skipped", status_code=status.HTTP_204_NO_CONTENT, dependencies=[WRITE])
def record_skipped(name: str, body: SkippedIn, folders: FoldersDep, engine: EngineDep) -> None:
    """What a full pass over the folder left out, by rule: the indexer reports it, coverage notes show it."""
    engine.report_skipped(folders.get(name).name, body.lease, body.skipped_by)


@v1.post("/runs", status_code=status.HTTP_202_ACCEPTED)
def request_run(body: RunRequest, request: Request, folders: FoldersDep, runs: RunsDep, principal: Write) -> Run:
    """Ask for an index run; an indexer worker (`semsearch serve`, compose) picks it up."""
    request.state.folder = body.folder
    if body.folder is not None:
        folders.get(body.folder)
    elif principal.folders is not None:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "this token is limited to folders: name the folder to index")
    return runs.request(body, principal.name)


@v1.get("/runs")
def list_runs(runs: RunsDep, principal: Read) -> list[Run]:
    """Recent runs, newest first (a token limited to folders sees the runs of its folders)."""
    return [run for run in runs.recent() if principal.sees(run.request.folder)]


def _visible(run: Run, principal: Principal) -> Run:
    if not principal.sees(run.request.folder):
        raise RunNotFound(f"no run {run.id!r}; `semsearch index-status` lists the recent ones")
    return run


@v1.get("/runs/{run_id}")
async def get_run(
    run_id: str,
    request: Request,
    runs: RunsDep,
    principal: Read,
    wait: Annotated[float, Query(ge=0, le=60, description="Seconds to wait for the end.")] = 0,
) -> Run:
    """A run's state, progress and summary; `?wait=N` waits up to N seconds for it to finish.

    Async, so a waiting client holds no worker thread: many long polls cannot starve the
    endpoints that need one."""
    deadline = time.monotonic() + wait
    run = _visible(runs.get(run_id), principal)
    if wait == 0 or run.state in FINISHED:
        return run
    with request.app.state.limits.long_poll(principal):
        while True:
            run = runs.get(run_id)
            if run.state in FINISHED or time.monotonic() >= deadline or await request.is_disconnected():
                return run
            await asyncio.sleep(min(0.2, max(0.0, deadline - time.monotonic())))


@v1.delete("/runs/{run_id}")
def cancel_run(run_id: str, runs: RunsDep, principal: Write) -> Run:
    """Cancel a run: a queued one at once, a running one when its worker next reports progress."""
    _visible(runs.get(run_id), principal)
    return runs.cancel(run_id)


@v1.post("/runs/claim", response_model=Run, responses={204: {"description": "Nothing queued."}})
async def claim_run(body: ClaimIn, request: Request, runs: RunsDep, principal: Worker) -> Run | Response:
    """For indexer workers: take the oldest queued run (long-polls `waitS` seconds).

    Async so it can notice a worker that went away while waiting: a run must never be
    handed to a connection nobody reads any more.
    """
    deadline = time.monotonic() + body.wait_s
    with request.app.state.limits.long_poll(principal):
        while True:
            if await request.is_disconnected():
                return Response(status_code=status.HTTP_204_NO_CONTENT)
            run = runs.try_claim(body.worker)
            if run is not None:
                return run
            if time.monotonic() >= deadline:
                return Response(status_code=status.HTTP_204_NO_CONTENT)
            await asyncio.sleep(0.2)


@v1.post("/runs/{run_id}/progress")
def run_progress(run_id: str, body: RunProgress, runs: RunsDep, _: Worker) -> Run:
    return runs.progress(run_id, body)


@v1.post("/runs/{run_id}/finish")
def finish_run(run_id: str, body: RunFinish, runs: RunsDep, _: Worker) -> Run:
    return runs.finish(run_id, body)


@v1.post("/search")
def search(body: SearchRequest, request: Request, engine: EngineDep, principal: Read) -> SearchResponse:
    """Rank chunks for a query (hybrid vector + BM25, filters inside the query). Every interface calls this."""
    request.state.query = body.query  # for the audit log, if SEMSEARCH_AUDIT_QUERIES asks for it
    return engine.search(body.model_copy(update={"folder": principal.limit(body.folder)}))


@v1.post("/gather")
def gather_(
    body: GatherRequest, request: Request, engine: EngineDep, folders: FoldersDep, principal: Read
) -> GatherResponse:
    """Search, then pack the hits (with context lines) into one Markdown block for a context window."""
    request.state.query = body.query
    with request.app.state.limits.heavy(principal):
        return engine.gather(body.model_copy(update={"folder": principal.limit(body.folder)}), folders)


@v1.get("/files", dependencies=[READ])
def read_file(
    folders: FoldersDep,
    settings: SettingsDep,
    path: Annotated[str, Query(max_length=4096, description="Absolute path, as in search results.")],
    start_line: Annotated[int, Query(ge=1, alias="startLine")] = 1,
    end_line: Annotated[int | None, Query(ge=1, alias="endLine")] = None,
) -> FileContent:
    """A file or a line range of it — only files inside the folders that the indexer would index."""
    if end_line is not None and end_line < start_line:
        raise HTTPException(status.HTTP_400_BAD_REQUEST, f"endLine {end_line} is before startLine {start_line}")
    opened = files.read(path, folders, settings)
    total = len(opened.lines)
    last = min(total, end_line or total, start_line + MAX_CAT_LINES - 1)
    return FileContent(
        file_path=opened.path,
        folder=opened.folder.name,
        rel_path=opened.rel_path,
        start_line=start_line,
        end_line=max(start_line - 1, last),
        total_lines=total,
        text="\n".join(opened.lines[start_line - 1 : last]),
    )


@v1.get("/symbols")
def find_symbols(
    store: StoreDep,
    folders: FoldersDep,
    principal: Read,
    name: Annotated[str, Query(min_length=1, max_length=256, description="A name, or `Class.method`.")],
    kind: Annotated[list[str] | None, Query(max_length=32, description="function, method, class, …")] = None,
    folder: Annotated[list[str] | None, Query(max_length=32, description="Only these folders.")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_SYMBOL_RESULTS)] = 50,
) -> Symbols:
    """Where a function, class or method is defined: exact names first, then prefixes, substrings, near misses."""
    return symbols.find(store, folders, name, kind, principal.limit(folder), limit)


@v1.get("/outline", dependencies=[READ])
def file_outline(
    store: StoreDep,
    folders: FoldersDep,
    settings: SettingsDep,
    path: Annotated[str, Query(max_length=4096, description="Absolute path, as in search results.")],
) -> Outline:
    """A source file's definitions in order (name, kind, lines, signature) — confined like a read."""
    return symbols.outline(store, folders, settings, path)


@v1.get("/explain", dependencies=[READ])
def explain_path(
    folders: FoldersDep,
    store: StoreDep,
    settings: SettingsDep,
    path: Annotated[str, Query(max_length=4096, description="Absolute path, as the API sees it.")],
) -> Explained:
    """Why a path is, or is not, indexed: the rule that decided, its chunks, whether it is stale."""
    if "\x00" in path or not path.startswith("/"):
        raise HTTPException(status.HTTP_400_BAD_REQUEST, f"{path!r} is not an absolute path; send an absolute path")
    return explain.explain(path, folders, store, settings)


@v1.post("/grep")
def grep_(
    body: GrepRequest, request: Request, folders: FoldersDep, settings: SettingsDep, principal: Read
) -> GrepResponse:
    """Find a literal (or RE2 regex) in the indexed files — never in ignored ones."""
    with request.app.state.limits.heavy(principal):
        return grep.grep(body.model_copy(update={"folder": principal.limit(body.folder)}), folders, settings)


@v1.post("/index/optimize", dependencies=[Depends(needs("write", every_folder=True))])
def optimize(engine: EngineDep) -> Optimized:
    """Bring the full-text (and ANN) index up to date, compact, drop old versions. Indexers call it after a run."""
    return engine.optimize()


@v1.post("/index/reset", dependencies=[ADMIN])
def reset(body: ResetIn, store: StoreDep) -> dict[str, str]:
    """Drop every chunk and the recorded model (for `semsearch index --rebuild`)."""
    if not body.confirm:
        raise HTTPException(status.HTTP_400_BAD_REQUEST, 'send {"confirm": true} to drop the whole index')
    store.reset()
    return {"status": "reset"}


SNAPSHOT_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
        "description": "An archive from `GET /v1/snapshot` (`semsearch snapshot export`).",
    }
}


@v1.get(
    "/snapshot",
    response_class=FileResponse,
    responses={200: {"content": {"application/x-tar": {}}}},
    dependencies=[ADMIN],
)
def export_snapshot(
    store: StoreDep,
    folders: FoldersDep,
    settings: SettingsDep,
    folder: Annotated[list[str] | None, Query(max_length=MAX_FILTER_ITEMS)] = None,
    root: str | None = None,
) -> FileResponse:
    """One archive of these folders' index (all when none): rows, manifest with each file's sha256,
    folders relative to `root` (default: their common parent), model identity, a digest."""
    archive = snapshots.export(store, folders, settings, folder or [], root)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    return FileResponse(
        archive,
        media_type="application/x-tar",
        filename=f"semsearch-snapshot-{stamp}.tar",
        background=BackgroundTask(archive.unlink, missing_ok=True),
    )


@v1.put("/snapshot", openapi_extra=SNAPSHOT_BODY, dependencies=[ADMIN])
async def import_snapshot(
    request: Request,
    store: StoreDep,
    folders: FoldersDep,
    leases: LeasesDep,
    embedder: EmbedderDep,
    settings: SettingsDep,
    root: str | None = None,
    allow_outside_root: Annotated[bool, Query(alias="allowOutsideRoot")] = False,
) -> SnapshotImported:
    """Verify an archive and swap it in: its folders (re-rooted under `root`, default the root it
    was exported from) replace the folders of the same names; other folders are kept."""
    fd, name = tempfile.mkstemp(prefix=f"{snapshots.TEMPORARY}upload-", suffix=".tar", dir=settings.data_dir)
    upload = Path(name)
    try:
        with os.fdopen(fd, "wb") as out:  # streamed to disk: an archive is about the index's size
            async for block in request.stream():
                await anyio.to_thread.run_sync(out.write, block)
        return await anyio.to_thread.run_sync(
            lambda: snapshots.import_(upload, store, folders, leases, embedder, settings, root, allow_outside_root)
        )
    finally:
        upload.unlink(missing_ok=True)


@v1.get("/tokens", dependencies=[ADMIN])
def list_tokens(tokens: TokensDep) -> list[TokenView]:
    """The scoped tokens: names, scopes, folders (never a secret or its hash)."""
    return tokens.views()


@v1.post("/tokens", status_code=status.HTTP_201_CREATED, dependencies=[ADMIN])
def create_token(body: TokenIn, tokens: TokensDep, folders: FoldersDep) -> TokenCreated:
    """A new token; its secret is in this answer only (the file keeps its sha256)."""
    for name in body.folders or []:
        folders.get(name)
    view, secret = tokens.create(body.name, body.scope, body.folders, body.rate_per_s, body.long_polls)
    return TokenCreated(**view.model_dump(), secret=secret)


@v1.delete("/tokens/{name}", dependencies=[ADMIN])
def revoke_token(name: str, tokens: TokensDep) -> TokenView:
    """Revoke a token at once: the next request with it is refused."""
    return tokens.revoke(name)


@v1.get("/calibration")
def calibration(engine: EngineDep, principal: Read, pairs: Annotated[int, Query(ge=10, le=5000)] = 500) -> Calibration:
    """Cosine of random chunk pairs from your own index (a folder-limited token: its folders'): its
    p99 is a floor for `minScore`."""
    return engine.calibration(pairs, sorted(principal.folders) if principal.folders is not None else None)


@v1.get("/status")
def get_status(engine: EngineDep, folders: FoldersDep, principal: Read) -> Status:
    """Model, embedder, folders, totals and index size (the index's size and place: tokens that
    cover every folder)."""
    return engine.status(folders, every_folder=principal.folders is None)
