"""semsearch: self-hosted retrieval over folders of code and documents.

`semsearch.connect(PATH_OR_URL)` is the library (see `semsearch.library`); the services, the
CLI and the MCP bridge are adapters over the same engine.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from semsearch.library import Database

from semsearch.version import __version__

__all__ = ["__version__", "connect"]

# Validation errors reach people and agents as text (problem details, MCP tool errors); pydantic's
# documentation links in them are noise, and a link out on an offline server. Read by pydantic
# when it is first imported, so it is set here, before any service imports it.
os.environ.setdefault("PYDANTIC_ERRORS_INCLUDE_URL", "0")


def connect(where: str | Path, token: str | None = None, **settings: Any) -> Database:
    """A local index in this process (a directory) or a running API (an `http(s)://` URL), with the
    same methods: `add`, `index`, `search`, `gather`, `folders`, `status`. See `semsearch.library`."""
    from semsearch.library import connect as open_database

    return open_database(where, token, **settings)
