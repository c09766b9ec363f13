"""The corpus: which folders are indexed, under which names. A small JSON file in the data dir."""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

from semsearch.corpus import repositories
from semsearch.shared import SharedDocument, SharedJson

# Trees that hold the system, devices or other programs' state, never a corpus: refused even
# with --allow-outside-root (after resolving symlinks, so /var/run is /run).
SYSTEM_TREES = (
    "/proc", "/sys", "/dev", "/etc", "/boot", "/run", "/var/lib", "/var/log", "/var/run", "/var/cache",
    "/var/spool", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/snap", "/lost+found",
)  # fmt: skip


class FolderError(ValueError):
    """A folder cannot be added; the message says why and what to do."""


class FolderNotFound(FolderError):
    """No folder has that name."""


def inside(path: str, root: str) -> bool:
    """`path` is `root` or below it (both already resolved)."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def default_name(path: str) -> str:
    """A folder name from a directory's basename, in the alphabet names allow."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", os.path.basename(path)).strip("-")[:64]
    return name if name and name not in (".", "..") else "folder"


@dataclass(frozen=True)
class RegisteredFolder:
    name: str
    path: str  # absolute, as the user gave it (symlinks kept, so results show their paths)
    url: str | None = None  # a repository added by URL: `path` is semsearch's clone of it
    branch: str | None = None


SHARED_NAME = "folders.json"


class FolderRegistry:
    def __init__(
        self,
        file: Path,
        corpus_root: Path,
        protected: list[Path],
        shared: SharedJson | None = None,
        refresh_s: float = 0.0,
    ) -> None:
        """`protected`: directories of semsearch's own (data, cache) that no folder may overlap.
        `shared`: the list lives beside an index on object storage instead of in `file`, so every
        API over that index reads the same list (re-read at most every `refresh_s`)."""
        self._file = file
        self._root = os.path.realpath(corpus_root)
        self._protected = [os.path.realpath(p) for p in protected]
        self._lock = threading.Lock()
        self._shared = None if shared is None else SharedDocument(shared, SHARED_NAME, refresh_s)
        self._folders: list[RegisteredFolder] = []
        if self._shared is not None:
            found = self._shared.load()
            if found is None and file.exists():  # an index moved to a store brings its folders along
                found = json.loads(file.read_text())
                self._shared.save(found)
            self._folders = [RegisteredFolder(**item) for item in found or []]
        elif file.exists():
            self._folders = [RegisteredFolder(**item) for item in json.loads(file.read_text())]

    def all(self) -> list[RegisteredFolder]:
        if self._shared is not None and self._shared.stale():
            self._folders = [RegisteredFolder(**item) for item in self._shared.load() or []]
        return list(self._folders)

    def only(self, names: frozenset[str]) -> FolderRegistry:
        """The same registry as a token limited to `names` sees it: the others do not exist."""
        return _Limited(self, names)

    def get(self, name: str) -> RegisteredFolder:
        for folder in self.all():
            if folder.name == name:
                return folder
        raise FolderNotFound(f"no folder named {name!r}; `semsearch list` shows the registered ones")

    def add(self, path: str, name: str | None = None, allow_outside_root: bool = False) -> RegisteredFolder:
        path, real = self._check_path(path, allow_outside_root)
        name = name or default_name(path)
        with self._lock:
            current = self.all()
            self._check_overlap(path, real, name, current)
            added = RegisteredFolder(name=name, path=path)
            self._save([*current, added])
            return added

    def add_repository(self, url: str, branch: str | None, name: str | None, repos_dir: Path) -> RegisteredFolder:
        """Clones `url` into `repos_dir` and registers the clone; nothing is registered (or left on
        disk) when the clone fails."""
        url = repositories.check_url(url)
        name = name or repositories.default_name(url)
        with self._lock:
            current = self.all()
            same = [f for f in current if f.url == url and f.branch == branch]
            if same:
                return same[0]
            path = os.path.join(os.path.realpath(repos_dir), name)
            self._check_overlap(path, path, name, current)
            if os.path.lexists(path):  # a clone left by a folder removed with --keep-index, or a crash
                shutil.rmtree(path)
            repositories.clone(url, branch, Path(path))
            added = RegisteredFolder(name=name, path=path, url=url, branch=branch)
            self._save([*current, added])
            return added

    def plan(self, incoming: list[RegisteredFolder], allow_outside_root: bool = False) -> list[RegisteredFolder]:
        """The list after `incoming` replaces the folders of the same names (a snapshot import),
        each checked as `add` checks a folder; nothing is saved (`install` does)."""
        names = {f.name for f in incoming}
        kept = [f for f in self.all() if f.name not in names]
        checked: list[RegisteredFolder] = []
        for folder in incoming:
            path, real = self._check_path(folder.path, allow_outside_root)
            self._check_overlap(path, real, folder.name, [*kept, *checked])
            checked.append(RegisteredFolder(name=folder.name, path=path))
        return [*kept, *checked]

    def install(self, folders: list[RegisteredFolder]) -> None:
        with self._lock:
            self._save(folders)

    def _check_path(self, path: str, allow_outside_root: bool) -> tuple[str, str]:
        """The path, normalised, and its real path, if it may be a folder."""
        if "\x00" in path or not os.path.isabs(path):
            raise FolderError(f"{path!r} is not an absolute path; send the folder's absolute path")
        path = os.path.normpath(path)
        if not os.path.isdir(path):
            raise FolderError(
                f"{path} is not a directory the API can see; check the path (in Docker, the corpus "
                "root must be mounted into the api container at the same absolute path)"
            )
        real = os.path.realpath(path)
        self._check_place(path, real, allow_outside_root)
        return path, real

    @staticmethod
    def _check_overlap(path: str, real: str, name: str, others: list[RegisteredFolder]) -> None:
        for folder in others:
            other = os.path.realpath(folder.path)
            if other == real:
                raise FolderError(f"{path} is already registered as {folder.name!r} ({folder.path})")
            if inside(real, other):
                sub = os.path.relpath(real, other).replace(os.sep, "/")
                raise FolderError(
                    f"{path} is inside the registered folder {folder.name!r} ({folder.path}) and is indexed "
                    f"with its rules; search it with `--folder {folder.name} --glob '{sub}/**'`"
                )
            if inside(other, real):
                raise FolderError(
                    f"{path} contains the registered folder {folder.name!r} ({folder.path}); remove that "
                    f"one first (`semsearch remove {folder.name}`), then add {path}"
                )
            if folder.name == name:
                raise FolderError(
                    f"a folder named {name!r} is already registered ({folder.path}); choose another with --name"
                )

    def _check_place(self, path: str, real: str, allow_outside_root: bool) -> None:
        """Refuses the file system's root, system trees, semsearch's own state and, unless allowed,
        anything outside the corpus root."""
        shown = path if path == real else f"{path} (= {real})"
        if real == os.sep:
            raise FolderError("the file system root cannot be a folder; register the directories you want searched")
        for tree in SYSTEM_TREES:
            if inside(real, tree):
                raise FolderError(f"{shown} is inside {tree}, a system directory; it cannot be registered")
        for own in self._protected:
            if inside(real, own) or inside(own, real):
                raise FolderError(
                    f"{shown} overlaps semsearch's own data or cache directory ({own}); register a folder that "
                    "does not contain it"
                )
        if not allow_outside_root and not inside(real, self._root):
            raise FolderError(
                f"{shown} is outside the corpus root {self._root} (SEMSEARCH_CORPUS_ROOT); pass "
                "--allow-outside-root (REST: allowOutsideRoot) if you mean it, or change the corpus root"
            )

    def remove(self, name: str) -> RegisteredFolder:
        with self._lock:
            folder = self.get(name)
            self._save([f for f in self.all() if f.name != name])
            return folder

    def _save(self, folders: list[RegisteredFolder]) -> None:
        if self._shared is not None:
            self._shared.save([_stored(f) for f in folders])
            self._folders = folders
            return
        self._file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._file.with_suffix(".tmp")
        tmp.write_text(json.dumps([_stored(f) for f in folders], indent=2))
        os.replace(tmp, self._file)  # atomic: a crash leaves the old or the new list
        self._folders = folders


