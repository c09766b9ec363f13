"""`semsearch mcp` / `python -m semsearch.mcp_bridge`: stdio by default, `--http` for streamable HTTP.

Over HTTP the bridge is a network service like the API: loopback by default, a bearer
token required for anything else, and Host/Origin checked against DNS rebinding.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import uvicorn
from mcp.server.transport_security import TransportSecuritySettings

from semsearch.config import Settings, load_settings
from semsearch.mcp_bridge.server import build_server
from semsearch.security import bearer_matches, is_loopback

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[..., Awaitable[Any]], Callable[..., Awaitable[Any]]], Awaitable[None]]


class BearerToken:
    """Pure ASGI middleware: every HTTP request needs `Authorization: Bearer <token>`."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            header = dict(scope["headers"]).get(b"authorization", b"")
            if not bearer_matches(header, self.token):
                body = b'{"error": "missing or wrong bearer token; send Authorization: Bearer $SEMSEARCH_MCP_TOKEN"}'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


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
    if token is not None:
        app = BearerToken(app, token.get_secret_value())
    return app


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
