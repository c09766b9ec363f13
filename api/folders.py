"""The corpus: which folders are indexed, under which names. A small JSON file in the data dir."""

from __future__ import annotations

import json
import os
import threading
from dataclasses import asdict, dataclass
from pathlib import Path


class FolderError(ValueError):
    """A folder cannot be added or found; the message says why and what to do."""


@dataclass(frozen=True)
class RegisteredFolder:
    name: str
    path: str  # absolute, as the user gave it (symlinks kept, so results show their paths)


class FolderRegistry:
    def __init__(self, file: Path) -> None:
        self._file = file
        self._lock = threading.Lock()
        self._folders: list[RegisteredFolder] = []
        if file.exists():
            self._folders = [RegisteredFolder(**item) for item in json.loads(file.read_text())]

    def all(self) -> list[RegisteredFolder]:
        return list(self._folders)

    def get(self, name: str) -> RegisteredFolder:
        for folder in self._folders:
            if folder.name == name:
                return folder
        raise FolderError(f"no folder named {name!r}; `semsearch list` shows the registered ones")

    def add(self, path: str, name: str | None = None) -> RegisteredFolder:
        if not os.path.isabs(path):
            raise FolderError(f"{path!r} is not an absolute path; send the folder's absolute path")
        path = os.path.normpath(path)
        if not os.path.isdir(path):
            raise FolderError(
                f"{path} is not a directory the API can see; check the path (in Docker, the corpus "
                "root must be mounted into the api container at the same absolute path)"
            )
        name = name or os.path.basename(path) or "root"
        real = os.path.realpath(path)
        with self._lock:
            for folder in self._folders:
                if os.path.realpath(folder.path) == real:
                    raise FolderError(f"{path} is already registered as {folder.name!r} ({folder.path})")
                if folder.name == name:
                    raise FolderError(
                        f"a folder named {name!r} is already registered ({folder.path}); choose another with --name"
                    )
            added = RegisteredFolder(name=name, path=path)
            self._save([*self._folders, added])
            return added

    def remove(self, name: str) -> RegisteredFolder:
        with self._lock:
            folder = self.get(name)
            self._save([f for f in self._folders if f.name != name])
            return folder

    def _save(self, folders: list[RegisteredFolder]) -> None:
        self._file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._file.with_suffix(".tmp")
        tmp.write_text(json.dumps([asdict(f) for f in folders], indent=2))
        os.replace(tmp, self._file)  # atomic: a crash leaves the old or the new list
        self._folders = folders
