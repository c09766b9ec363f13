"""`semsearch mcp` / `python -m semsearch.mcp_bridge`: stdio by default, `--http` for streamable HTTP.

Over HTTP the bridge is a network service like the API: loopback by default, a bearer
token required for anything else, and Host/Origin checked against DNS rebinding.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import httpx
import uvicorn
from mcp.server.transport_security import TransportSecuritySettings

from semsearch.config import Settings, load_settings
from semsearch.mcp_bridge.server import build_server
from semsearch.security import bearer_matches, is_loopback

Scope = MutableMapping[str, Any]
TOKEN_REUSE_S = 30.0  # a scoped token the API accepted is trusted this long (revocation takes effect after it)
ASGIApp = Callable[[Scope, Callable[..., Awaitable[Any]], Callable[..., Awaitable[Any]]], Awaitable[None]]


class BearerToken:
    """Pure ASGI middleware for the HTTP transport. A request carries the bridge's own token
    (`SEMSEARCH_MCP_TOKEN`: its tools call the API with the bridge's API token) or one of the
    API's scoped tokens, which the bridge passes on with every call it makes for that client, so
    the client gets exactly that token's scope — the API decides, as for any client. A token the
    API refuses is refused here (checked once per TOKEN_REUSE_S). Without a bridge token, a
    request without any token is let through (loopback only; `main` refuses other binds)."""

    def __init__(
        self, app: ASGIApp, token: str | None, api_url: str, sessions_per_token: int = 16, idle_s: float = 600.0
    ) -> None:
        self.app = app
        self.token = token
        self.api_url = api_url.rstrip("/")
        self._accepted: dict[str, float] = {}  # sha256 of a token -> until when it is trusted
        self.sessions_per_token, self.idle_s = sessions_per_token, idle_s
        self._sessions: dict[str, dict[str, float]] = {}  # caller -> session id -> last used (monotonic)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = dict(scope["headers"]).get(b"authorization", b"")
        caller = "bridge"  # the bridge's own token, or an open loopback bridge
        if self.token is not None and bearer_matches(header, self.token):
            pass
        elif header:
            given = header.decode("latin-1").partition(" ")[2].strip()
            if not given or not await self._api_accepts(given):
                await _refuse(send)
                return
            scope.setdefault("state", {})["semsearch_token"] = given
            caller = hashlib.sha256(given.encode()).hexdigest()
        elif self.token is not None:
            await _refuse(send)
            return
        await self._counted(caller, scope, receive, send)

    async def _counted(self, caller: str, scope: Scope, receive: Any, send: Any) -> None:
        """Sessions are counted per caller: one token cannot open every session the bridge allows
        (`SEMSEARCH_MCP_MAX_SESSIONS`) and lock the others out."""
        now = time.monotonic()
        mine = self._sessions.setdefault(caller, {})
        for stale in [sid for sid, used in mine.items() if now - used > self.idle_s]:
            del mine[stale]
        session = dict(scope["headers"]).get(b"mcp-session-id", b"").decode("latin-1")
        if session:
            if scope["method"] == "DELETE":
                mine.pop(session, None)
            elif session in mine:
                mine[session] = now
            await self.app(scope, receive, send)
            return
        if scope["method"] == "POST" and len(mine) >= self.sessions_per_token:
            await _answer(
                send,
                429,
                f"this token already holds {len(mine)} MCP sessions (at most {self.sessions_per_token}); close one "
                "(DELETE with its Mcp-Session-Id) or wait for an idle one to expire",
            )
            return

        async def noting(message: Any) -> None:
            if message["type"] == "http.response.start":
                opened = dict(message.get("headers", [])).get(b"mcp-session-id")
                if opened:
                    mine[opened.decode("latin-1")] = time.monotonic()
            await send(message)

        await self.app(scope, receive, noting)

    async def _api_accepts(self, token: str) -> bool:
        key = hashlib.sha256(token.encode()).hexdigest()
        if self._accepted.get(key, 0) > time.monotonic():
            return True
        try:
            async with httpx.AsyncClient(timeout=10) as http:
                answer = await http.get(f"{self.api_url}/readyz", headers={"Authorization": f"Bearer {token}"})
        except httpx.TransportError:
            return False
        if answer.status_code in (200, 503):  # 503: authenticated, the embedder is not ready
            if len(self._accepted) > 1000:
                self._accepted.clear()
            self._accepted[key] = time.monotonic() + TOKEN_REUSE_S
            return True
        return False


async def _answer(send: Any, status: int, error: str) -> None:
    body = json.dumps({"error": error}).encode()
    headers = [(b"content-type", b"application/json"), (b"retry-after", b"5")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _refuse(send: Any) -> None:
    body = (
        b'{"error": "missing or wrong bearer token; send Authorization: Bearer $SEMSEARCH_MCP_TOKEN, '
        b'or a semsearch token the API accepts"}'
    )
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")],
        }
    )
    await send({"type": "http.response.body", "body": body})


def http_app(settings: Settings, host: str, port: int) -> ASGIApp:
    server = build_server(settings)
    hosts = {f"{h}:{port}" for h in ("127.0.0.1", "localhost", host)} | {"127.0.0.1", "localhost", host}
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=sorted(hosts),
        allowed_origins=sorted({f"http://{h}" for h in hosts}),
    )
    app: ASGIApp = server.streamable_http_app(
        transport_security=security,
        host=host,
        session_idle_timeout=settings.mcp_session_idle_s,
        max_sessions=settings.mcp_max_sessions,
    )
    token = settings.mcp_token or settings.token
    return BearerToken(
        app,
        token.get_secret_value() if token else None,
        settings.api_url,
        settings.mcp_sessions_per_token,
        settings.mcp_session_idle_s,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="semsearch mcp", description="The semsearch MCP server.")
    parser.add_argument("--http", action="store_true", help="streamable HTTP instead of stdio")
    parser.add_argument("--host", default=None, help="HTTP bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=None, help="HTTP port (default 8767)")
    args = parser.parse_args(argv)
    settings = load_settings("semsearch mcp")
    if not args.http:
        build_server(settings).run("stdio")
        return
    host = args.host or settings.mcp_host
    port = args.port or settings.mcp_port
    if not is_loopback(host) and (settings.mcp_token or settings.token) is None:
        sys.exit(f"semsearch mcp: refusing to listen on {host} without a token; set SEMSEARCH_MCP_TOKEN")
    uvicorn.run(http_app(settings, host, port), host=host, port=port, log_level="warning")
