"""Who is asking and what they may do: bearer tokens with a scope and, optionally, folders.

Scopes are ordered — `read` (search, gather, files, grep, symbols, folders, status), `write`
(read + request runs and write the index of its folders), `admin` (everything: folders, reset,
snapshots, tokens). A token limited to folders sees only those, everywhere: the registry it is
handed is a view of them (`FolderRegistry.only`), and a filter naming another folder is refused.

Tokens live in one file (`SEMSEARCH_TOKENS_FILE`, JSON or TOML) as name, sha256 of the secret,
scope and folders; secrets are random (`secrets.token_urlsafe(32)`), so a plain hash is enough
to keep the file from being a list of passwords, and every stored hash is compared in constant
time. `SEMSEARCH_TOKEN` stays what it was: one admin token. With neither (no token set, no
tokens file), the API is open: it binds to loopback, and `api/__main__.py` refuses anything else.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import secrets
import threading
import time
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request, status
from pydantic import SecretStr

from semsearch.schemas import TokenView
from semsearch.shared import SharedDocument

TOKENS_NAME = "tokens.json"  # beside an index on object storage
SCOPES = ("read", "write", "admin")  # each includes the ones before it
ADMIN_NAME = "SEMSEARCH_TOKEN"


class TokenError(ValueError):
    """A token cannot be created or revoked; the message says why."""


@dataclass(frozen=True)
class Principal:
    name: str | None  # None: nobody authenticated, because no token is configured
    scope: str
    folders: frozenset[str] | None = None  # None: every folder
    rate_per_s: float | None = None  # None: not limited (the operator's SEMSEARCH_TOKEN, an open API)
    long_polls: int | None = None

    def may(self, scope: str) -> bool:
        return SCOPES.index(self.scope) >= SCOPES.index(scope)

    def sees(self, folder: str | None) -> bool:
        """`folder` None is "every folder", which only an unlimited token sees."""
        return self.folders is None or (folder is not None and folder in self.folders)

    def limit(self, requested: list[str] | None) -> list[str] | None:
        """The folders a request may cover: what it asked for, within the token's folders."""
        if self.folders is None:
            return requested
        if not self.folders:  # never "every folder": an empty list limits a token to nothing
            raise HTTPException(status.HTTP_403_FORBIDDEN, f"token {self.name!r} covers no folder; ask an admin")
        if not requested:
            return sorted(self.folders)
        denied = sorted(set(requested) - self.folders)
        if denied:
            raise HTTPException(
                status.HTTP_403_FORBIDDEN,
                f"token {self.name!r} is limited to folders {', '.join(sorted(self.folders))}; it may not read "
                f"{', '.join(denied)} (ask an admin for a token that covers them)",
            )
        return requested


OPEN = Principal(None, "admin")


@dataclass(frozen=True)
class _Entry:
    name: str
    hash: str  # "sha256:<hex>"
    scope: str
    folders: list[str] | None
    created_at: str
    rate_per_s: float | None = None  # None: the settings' default
    long_polls: int | None = None

    def principal(self, rate_per_s: float, long_polls: int) -> Principal:
        return Principal(
            self.name,
            self.scope,
            frozenset(self.folders) if self.folders is not None else None,
            self.rate_per_s if self.rate_per_s is not None else rate_per_s,
            self.long_polls if self.long_polls is not None else long_polls,
        )

    def view(self) -> TokenView:
        return TokenView(
            name=self.name,
            scope=self.scope,
            folders=self.folders,
            created_at=self.created_at,
            rate_per_s=self.rate_per_s,
            long_polls=self.long_polls,
        )


def digest(secret: str) -> str:
    return "sha256:" + hashlib.sha256(secret.encode()).hexdigest()


