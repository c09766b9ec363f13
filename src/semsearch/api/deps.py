"""What a route can ask for: the engine and its parts, the caller's view of the folders, tokens,
and the scope a route needs.

The app holds three things (`app.state`): the engine, the token book and the per-token limits;
everything else is a part of the engine. One place, typed, so a route never reaches into
`app.state` itself.
"""

from __future__ import annotations

from typing import Annotated, cast

from fastapi import Depends, Request

from semsearch.api.auth import Principal, TokenBook, authenticate, needs
from semsearch.config import Settings
from semsearch.corpus.folders import FolderRegistry
from semsearch.embedder.interface import Embedder
from semsearch.engine.core import Engine
from semsearch.engine.runs import Leases, Runs
from semsearch.engine.store import Store


def get_engine(request: Request) -> Engine:
    return cast(Engine, request.app.state.engine)


def get_tokens(request: Request) -> TokenBook:
    return cast(TokenBook, request.app.state.tokens)


def get_folders(request: Request, principal: Annotated[Principal, Depends(authenticate)]) -> FolderRegistry:
    """The registry as the caller's token sees it: a token limited to folders gets only those."""
    registry = get_engine(request).registry
    return registry if principal.folders is None else registry.only(principal.folders)


def get_store(request: Request) -> Store:
    return get_engine(request).store


def get_embedder(request: Request) -> Embedder:
    return get_engine(request).embedder


def get_leases(request: Request) -> Leases:
    return get_engine(request).leases


def get_runs(request: Request) -> Runs:
    return get_engine(request).runs


def get_settings(request: Request) -> Settings:
    return get_engine(request).settings


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
