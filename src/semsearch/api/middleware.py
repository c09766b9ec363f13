"""Pure ASGI guards in front of every route (not BaseHTTPMiddleware, which hides client
disconnects from long polls): which Host and Origin the API answers, how big a body it reads,
and what the pages it serves (the web UI, the API docs) may load.

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
        fetched_from = headers.get("sec-fetch-site")
        if (
            scope["path"].startswith("/v1/")
            and fetched_from in ("cross-site", "same-site")
            and (origin is None or not self.origin_allowed(origin, host))
        ):
            # A page elsewhere (another site, or another port of this host) can make the browser send
            # GETs without an Origin (`<img src=…/v1/snapshot>`): the browser's own header says so.
            detail = (
                f"a {fetched_from} request from a page this API did not serve was refused: call the API from a "
                "script or its own pages, or add the page's origin to SEMSEARCH_ALLOWED_ORIGINS"
            )
            await errors.problem(403, "Cross-site request refused", detail)(scope, receive, send)
            return
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
    writes (chunks with vectors) and snapshot imports get their own, larger limits."""

    def __init__(self, app: ASGIApp, limit: int, batch_limit: int, snapshot_limit: int) -> None:
        self.app = app
        self.limit = limit
        self.batch_limit = batch_limit
        self.snapshot_limit = snapshot_limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        batch = path.startswith("/v1/folders/") and path.endswith("/batches")
        limit = self.snapshot_limit if path == "/v1/snapshot" else self.batch_limit if batch else self.limit
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


# The web UI runs only its own script and talks only to this API: a string planted in a file
# name or a chunk can neither run code nor send data elsewhere. The docs pages need their
# inline start-up scripts; ReDoc's bundle hard-codes a logo on a CDN, which this refuses.
UI_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
DOCS_POLICY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; worker-src 'self' blob:; connect-src 'self'; base-uri 'none'; frame-ancestors 'none'"
)


def page_policy(path: str) -> str | None:
    if path == "/" or path.startswith("/ui/"):
        return UI_POLICY
    if path in ("/docs", "/redoc", "/docs/oauth2-redirect"):
        return DOCS_POLICY
    return None


class PagePolicy:
    """Adds a Content-Security-Policy (and no-sniff, no-referrer) to the pages this API serves."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        policy = page_policy(scope["path"]) if scope["type"] == "http" else None
        if policy is None:
            await self.app(scope, receive, send)
            return

        async def with_policy(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [
                    *message.get("headers", []),
                    (b"content-security-policy", policy.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"),
                ]
            await send(message)

        await self.app(scope, receive, with_policy)
