"""What gets indexed: the one file-list function, shared by the indexer, `explain` and grep.

Everything under a folder, recursively, with no allow-list of extensions, except:
1. what git ignores, when the folder is (inside) a git work tree — git itself lists the
   files (`git ls-files --cached --others --exclude-standard`), so nested .gitignore,
   negations, .git/info/exclude and the global excludes file behave exactly as in git;
   outside git, a walk that skips a small built-in list of build/dependency folders;
2. `.indexignore` files (gitignore syntax) at any depth, plus one global file;
3. credentials by name (.env, id_rsa, *.pem, …): secrets never enter the index;
4. binary files by extension (content is checked when read: NUL bytes);
5. files over the size limit (checked again on the open descriptor when read);
6. symlinks, never followed.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import git
import pathspec

from semsearch.config import Settings

SKIP_DIRS = frozenset(
    {
        ".git", ".hg", ".svn", "node_modules", "dist", "build", "coverage", "vendor", ".venv", "venv",
        "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox", ".gradle", ".idea",
        ".dart_tool", "Pods", "DerivedData", "target", ".next", ".nuxt", ".cache", ".terraform",
    }
)  # fmt: skip

BINARY_EXTENSIONS = frozenset(
    {
        # images, audio, video
        "png", "jpg", "jpeg", "gif", "bmp", "ico", "icns", "webp", "tif", "tiff", "psd", "heic",
        "mp3", "wav", "flac", "ogg", "m4a", "mp4", "mov", "avi", "mkv", "webm",
        # archives and packages
        "zip", "gz", "tgz", "bz2", "xz", "zst", "7z", "rar", "tar", "jar", "war", "aar", "apk", "ipa",
        "whl", "egg", "deb", "rpm", "dmg", "iso",
        # compiled code and objects
        "o", "a", "so", "dylib", "dll", "exe", "bin", "class", "pyc", "pyo", "wasm", "obj", "lib",
        # fonts
        "ttf", "otf", "woff", "woff2", "eot",
        # model weights and data stores
        "onnx", "pt", "pth", "safetensors", "ckpt", "h5", "pb", "tflite", "npy", "npz", "pkl",
        "parquet", "arrow", "lance", "db", "sqlite", "sqlite3", "mdb",
        # key stores
        "jks", "keystore", "p12", "pfx",
        # office formats we do not extract (PDF, DOCX, XLSX and PPTX are: corpus/extract.py)
        "doc", "xls", "ppt", "odt", "ods", "odp",
    }
)  # fmt: skip

# Credentials by name: never indexed, whatever the ignore files say.
SECRET_NAMES = (
    ".env", ".env.*", "*.env", ".envrc", "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", "*.pem", "*.key",
    "*.p8", "*.kdbx", "credentials.json", "credentials", ".netrc", ".pgpass", ".npmrc", ".pypirc",
    "*.tfstate", "*.tfstate.*", "secrets.y*ml", "service-account*.json", ".git-credentials", ".htpasswd",
    "*.tfvars", "*.auto.tfvars.json", "*_history", ".history", "kubeconfig", "*.kubeconfig", ".vault-token",
)  # fmt: skip
# …and by where they live: tools that keep credentials in a fixed file of a fixed directory.
SECRET_PATHS = (
    ".kube/config", ".docker/config.json", ".ssh/*", ".gnupg/*", ".aws/credentials", ".azure/*", ".config/gcloud/*",
    ".config/gh/hosts.yml",
)  # fmt: skip
SECRET_ALLOWED = ("*.example", "*.sample", "*.template", "*.dist")
# Version-control internals hold credentials (`.git/config` remote URLs) and object stores: a path
# with one of these components is never listed, read or indexed, whatever else the rules say.
VCS_DIRS = frozenset({".git", ".hg", ".svn"})

# Formats whose size says little about their text; they get their own, larger limit.
# A notebook's outputs can be megabytes; a mailbox holds years of mail.
DOCUMENT_EXTENSIONS = frozenset({"pdf", "docx", "ipynb", "xlsx", "xlsm", "pptx", "eml", "mbox"})

INDEXIGNORE = ".indexignore"
# The corpus is often owned by another user than the service (containers, a shared server):
# without safe.directory git refuses such repositories. Paths stay unquoted for non-ASCII names.
GIT = ["git", "-c", "safe.directory=*", "-c", "core.quotepath=off"]


@dataclass(frozen=True)
class Verdict:
    """Why a path is or is not indexed."""

    path: str  # relative to the folder, / separators
    included: bool
    # included | git-ignored | indexignore | secret | binary | too-large | symlink | skipped-dir
    # | vcs-internal | not-listed | missing
    rule: str
    detail: str = ""


@dataclass(frozen=True)
class _IgnoreFile:
    base: str  # directory of the file relative to the folder root ("" = root; "*" = global)
    source: str  # shown to users
    spec: pathspec.GitIgnoreSpec
    lines: tuple[int, ...]  # line number of each pattern
    texts: tuple[str, ...]


def _load_ignore(path: Path, base: str, source: str) -> _IgnoreFile | None:
    try:
        raw = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    kept = [(n, line) for n, line in enumerate(raw, start=1) if line.strip() and not line.startswith("#")]
    spec = pathspec.GitIgnoreSpec.from_lines([line for _, line in kept])
    if len(spec.patterns) != len(kept):  # pathspec dropped a line; keep matching, lose line numbers
        kept = [(0, str(getattr(p, "pattern", "?"))) for p in spec.patterns]
    return _IgnoreFile(base, source, spec, tuple(n for n, _ in kept), tuple(t for _, t in kept))


def is_binary_name(name: str) -> bool:
    _, dot, ext = name.rpartition(".")
    return bool(dot) and ext.lower() in BINARY_EXTENSIONS


def is_secret_name(name: str) -> bool:
    if any(fnmatch.fnmatch(name, p) for p in SECRET_ALLOWED):
        return False
    return any(fnmatch.fnmatch(name, p) for p in SECRET_NAMES)


def is_secret_path(rel: str) -> bool:
    """A credentials file by its name, or by the directory a tool keeps it in (`.kube/config`)."""
    name = rel.rpartition("/")[2]
    if is_secret_name(name):
        return True
    if any(fnmatch.fnmatch(name, p) for p in SECRET_ALLOWED):
        return False
    parts = rel.split("/")
    for pattern in SECRET_PATHS:
        depth = pattern.count("/") + 1
        if len(parts) >= depth and fnmatch.fnmatch("/".join(parts[-depth:]), pattern):
            return True
    return False


def vcs_internal(rel: str) -> str | None:
    """The version-control directory `rel` is inside (or is), if any."""
    return next((part for part in rel.split("/") if part in VCS_DIRS), None)


def _is_real_dir(path: Path) -> bool:
    """A directory, not a symlink to one (links are never followed)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def size_limit(name: str, max_file_size: int, max_document_size: int) -> int:
    _, dot, ext = name.rpartition(".")
    return max_document_size if dot and ext.lower() in DOCUMENT_EXTENSIONS else max_file_size