def _stored(folder: RegisteredFolder) -> dict[str, str]:
    """A folder as the list file holds it (a plain folder without the repository fields, as before)."""
    return {k: v for k, v in asdict(folder).items() if v is not None}


class _Limited(FolderRegistry):
    """A read-only view: changing folders is an admin's, and admins are never limited."""

    def __init__(self, base: FolderRegistry, names: frozenset[str]) -> None:  # noqa: D107 - no super(): a view
        self._base = base
        self._names = names

    def all(self) -> list[RegisteredFolder]:
        return [f for f in self._base.all() if f.name in self._names]

    def get(self, name: str) -> RegisteredFolder:
        if name not in self._names:
            raise FolderNotFound(f"no folder named {name!r} among this token's folders; `semsearch list` shows them")
        return self._base.get(name)

    def add(self, path: str, name: str | None = None, allow_outside_root: bool = False) -> RegisteredFolder:
        raise FolderError("a token limited to folders cannot register folders")

    def add_repository(self, url: str, branch: str | None, name: str | None, repos_dir: Path) -> RegisteredFolder:
        raise FolderError("a token limited to folders cannot register folders")

    def remove(self, name: str) -> RegisteredFolder:
        raise FolderError("a token limited to folders cannot remove folders")

    def install(self, folders: list[RegisteredFolder]) -> None:
        raise FolderError("a token limited to folders cannot replace folders")
