"""What the index and the embedder are: status, and the noise calibration."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from semsearch.api.auth import Read, authenticate
from semsearch.api.deps import (
    EngineDep,
    FoldersDep,
)
from semsearch.schemas import (
    Calibration,
    Status,
)

router = APIRouter(prefix="/v1", tags=["status"], dependencies=[Depends(authenticate)])


@router.get("/calibration")
def calibration(engine: EngineDep, principal: Read, pairs: Annotated[int, Query(ge=10, le=5000)] = 500) -> Calibration:
    """Cosine of random chunk pairs from your own index (a folder-limited token: its folders'): its
    p99 is a floor for `minScore`."""
    return engine.calibration(pairs, sorted(principal.folders) if principal.folders is not None else None)


@router.get("/status")
def get_status(engine: EngineDep, folders: FoldersDep, principal: Read) -> Status:
    """Model, embedder, folders, totals and index size (the index's size and place: tokens that
    cover every folder)."""
    return engine.status(folders, every_folder=principal.folders is None)