class FileList:
    """The indexable files of one folder. Build once per run; `files()` is the list."""

    def __init__(self, root: Path, max_file_size: int, max_document_size: int, global_ignore: Path | None) -> None:
        """Use `from_settings`: the limits are settings, with their reasons there."""
        self.root = root
        self.max_file_size = max_file_size
        self.max_document_size = max_document_size
        self.global_ignore = global_ignore

    @classmethod
    def from_settings(cls, root: Path, settings: Settings) -> FileList:
        return cls(root, settings.max_file_size_bytes, settings.max_document_bytes, settings.global_indexignore_path)

    # --- the candidate list: git's view, or a walk ------------------------------------

    @cached_property
    def in_git(self) -> bool:
        """The folder is inside a git work tree (the folder itself or a parent has .git)."""
        try:
            repo = git.Repo(self.root, search_parent_directories=True)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError, git.GitCommandNotFound):
            return False
        return not repo.bare

    @classmethod
    def _git_ls(cls, cwd: Path) -> list[str]:
        # argv through gitpython, never a shell; run from `cwd` so output is scoped and relative to it.
        out = git.Git(str(cwd)).execute(
            [*GIT, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            strip_newline_in_stdout=False,
        )
        found: set[str] = set()
        for entry in filter(None, str(out).split("\0")):
            path = entry.rstrip("/")
            # A nested repository (listed as "dir/") or a submodule (a directory entry): git's rules
            # of that repository decide its files, as they would in a clone of it.
            if entry.endswith("/") or _is_real_dir(cwd / path):
                if os.path.exists(cwd / path / ".git"):
                    found.update(f"{path}/{p}" for p in cls._git_ls(cwd / path))
                continue
            found.add(path)
        return sorted(found)

    def _walk(self, directory: Path, prefix: str) -> Iterator[str]:
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            rel = prefix + entry.name
            if not entry.is_dir(follow_symlinks=False):
                yield rel
            elif entry.name in SKIP_DIRS or self._ignored_dir(rel):
                continue
            elif os.path.exists(os.path.join(entry.path, ".git")):
                # A repository inside a plain folder (e.g. ~/code/*): git's rules for its files.
                yield from (rel + "/" + p for p in self._git_ls(Path(entry.path)))
            else:
                yield from self._walk(Path(entry.path), rel + "/")

    @cached_property
    def _candidates(self) -> list[str]:
        return self._git_ls(self.root) if self.in_git else list(self._walk(self.root, ""))

    @cached_property
    def _candidate_set(self) -> frozenset[str]:
        return frozenset(self._candidates)

    def candidates(self) -> Iterator[str]:
        return iter(self._candidates)

    # --- .indexignore -------------------------------------------------------------------

    @cached_property
    def _ignore_files(self) -> list[_IgnoreFile]:
        found: list[_IgnoreFile] = []
        if self.global_ignore is not None and self.global_ignore.is_file():
            loaded = _load_ignore(self.global_ignore, "*", str(self.global_ignore))
            if loaded:
                found.append(loaded)
        for rel in self._ignore_file_paths():
            base = rel.rpartition("/")[0]
            loaded = _load_ignore(self.root / rel, base, rel)
            if loaded:
                found.append(loaded)
        # Global first, then shallow to deep: the deepest matching file has the last word, as in git.
        return sorted(found, key=lambda f: (f.base != "*", f.base.count("/") + (f.base != ""), f.base))

    def _ignore_file_paths(self) -> list[str]:
        if self.in_git:  # git already knows every file it does not ignore
            return [p for p in self._candidates if p.rpartition("/")[2] == INDEXIGNORE]
        found = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            if INDEXIGNORE in filenames:
                found.append(os.path.relpath(os.path.join(dirpath, INDEXIGNORE), self.root).replace(os.sep, "/"))
        return found

    def _ignore_match(self, rel: str, is_dir: bool = False) -> tuple[bool, str] | None:
        verdict: tuple[bool, str] | None = None
        for ignore in self._ignore_files:
            if ignore.base in ("*", ""):  # global, or the folder's own root file
                sub = rel
            elif rel.startswith(ignore.base + "/"):
                sub = rel[len(ignore.base) + 1 :]
            else:
                continue
            result = ignore.spec.check_file(sub + "/" if is_dir else sub)
            if result.include is not None and result.index is not None:
                line, text = ignore.lines[result.index], ignore.texts[result.index]
                verdict = (result.include, f"{ignore.source}:{line}: {text}")
        return verdict

    def _ignored_dir(self, rel: str) -> bool:
        match = self._ignore_match(rel, is_dir=True)
        return bool(match and match[0])

    # --- verdicts ------------------------------------------------------------------------

    def judge(self, rel: str) -> Verdict:
        """The verdict for a candidate (a path git or the walk listed)."""
        vcs = vcs_internal(rel)
        if vcs is not None:
            return Verdict(rel, False, "vcs-internal", f"inside {vcs}/: version-control internals are never read")
        path = self.root / rel
        try:
            st = os.lstat(path)
        except OSError as exc:
            if exc.errno == errno.ENAMETOOLONG:
                return Verdict(rel, False, "missing", "the path is longer than the file system allows")
            return Verdict(rel, False, "missing", "not on disk")
        if stat.S_ISLNK(st.st_mode):
            return Verdict(rel, False, "symlink", "symlinks are never followed")
        if not stat.S_ISREG(st.st_mode):
            return Verdict(rel, False, "missing", "not a regular file")
        name = rel.rsplit("/", 1)[-1]
        match = self._ignore_match(rel)
        if match and match[0]:
            return Verdict(rel, False, "indexignore", match[1])
        if is_secret_path(rel):
            return Verdict(rel, False, "secret", f"{name!r} looks like a credentials file")
        if is_binary_name(name):
            return Verdict(rel, False, "binary", f"binary by extension (.{name.rpartition('.')[2]})")
        limit = size_limit(name, self.max_file_size, self.max_document_size)
        if st.st_size > limit:
            return Verdict(rel, False, "too-large", f"{st.st_size:,} bytes > limit {limit:,}")
        return Verdict(rel, True, "included", "git lists it" if self.in_git else "found by the walk")

    def verdicts(self) -> Iterator[Verdict]:
        for rel in self.candidates():
            yield self.judge(rel)

    def files(self) -> Iterator[str]:
        """The one list: relative paths of the files to index, in a stable order."""
        for verdict in self.verdicts():
            if verdict.included:
                yield verdict.path

    def explain(self, rel: str) -> Verdict:
        """Why `rel` is or is not in `files()`: a listed path gets the very verdict `files()` used
        (`judge`), any other path is not indexed, and this says why it was not listed."""
        rel = rel.strip("/")
        vcs = vcs_internal(rel)
        if vcs is not None:
            return Verdict(rel, False, "vcs-internal", f"inside {vcs}/: version-control internals are never read")
        try:
            return self.judge(rel) if rel in self._candidate_set else self._why_not_listed(rel)
        except OSError as exc:  # a name too long for the file system, a directory that vanished, …
            return Verdict(rel, False, "missing", f"cannot be looked up: {exc.strerror or exc}")

    def _why_not_listed(self, rel: str) -> Verdict:
        """The rule that kept `rel` out of the candidate list; never "included"."""
        parts = rel.split("/")
        for depth in range(1, len(parts)):
            prefix = "/".join(parts[:depth])
            if (self.root / prefix).is_symlink():
                return Verdict(rel, False, "symlink", f"{prefix} is a symlink; symlinks are never followed")
            if not self.in_git and parts[depth - 1] in SKIP_DIRS and self._repo_dir_for(parts) is None:
                return Verdict(rel, False, "skipped-dir", f"inside {prefix}/ (built-in skip list)")
        repo_dir = self._repo_dir_for(parts)
        if repo_dir is not None:
            ignored = self._git_check_ignore(repo_dir, self.root / rel)
            if ignored is not None:
                return Verdict(rel, False, "git-ignored", ignored)
        for depth in range(1, len(parts)):
            match = self._ignore_match("/".join(parts[:depth]), is_dir=True)
            if match and match[0]:
                return Verdict(rel, False, "indexignore", match[1])
        verdict = self.judge(rel)
        if not verdict.included:
            return verdict
        return Verdict(rel, False, "not-listed", "neither git nor the folder walk lists it, so it is not indexed")

    def _repo_dir_for(self, parts: list[str]) -> Path | None:
        """The git work tree whose rules apply to a path: a nested repo, else the folder's own."""
        for depth in range(len(parts) - 1, 0, -1):
            candidate = self.root.joinpath(*parts[:depth])
            if (candidate / ".git").exists():
                return candidate
        return self.root if self.in_git else None

    @staticmethod
    def _git_check_ignore(cwd: Path, path: Path) -> str | None:
        try:
            out = git.Git(str(cwd)).execute([*GIT, "check-ignore", "-v", "--", str(path)])
        except git.GitCommandError:
            return None  # exit 1: not ignored (tracked files are never reported as ignored)
        source, _, matched = str(out).partition("\t")
        return f"{source} (git)" if matched else str(out)
