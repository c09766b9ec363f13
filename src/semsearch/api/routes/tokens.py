"""Scoped tokens: listed, created and revoked by an admin."""

from __future__ import annotations

from fastapi import APIRouter, Depends, status

from semsearch.api.auth import authenticate
from semsearch.api.deps import (
    ADMIN,
    FoldersDep,
    TokensDep,
)
from semsearch.schemas import (
    TokenCreated,
    TokenIn,
    TokenView,
)

router = APIRouter(prefix="/v1", tags=["tokens"], dependencies=[Depends(authenticate)])


@router.get("/tokens", dependencies=[ADMIN])
def list_tokens(tokens: TokensDep) -> list[TokenView]:
    """The scoped tokens: names, scopes, folders (never a secret or its hash)."""
    return tokens.views()


@router.post("/tokens", status_code=status.HTTP_201_CREATED, dependencies=[ADMIN])
def create_token(body: TokenIn, tokens: TokensDep, folders: FoldersDep) -> TokenCreated:
    """A new token; its secret is in this answer only (the file keeps its sha256)."""
    for name in body.folders or []:
        folders.get(name)
    view, secret = tokens.create(body.name, body.scope, body.folders, body.rate_per_s, body.long_polls)
    return TokenCreated(**view.model_dump(), secret=secret)


@router.delete("/tokens/{name}", dependencies=[ADMIN])
def revoke_token(name: str, tokens: TokensDep) -> TokenView:
    """Revoke a token at once: the next request with it is refused."""
    return tokens.revoke(name)
