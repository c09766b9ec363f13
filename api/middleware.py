"""Pure ASGI guards in front of every route (not BaseHTTPMiddleware, which hides client
disconnects from long polls): which Host and Origin the API answers, and how big a body it reads.

Why a Host check on a loopback service: a web page the user visits can rebind its own name
to 127.0.0.1 and then talk to the API as a same-origin page would. The Host header still
carries the page's name, so the API answers only to names that are its own.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from fastapi import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from semsearch.api import errors
from semsearch.security import is_loopback

OPEN_PATHS = frozenset({"/healthz"})  # liveness probes come with whatever Host the orchestrator uses
WILDCARD_BINDS = frozenset({"0.0.0.0", "::", ""})


def host_name(authority: str) -> str:
    """`[::1]:8765` -> `::1`, `Example.org:80` -> `example.org`."""
    authority = authority.strip().lower()
    if authority.startswith("["):
        return authority[1:].partition("]")[0]
    if authority.count(":") > 1:  # a bare IPv6 address
        return authority
    return authority.partition(":")[0]


class HostGuard:
    """Refuses requests whose Host is not loopback, the bind address or an allowed name, and
    browser requests whose Origin is another site's."""

    def __init__(self, app: ASGIApp, bind_host: str, allowed_hosts: list[str], allowed_origins: list[str]) -> None:
        self.app = app
        names = {h.lower() for h in allowed_hosts}
        if bind_host not in WILDCARD_BINDS:
            names.add(bind_host.lower())
        self.any_host = "*" in names
        self.names = names - {"*"}
        self.origins = {o.rstrip("/").lower() for o in allowed_origins}

    def host_allowed(self, name: str) -> bool:
        return self.any_host or is_loopback(name) or name in self.names

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        if host and not self.host_allowed(host_name(host)):
            detail = (
                f"this API does not answer to the host name {host_name(host)!r} (a guard against DNS rebinding); "
                "use http://127.0.0.1 with its port, or add the name to SEMSEARCH_ALLOWED_HOSTS"
            )
            await errors.problem(403, "Host not allowed", detail)(scope, receive, send)
            return
        origin = headers.get("origin")
        if origin is not None and not self.origin_allowed(origin, host):
            detail = (
                f"cross-origin request from {origin!r} refused: only pages served by this API may call it from "
                "a browser; add the origin to SEMSEARCH_ALLOWED_ORIGINS to allow it"
            )
            await errors.problem(403, "Origin not allowed", detail)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def origin_allowed(self, origin: str, host: str) -> bool:
        origin = origin.rstrip("/").lower()
        if origin in self.origins:
            return True
        parts = urlsplit(origin)
        # Same origin: the page was served by this API under a name it answers to.
        return parts.scheme in ("http", "https") and bool(host) and parts.netloc == host.lower()


class BodyLimit:
    """Refuses bodies over the limit, by header and while streaming. The indexer's batch
    writes (chunks with vectors) get their own, larger limit."""

    def __init__(self, app: ASGIApp, limit: int, batch_limit: int) -> None:
        self.app = app
        self.limit = limit
        self.batch_limit = batch_limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        batch = path.startswith("/v1/folders/") and path.endswith("/batches")
        limit = self.batch_limit if batch else self.limit
        length = dict(scope["headers"]).get(b"content-length", b"")
        if length.isdigit() and int(length) > limit:
            detail = f"body of {int(length):,} bytes exceeds the limit of {limit:,}; send a smaller request"
            await errors.problem(413, "Request too large", detail)(scope, receive, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > limit:
                raise HTTPException(413, f"body exceeds the limit of {limit:,} bytes; send a smaller request")
            return message

        await self.app(scope, limited, send)
