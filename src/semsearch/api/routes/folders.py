"""The registered folders, and what an indexer writes into one (manifest, lease, batches, skipped).

A route that names a folder first looks it up in the caller's view (`FoldersDep`): a folder the
caller's token does not cover does not exist for it. Then the engine does the work."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, status

from semsearch.api.auth import authenticate
from semsearch.api.deps import (
    ADMIN,
    READ,
    WRITE,
    EngineDep,
    FoldersDep,
)
from semsearch.schemas import (
    Folder,
    FolderIn,
    IndexBatch,
    IndexBatchResult,
    Lease,
    LeaseIn,
    Manifest,
    SkippedIn,
    Synced,
)

router = APIRouter(prefix="/v1", tags=["folders"], dependencies=[Depends(authenticate)])


@router.get("/folders", dependencies=[READ])
def list_folders(folders: FoldersDep, engine: EngineDep) -> list[Folder]:
    """The registered folders with their file and chunk counts."""
    return engine.folders(folders)


@router.post("/folders", status_code=status.HTTP_201_CREATED, dependencies=[ADMIN])
def add_folder(body: FolderIn, engine: EngineDep) -> Folder:
    """Register a directory (absolute path as the API sees it), or a git repository by URL (cloned
    now into the data directory, fetched before each index run). Run an index afterwards."""
    return engine.add_folder(body.path, body.name, body.allow_outside_root, body.url, body.branch)


@router.post("/folders/{name}/sync", dependencies=[WRITE])
def sync_folder(name: str, folders: FoldersDep, engine: EngineDep) -> Synced:
    """Bring a repository folder's clone to its branch's newest commit (the indexer calls this
    before each run of that folder)."""
    return engine.sync_folder(folders.get(name).name)


@router.delete("/folders/{name}", dependencies=[ADMIN])
def remove_folder(
    name: str,
    engine: EngineDep,
    keep_index: Annotated[bool, Query(alias="keep_index")] = False,
) -> Folder:
    """Unregister a folder; its chunks are purged unless `keep_index=true`."""
    return engine.remove_folder(name, keep_index)


@router.get("/folders/{name}/manifest", dependencies=[WRITE])
def manifest(name: str, folders: FoldersDep, engine: EngineDep) -> Manifest:
    """What is indexed under a folder, with mtime and sha256, so the indexer can skip unchanged files."""
    return engine.manifest(folders.get(name).name)


@router.post("/folders/{name}/lease", status_code=status.HTTP_201_CREATED, dependencies=[WRITE])
def take_lease(name: str, body: LeaseIn, folders: FoldersDep, engine: EngineDep) -> Lease:
    """Become the folder's only writer until released (or `lease_ttl_s` without a write)."""
    return engine.take_lease(folders.get(name).name, body.holder)


@router.delete("/folders/{name}/lease/{lease_id}", status_code=status.HTTP_204_NO_CONTENT, dependencies=[WRITE])
def release_lease(name: str, lease_id: str, folders: FoldersDep, engine: EngineDep) -> None:
    engine.release_lease(folders.get(name).name, lease_id)


@router.post("/folders/{name}/batches", dependencies=[WRITE])
def apply_batch(name: str, batch: IndexBatch, folders: FoldersDep, engine: EngineDep) -> IndexBatchResult:
    """Apply indexer changes: replace each upserted file's chunks atomically, touch, delete."""
    return engine.apply(folders.get(name).name, batch)


@router.put("/folders/{name}/skipped", status_code=status.HTTP_204_NO_CONTENT, dependencies=[WRITE])
def record_skipped(name: str, body: SkippedIn, folders: FoldersDep, engine: EngineDep) -> None:
    """What a full pass over the folder left out, by rule: the indexer reports it, coverage notes show it."""
    engine.report_skipped(folders.get(name).name, body.lease, body.skipped_by)