class TokenBook:
    """The tokens file, re-read when it changes (so a token added by hand works at once).

    With the index on object storage (and no SEMSEARCH_TOKENS_FILE) the tokens live beside the
    index instead, like the folder list: a token created through the writer is then accepted by
    every query replica within its consistency interval, and outlives any pod's local disk."""

    def __init__(
        self,
        path: Path,
        admin: SecretStr | None,
        rate_per_s: float = 0,
        long_polls: int = 0,
        shared: SharedDocument | None = None,
    ) -> None:
        """`rate_per_s`, `long_polls`: what a token from the file may do unless its entry says."""
        self.path = path
        self.rate_per_s, self.long_polls = rate_per_s, long_polls
        self._admin = admin.get_secret_value() if admin else None
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._entries: list[_Entry] = []
        self._shared = shared
        self._exists = False
        if shared is not None:
            found = shared.load()
            if found is None and path.exists() and not shared.replica:  # an index moved to a store brings them
                found = json.loads(path.read_text())
                shared.save(found)
            self._take(found)

    @property
    def where(self) -> str:
        return f"{self._shared.name} beside the index" if self._shared is not None else f"the tokens file {self.path}"

    def _take(self, found: Any | None) -> None:
        self._exists = found is not None
        self._entries = self._parse_body(found) if found is not None else []

    def _current(self) -> list[_Entry]:
        if self._shared is not None:
            with self._lock:
                if self._shared.stale():
                    self._take(self._shared.load())
                return self._entries
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return []
        with self._lock:
            if self._stamp != (st.st_mtime_ns, st.st_size):
                self._entries = self._parse(self.path.read_bytes())
                self._stamp = (st.st_mtime_ns, st.st_size)
            return self._entries

    def _parse(self, data: bytes) -> list[_Entry]:
        try:
            body = tomllib.loads(data.decode()) if self.path.suffix == ".toml" else json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise self._broken(exc) from exc
        return self._parse_body(body)

    def _broken(self, exc: Exception) -> HTTPException:
        # A broken file must not open the API: it refuses everyone until the file is fixed.
        return HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            f"{self.where} cannot be read ({type(exc).__name__}: {exc}); fix it, or move it aside and create "
            "tokens again",
        )

    def _parse_body(self, body: Any) -> list[_Entry]:
        try:
            entries = [
                _Entry(
                    name=str(item["name"]),
                    hash=str(item["hash"]),
                    scope=str(item["scope"]),
                    folders=[str(f) for f in item["folders"]] if item.get("folders") is not None else None,
                    created_at=str(item.get("created_at", "")),
                    rate_per_s=float(item["rate_per_s"]) if item.get("rate_per_s") is not None else None,
                    long_polls=int(item["long_polls"]) if item.get("long_polls") is not None else None,
                )
                for item in body.get("tokens", [])
            ]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise self._broken(exc) from exc
        bad = [e.name for e in entries if e.scope not in SCOPES or not e.hash.startswith("sha256:")]
        if bad:
            raise HTTPException(
                status.HTTP_503_SERVICE_UNAVAILABLE,
                f"{self.where} has entries with an unknown scope or hash ({', '.join(bad)}); "
                f"scopes are {', '.join(SCOPES)} and hashes sha256:<hex>",
            )
        empty = [e.name for e in entries if e.folders == []]
        if empty:  # `[]` read as "no limit" once gave such a token every folder
            raise HTTPException(
                status.HTTP_503_SERVICE_UNAVAILABLE,
                f"{self.where} gives {', '.join(empty)} an empty folder list; name at least one "
                "folder, or remove the `folders` key for a token that covers every folder",
            )
        return entries

    def configured(self) -> bool:
        """Tokens are required once any exists — and stay required while the file does, so
        revoking tokens never opens the API by accident."""
        if self._shared is not None:
            self._current()
            return self._admin is not None or self._exists
        return self._admin is not None or self.path.exists()

    def verify(self, secret: str) -> Principal | None:
        found: Principal | None = None
        if self._admin is not None and hmac.compare_digest(secret.encode(), self._admin.encode()):
            found = Principal(ADMIN_NAME, "admin")
        given = digest(secret).encode()
        for entry in self._current():  # every entry compared, so timing says nothing about which matched
            if hmac.compare_digest(given, entry.hash.encode()) and found is None:
                found = entry.principal(self.rate_per_s, self.long_polls)
        return found

    def views(self) -> list[TokenView]:
        return [e.view() for e in self._current()]

    def create(
        self,
        name: str,
        scope: str,
        folders: list[str] | None,
        rate_per_s: float | None = None,
        long_polls: int | None = None,
    ) -> tuple[TokenView, str]:
        entries = self._writable()
        if any(e.name == name for e in entries) or name == ADMIN_NAME:
            raise TokenError(f"a token named {name!r} exists; revoke it first (`semsearch token revoke {name}`)")
        if scope != "admin" and self._admin is None and not any(e.scope == "admin" for e in entries):
            raise TokenError(
                "create an admin token first (or set SEMSEARCH_TOKEN): once a token exists every request needs "
                "one, and only an admin can hand out the others"
            )
        secret = "sst_" + secrets.token_urlsafe(32)
        made = datetime.now(UTC).isoformat(timespec="seconds")
        entry = _Entry(name, digest(secret), scope, folders, made, rate_per_s, long_polls)
        self._save([*entries, entry])
        return entry.view(), secret

    def revoke(self, name: str) -> TokenView:
        entries = self._writable()
        gone = [e for e in entries if e.name == name]
        if not gone:
            raise TokenError(f"no token named {name!r}; `semsearch token list` shows them")
        admins = [e for e in entries if e.scope == "admin"]
        if self._admin is None and admins == gone:
            raise TokenError(f"{name!r} is the last admin token; create another admin token before revoking it")
        self._save([e for e in entries if e.name != name])
        return gone[0].view()

    def _writable(self) -> list[_Entry]:
        if self._shared is None and self.path.suffix == ".toml":
            raise TokenError(f"tokens in {self.path} (TOML) are managed by editing that file; use a .json file here")
        return list(self._current())

    def _save(self, entries: list[_Entry]) -> None:
        body = {"tokens": [asdict(e) for e in entries]}
        if self._shared is not None:
            with self._lock:
                self._shared.save(body)
                self._take(body)
            return
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as out:
                json.dump(body, out, indent=2)
            os.replace(tmp, self.path)
            self._stamp = None


