"""The one ranking function. REST, CLI and MCP all reach search through `search()`."""

from __future__ import annotations

import os
import time

from api.folders import FolderRegistry
from api.store import Store
from embedder.client import EmbedderClient
from semsearch.schemas import Hit, SearchRequest, SearchResponse


def search(request: SearchRequest, store: Store, embedder: EmbedderClient, folders: FolderRegistry) -> SearchResponse:
    started = time.perf_counter()
    registered = {f.name: f.path for f in folders.all()}
    vector = embedder.embed([request.query], query=True)[0]
    # Only registered folders: a folder removed with --keep-index stays on disk but out of results.
    rows = store.vector_search(vector, request.k, sorted(registered))
    hits = [
        Hit(
            file_path=os.path.join(registered[row["folder"]], row["path"]),
            folder=row["folder"],
            rel_path=row["path"],
            start_line=row["start_line"],
            end_line=row["end_line"],
            page=row["page"],
            heading=row["heading"],
            text=row["text"],
            score=round(row["cosine"], 4),
        )
        for row in rows
    ]
    return SearchResponse(
        query=request.query,
        hits=hits,
        model_id=store.model_id or "",
        took_ms=round((time.perf_counter() - started) * 1000, 2),
    )
