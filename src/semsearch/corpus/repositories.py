"""Repositories added by URL: a shallow clone semsearch keeps in its data directory, brought up
to date before each index run of its folder.

git runs as a list of arguments (never a shell), with the URL after `--`, from the clone's
parent directory (never the caller's), and without a terminal to ask for a password: git's own
configuration (credential helpers, ssh keys and agents) is the only source of credentials.
A URL carrying a password is refused before anything runs, so no credential is ever written to
the folder list, the clone's config or a log; what git prints is redacted before it is shown.
Only the transports below are allowed (`GIT_ALLOW_PROTOCOL`): never `ext::`, whose "URL" is a
command.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import urllib.parse
from pathlib import Path

from semsearch.corpus.secrets import redact

SCHEMES = ("https", "http", "ssh", "git", "file")
# scp-like ssh: `git@github.com:owner/repo.git` (a user, a host, a colon, a path; no `//`).
# `host::address` is git's remote-helper syntax (`ext::command`), never scp-like.
SCP_LIKE = re.compile(r"^(?P<user>[A-Za-z0-9._-]+@)?(?P<host>[A-Za-z0-9.-]+):(?!//|:)(?P<path>[^\s]+)$")
CLONE_TIMEOUT_S = 600.0  # a large repository over a slow link; a hung server is stopped here
GIT = ["git", "-c", "safe.directory=*", "-c", "advice.detachedHead=false", "-c", "core.hooksPath=/dev/null"]


class RepositoryError(ValueError):
    """A repository URL semsearch will not clone; the message says why and what to do."""


class RepositoryUnavailable(RepositoryError):
    """git could not clone or fetch (unreachable, refused credentials, no such branch)."""


def is_url(text: str) -> bool:
    """`text` names a repository by URL rather than a folder by path."""
    return "://" in text or (SCP_LIKE.match(text) is not None and not text.startswith(("/", ".", "~")))


def check_url(url: str) -> str:
    """The URL, if semsearch will clone it; RepositoryError otherwise (never echoing a password)."""
    url = url.strip()
    if not url or url.startswith("-") or any(c.isspace() or ord(c) < 32 for c in url):
        raise RepositoryError("a repository URL cannot be empty, start with `-` or hold spaces or control characters")
    if "://" not in url:
        if SCP_LIKE.match(url) is None:
            raise RepositoryError(
                f"{url!r} is not a repository URL; use https://, ssh://, git://, file:// or git@host:path"
            )
        return url
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() not in SCHEMES:
        raise RepositoryError(
            f"{parts.scheme}:// is not a transport semsearch clones over; use one of "
            + ", ".join(f"{s}://" for s in SCHEMES)
        )
    if parts.password is not None or (parts.username and parts.scheme.lower() in ("https", "http")):
        shown = parts._replace(netloc=parts.hostname or "").geturl()
        raise RepositoryError(
            f"the URL carries credentials; semsearch never stores them: add {shown} and let git's credential "
            "helper (or an ssh key) supply them (`git config --global credential.helper store`, or a token in "
            "your helper)"
        )
    if parts.scheme.lower() != "file" and not parts.hostname:
        raise RepositoryError(f"{url} names no host")
    if parts.query or parts.fragment:
        raise RepositoryError(f"{url} has a query or fragment; give the repository's plain URL")
    return url


def default_name(url: str) -> str:
    """A folder name from the repository's last path part (`semsearch` for …/semsearch.git)."""
    path = urllib.parse.urlsplit(url).path if "://" in url else url.split(":", 1)[-1]
    base = path.rstrip("/").rsplit("/", 1)[-1]
    base = base[:-4] if base.endswith(".git") else base
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", base).strip("-")[:64]
    return name if name and name not in (".", "..") else "repository"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}  # a caller's GIT_DIR must not steer us
    env.update(GIT_TERMINAL_PROMPT="0", GIT_ALLOW_PROTOCOL=":".join(SCHEMES), GCM_INTERACTIVE="never")
    env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
    return env


def _git(args: list[str], cwd: Path, what: str, timeout: float = CLONE_TIMEOUT_S) -> str:
    try:
        done = subprocess.run(  # noqa: S603 - an argument list, never a shell
            [*GIT, *args], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout, check=False
        )
    except FileNotFoundError as exc:
        raise RepositoryUnavailable("git is not installed; install it to add repositories by URL") from exc
    except subprocess.TimeoutExpired as exc:
        raise RepositoryUnavailable(
            f"{what} took longer than {timeout:.0f} s and was stopped; try again later"
        ) from exc
    if done.returncode != 0:
        said = redact(" ".join(line.strip() for line in done.stderr.splitlines() if line.strip()))[0]
        raise RepositoryUnavailable(f"{what} failed: {said[:600] or f'git exited {done.returncode}'}")
    return done.stdout.strip()


def clone(url: str, branch: str | None, dest: Path) -> str:
    """A shallow clone of `url` (its `branch`, else its default branch) at `dest`, which must not
    exist; returns the commit checked out. A failed clone leaves nothing behind."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
    try:
        args = ["clone", "--depth", "1", "--single-branch", "--no-tags", "--quiet"]
        args += ["--branch", branch] if branch else []
        _git([*args, "--", url, str(staging / "tree")], dest.parent, f"cloning {url}")
        os.replace(staging / "tree", dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return commit(dest)


def update(url: str, branch: str | None, dest: Path) -> tuple[str, str]:
    """Brings the clone at `dest` to the newest commit of its branch (one shallow fetch, then the
    files as that commit has them); returns the commits before and after."""
    before = commit(dest)
    _git(["fetch", "--depth", "1", "--no-tags", "--quiet", "--", url, branch or "HEAD"], dest, f"fetching {url}")
    _git(["reset", "--hard", "--quiet", "FETCH_HEAD"], dest, f"checking out the fetched {url}")
    return before, commit(dest)


def commit(dest: Path) -> str:
    return _git(["rev-parse", "HEAD"], dest, "reading the clone's commit", timeout=30.0)
