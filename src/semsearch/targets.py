"""Which registered folder a path names, and the part of it inside that folder.

Pure: the CLI, the indexer and the API's `explain` resolve paths the same way.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Protocol, TypeVar


class Located(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def path(self) -> str: ...


F = TypeVar("F", bound=Located)


class TargetError(ValueError):
    pass


def resolve_target(folders: Sequence[F], path: str | None) -> tuple[list[F], str]:
    """All folders, or the one folder containing PATH plus the relative scope inside it."""
    if path is None:
        return list(folders), ""
    for folder in folders:
        if folder.name == path:
            return [folder], ""
    absolute = os.path.abspath(path)
    resolved = os.path.realpath(absolute)
    # A symlink *inside* a folder is a path in that folder (and is explained as a symlink),
    # so the last component is not resolved when looking for the containing folder.
    lexical = os.path.join(os.path.realpath(os.path.dirname(absolute)), os.path.basename(absolute))
    for folder in folders:
        root = os.path.realpath(folder.path)
        if resolved == root:
            return [folder], ""
        for candidate in (lexical, resolved):
            if candidate.startswith(root + os.sep):
                return [folder], os.path.relpath(candidate, root).replace(os.sep, "/")
    raise TargetError(f"{path} is not inside a registered folder; add it first with `semsearch add {path}`")
