"""HTTP endpoints. Thin: validation is in the schemas, behaviour in store/retrieval/folders.

Endpoints are plain `def`: FastAPI runs them in its thread pool, which suits the
blocking LanceDB and gRPC calls they make.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, status
from fastapi.responses import JSONResponse

from api import retrieval
from api.auth import require_token
from api.folders import FolderRegistry
from api.store import Store
from embedder.client import EmbedderClient, EmbedderError
from semsearch import __version__
from semsearch.config import Settings
from semsearch.schemas import (
    EmbedderStatus,
    Folder,
    FolderIn,
    IndexBatch,
    IndexBatchResult,
    Manifest,
    SearchRequest,
    SearchResponse,
    Status,
)


def get_store(request: Request) -> Store:
    return request.app.state.store  # type: ignore[no-any-return]


def get_folders(request: Request) -> FolderRegistry:
    return request.app.state.folders  # type: ignore[no-any-return]


def get_embedder(request: Request) -> EmbedderClient:
    return request.app.state.embedder  # type: ignore[no-any-return]


def get_settings(request: Request) -> Settings:
    return request.app.state.settings  # type: ignore[no-any-return]


StoreDep = Annotated[Store, Depends(get_store)]
FoldersDep = Annotated[FolderRegistry, Depends(get_folders)]
EmbedderDep = Annotated[EmbedderClient, Depends(get_embedder)]
SettingsDep = Annotated[Settings, Depends(get_settings)]

health = APIRouter(tags=["health"])
v1 = APIRouter(prefix="/v1", dependencies=[Depends(require_token)])


@health.get("/healthz")
def healthz() -> dict[str, str]:
    """Alive: the process answers. No auth, so orchestrators can probe it."""
    return {"status": "ok"}


@health.get("/readyz", dependencies=[Depends(require_token)])
def readyz(store: StoreDep, embedder: EmbedderDep) -> JSONResponse:
    """Ready: the index is open and the embedder answers."""
    try:
        info = embedder.info()
    except EmbedderError as exc:
        return JSONResponse({"status": "not ready", "embedder": str(exc)}, status_code=503)
    return JSONResponse({"status": "ready", "model": info.model_id, "index": str(store.index_dir)})


def _folder_views(folders: FolderRegistry, store: Store) -> list[Folder]:
    stats = store.folder_stats()
    out = []
    for f in folders.all():
        s = stats.get(f.name)
        out.append(
            Folder(
                name=f.name,
                path=f.path,
                files=s.files if s else 0,
                chunks=s.chunks if s else 0,
                last_indexed=s.last_indexed if s else None,
            )
        )
    return out


@v1.get("/folders")
def list_folders(folders: FoldersDep, store: StoreDep) -> list[Folder]:
    """The registered folders with their file and chunk counts."""
    return _folder_views(folders, store)


@v1.post("/folders", status_code=status.HTTP_201_CREATED)
def add_folder(body: FolderIn, folders: FoldersDep) -> Folder:
    """Register a directory (absolute path as the API sees it). Run an index afterwards."""
    added = folders.add(body.path, body.name)
    return Folder(name=added.name, path=added.path)


@v1.delete("/folders/{name}")
def remove_folder(
    name: str,
    folders: FoldersDep,
    store: StoreDep,
    keep_index: Annotated[bool, Query(alias="keep_index")] = False,
) -> Folder:
    """Unregister a folder; its chunks are purged unless `keep_index=true`."""
    removed = folders.remove(name)
    if not keep_index:
        store.drop_folder(removed.name)
    return Folder(name=removed.name, path=removed.path)


@v1.get("/folders/{name}/manifest")
def manifest(name: str, folders: FoldersDep, store: StoreDep) -> Manifest:
    """What is indexed under a folder, with mtime and sha256, so the indexer can skip unchanged files."""
    folder = folders.get(name)
    return Manifest(folder=folder.name, files=store.manifest(folder.name))


@v1.post("/folders/{name}/batches")
def apply_batch(name: str, batch: IndexBatch, folders: FoldersDep, store: StoreDep) -> IndexBatchResult:
    """Apply indexer changes: replace each upserted file's chunks atomically, touch, delete."""
    folder = folders.get(name)
    written = store.apply(folder.name, batch)
    return IndexBatchResult(
        upserted=len(batch.upserts), touched=len(batch.touches), deleted=len(batch.deletes), chunks_written=written
    )


@v1.post("/search")
def search(body: SearchRequest, store: StoreDep, embedder: EmbedderDep, folders: FoldersDep) -> SearchResponse:
    """Rank chunks for a query. Every interface (CLI, MCP) calls this."""
    return retrieval.search(body, store, embedder, folders)


@v1.get("/status")
def get_status(store: StoreDep, embedder: EmbedderDep, folders: FoldersDep, settings: SettingsDep) -> Status:
    """Model, embedder, folders, totals and index size."""
    try:
        info = embedder.info()
        emb = EmbedderStatus(
            address=embedder.address,
            ready=True,
            model_id=info.model_id,
            dimension=info.dimension,
            max_sequence_length=info.max_sequence_length,
            quantisation=info.quantisation,
        )
    except EmbedderError as exc:
        emb = EmbedderStatus(address=embedder.address, ready=False, error=str(exc))
    views = _folder_views(folders, store)
    return Status(
        version=__version__,
        data_dir=str(settings.data_dir),
        index_bytes=store.disk_bytes(),
        embedder=emb,
        folders=views,
        files=sum(f.files for f in views),
        chunks=sum(f.chunks for f in views),
    )