class Limits:
    """Per token: a bucket of requests refilled at its rate (a burst of one second's worth, at
    least BURST_MIN), and a count of its long polls in flight. A token over either gets a 429
    that says when to retry; one token cannot starve the API for the others."""

    BURST_MIN = 20

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, heavy_per_caller: int = 2, heavy_total: int = 8
    ) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, float]] = {}  # name -> (tokens left, when)
        self._polls: dict[str, int] = {}
        self._heavy: dict[str | None, int] = {}
        self.heavy_per_caller, self.heavy_total = heavy_per_caller, heavy_total

    @contextmanager
    def heavy(self, principal: Principal) -> Iterator[None]:
        """A read that may hold a worker thread for seconds (grep, gather's file reads): at most
        `heavy_per_caller` per token (the open API counts as one caller) and `heavy_total` in all,
        refused at once with a 429 rather than queued on a thread."""
        name = principal.name
        with self._lock:
            mine, total = self._heavy.get(name, 0), sum(self._heavy.values())
            if mine >= self.heavy_per_caller or total >= self.heavy_total:
                who = f"token {name!r} has" if name else "this caller has"
                reason = (
                    f"{who} {mine} greps/gathers running (at most {self.heavy_per_caller} at once)"
                    if mine >= self.heavy_per_caller
                    else f"{total} greps/gathers are running for all callers (at most {self.heavy_total})"
                )
                raise HTTPException(
                    status.HTTP_429_TOO_MANY_REQUESTS,
                    f"{reason}; retry when one has returned, or narrow it with a folder or path filter",
                    headers={"Retry-After": "1"},
                )
            self._heavy[name] = mine + 1
        try:
            yield
        finally:
            with self._lock:
                self._heavy[name] -= 1

    def admit(self, principal: Principal) -> None:
        rate = principal.rate_per_s
        if not rate or principal.name is None:
            return
        burst = max(rate, self.BURST_MIN)
        with self._lock:
            now = self._clock()
            left, then = self._buckets.get(principal.name, (burst, now))
            left = min(burst, left + (now - then) * rate)
            if left < 1:
                wait = (1 - left) / rate
                self._buckets[principal.name] = (left, now)
                raise HTTPException(
                    status.HTTP_429_TOO_MANY_REQUESTS,
                    f"token {principal.name!r} is limited to {rate:g} requests/s (bursts of {burst:g}); retry in "
                    f"{wait:.1f} s",
                    headers={"Retry-After": str(max(1, math.ceil(wait)))},
                )
            self._buckets[principal.name] = (left - 1, now)

    @contextmanager
    def long_poll(self, principal: Principal) -> Iterator[None]:
        limit, name = principal.long_polls, principal.name
        if not limit or name is None:
            yield
            return
        with self._lock:
            if self._polls.get(name, 0) >= limit:
                raise HTTPException(
                    status.HTTP_429_TOO_MANY_REQUESTS,
                    f"token {name!r} already has {limit} long poll(s) waiting; retry when one has returned, or poll "
                    "without `wait`",
                    headers={"Retry-After": "1"},
                )
            self._polls[name] = self._polls.get(name, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                self._polls[name] -= 1


def _bearer(header: str) -> str | None:
    scheme, _, given = header.strip().partition(" ")
    return given.strip() or None if scheme.lower() == "bearer" else None


def authenticate(request: Request) -> Principal:
    """Every /v1 request: the principal behind its bearer token (kept for the audit log)."""
    book: TokenBook = request.app.state.tokens
    principal: Principal | None = OPEN
    if book.configured():
        given = _bearer(request.headers.get("authorization", ""))
        principal = book.verify(given) if given else None
    if principal is None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "missing or wrong bearer token; send `Authorization: Bearer <token>` (SEMSEARCH_TOKEN, or one from "
            "`semsearch token create`)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    request.state.principal = principal
    request.app.state.limits.admit(principal)
    return principal


def needs(scope: str, every_folder: bool = False) -> Callable[..., Principal]:
    """A route's requirement: at least `scope`; with `every_folder`, a token not limited to folders
    (an indexer worker takes runs for any folder)."""

    def check(request: Request, principal: Annotated[Principal, Depends(authenticate)]) -> Principal:
        request.state.needs = scope
        settings = request.app.state.settings
        if scope != "read" and settings.role == "query":
            writer = settings.writer_url or "the writer (SEMSEARCH_ROLE=writer)"
            raise HTTPException(
                status.HTTP_421_MISDIRECTED_REQUEST,
                f"this API is a query replica (SEMSEARCH_ROLE=query): it answers searches and reads only; "
                f"send writes, runs and admin requests to {writer}",
            )
        lease = getattr(request.app.state, "lease", None)
        if scope != "read" and lease is not None and (refusal := lease.refusal()):
            raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, refusal)
        if not principal.may(scope):
            raise HTTPException(
                status.HTTP_403_FORBIDDEN,
                f"token {principal.name!r} has the {principal.scope} scope and this needs {scope}; use a token "
                f"with it (an admin creates one: `semsearch token create NAME --scope {scope}`)",
            )
        if every_folder and principal.folders is not None:
            raise HTTPException(
                status.HTTP_403_FORBIDDEN,
                f"token {principal.name!r} is limited to folders; this needs a token that covers every folder",
            )
        return principal

    return check


Read = Annotated[Principal, Depends(needs("read"))]
Write = Annotated[Principal, Depends(needs("write"))]
Worker = Annotated[Principal, Depends(needs("write", every_folder=True))]
Admin = Annotated[Principal, Depends(needs("admin"))]
