"""Liveness and readiness, for orchestrators and `semsearch serve`."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from semsearch.api.auth import Principal, authenticate
from semsearch.api.deps import (
    EmbedderDep,
    StoreDep,
)
from semsearch.embedder.client import EmbedderError

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """Alive: the process answers. No auth, so orchestrators can probe it."""
    return {"status": "ok"}


@router.get("/readyz")
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
