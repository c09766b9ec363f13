"""The index as a whole: optimize, reset, and snapshots (export and import)."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Annotated

import anyio
from fastapi import APIRouter, Depends, HTTPException, Query, Request, status
from fastapi.responses import FileResponse
from starlette.background import BackgroundTask

from semsearch.api.auth import authenticate, needs
from semsearch.api.deps import (
    ADMIN,
    EmbedderDep,
    EngineDep,
    FoldersDep,
    LeasesDep,
    SettingsDep,
    StoreDep,
)
from semsearch.engine import snapshots
from semsearch.limits import MAX_FILTER_ITEMS
from semsearch.schemas import (
    Optimized,
    ResetIn,
    SnapshotImported,
)

router = APIRouter(prefix="/v1", tags=["index"], dependencies=[Depends(authenticate)])


@router.post("/index/optimize", dependencies=[Depends(needs("write", every_folder=True))])
def optimize(engine: EngineDep) -> Optimized:
    """Bring the full-text (and ANN) index up to date, compact, drop old versions. Indexers call it after a run."""
    return engine.optimize()


@router.post("/index/reset", dependencies=[ADMIN])
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


@router.get(
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


@router.put("/snapshot", openapi_extra=SNAPSHOT_BODY, dependencies=[ADMIN])
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
