"""Index runs: asked for here, claimed and reported on by indexer workers, followed by whoever asked."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request, status
from fastapi.responses import Response

from semsearch.api.auth import Principal, Read, Worker, Write, authenticate
from semsearch.api.deps import (
    FoldersDep,
    RunsDep,
)
from semsearch.engine.runs import RunNotFound
from semsearch.schemas import (
    FINISHED,
    ClaimIn,
    Run,
    RunFinish,
    RunProgress,
    RunRequest,
)

router = APIRouter(prefix="/v1", tags=["runs"], dependencies=[Depends(authenticate)])


@router.post("/runs", status_code=status.HTTP_202_ACCEPTED)
def request_run(body: RunRequest, request: Request, folders: FoldersDep, runs: RunsDep, principal: Write) -> Run:
    """Ask for an index run; an indexer worker (`semsearch serve`, compose) picks it up."""
    request.state.folder = body.folder
    if body.folder is not None:
        folders.get(body.folder)
    elif principal.folders is not None:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "this token is limited to folders: name the folder to index")
    return runs.request(body, principal.name)


@router.get("/runs")
def list_runs(runs: RunsDep, principal: Read) -> list[Run]:
    """Recent runs, newest first (a token limited to folders sees the runs of its folders)."""
    return [run for run in runs.recent() if principal.sees(run.request.folder)]


def _visible(run: Run, principal: Principal) -> Run:
    if not principal.sees(run.request.folder):
        raise RunNotFound(f"no run {run.id!r}; `semsearch index-status` lists the recent ones")
    return run


@router.get("/runs/{run_id}")
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


@router.delete("/runs/{run_id}")
def cancel_run(run_id: str, runs: RunsDep, principal: Write) -> Run:
    """Cancel a run: a queued one at once, a running one when its worker next reports progress."""
    _visible(runs.get(run_id), principal)
    return runs.cancel(run_id)


@router.post("/runs/claim", response_model=Run, responses={204: {"description": "Nothing queued."}})
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
            if time.monotonic() >= deadline or request.app.state.draining.is_set():  # shutting down: let go
                return Response(status_code=status.HTTP_204_NO_CONTENT)
            await asyncio.sleep(0.2)


@router.post("/runs/{run_id}/progress")
def run_progress(run_id: str, body: RunProgress, runs: RunsDep, _: Worker) -> Run:
    return runs.progress(run_id, body)


@router.post("/runs/{run_id}/finish")
def finish_run(run_id: str, body: RunFinish, runs: RunsDep, _: Worker) -> Run:
    return runs.finish(run_id, body)
