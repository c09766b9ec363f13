"""The audit log: one JSON line for every write, every admin action and every refused request
(time, token name, client address, action, folder, status, outcome) — never a secret.

Searches are not logged unless `SEMSEARCH_AUDIT_QUERIES` asks: `hash` records a query's sha256
and length (enough to count repeats, not to read them), `text` the query itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

REFUSED = frozenset({401, 403, 429})
LOGGED_SCOPES = frozenset({"write", "admin"})


class Audit:
    def __init__(self, app: ASGIApp, log: Path | None, queries: str) -> None:
        self.app = app
        self.queries = queries
        self._sink: IO[str] = sys.stderr
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            self._sink = os.fdopen(fd, "a", buffering=1)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        answered = {"status": 500}

        async def noting(message: Message) -> None:
            if message["type"] == "http.response.start":
                answered["status"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, noting)
        finally:
            self._record(scope, answered["status"])

    def _record(self, scope: Scope, status: int) -> None:
        state: dict[str, Any] = scope.get("state") or {}
        needs = state.get("needs")
        query = state.get("query") if self.queries != "off" else None
        if needs not in LOGGED_SCOPES and status not in REFUSED and query is None:
            return
        principal = state.get("principal")
        route = scope.get("route")
        params = scope.get("path_params") or {}
        line: dict[str, Any] = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "token": getattr(principal, "name", None),
            "client": (scope.get("client") or ("?",))[0],
            "action": f"{scope['method']} {getattr(route, 'path', scope['path'])}",
            "folder": params.get("name") or state.get("folder"),
            "status": status,
            "outcome": "refused" if status in REFUSED else "ok" if status < 400 else "error",
        }
        if query is not None:
            line["query"] = (
                query
                if self.queries == "text"
                else {"sha256": hashlib.sha256(query.encode()).hexdigest(), "chars": len(query)}
            )
        # ASCII: U+2028, U+0085 and friends are escaped, so no value can split a record for a reader
        # that breaks lines on them (Python's splitlines() does).
        self._sink.write(json.dumps(line, ensure_ascii=True) + "\n")
        self._sink.flush()
