"""`semsearch mcp --standalone`: everything an agent's search needs, in the agent's one child process.

The production topology is three processes (embedder, API, MCP bridge) plus a worker, each with
its own interpreter and imports. On a laptop the agent spawns one process instead: the model
behind the local embedder interface (the same servicer the gRPC service runs, without the
transport), the API under uvicorn and an indexer worker as threads beside the stdio bridge. The
bridge still makes REST calls to the API (on loopback), so the scopes, limits, errors and the
index's single owner are the same code. What goes is two interpreters, their imports and gRPC.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import uvicorn

from semsearch.api.__main__ import prepare
from semsearch.client import ApiClient, ApiError
from semsearch.config import Settings
from semsearch.embedder.interface import Embedder
from semsearch.embedder.local import LocalEmbedder
from semsearch.embedder.model import ModelError
from semsearch.indexer.worker import Worker
from semsearch.malloc import limit_arenas
from semsearch.mcp_bridge.server import build_server as build_bridge
from semsearch.schemas import RunRequest


class ApiThread:
    """`semsearch api` as a uvicorn server in a thread: the same start-up checks and app."""

    def __init__(self, settings: Settings, embedder: Embedder | None = None) -> None:
        self.app = prepare(settings, embedder)
        config = uvicorn.Config(
            self.app,
            host=settings.host,
            port=settings.port,
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=1,  # a worker's long poll for runs is cut, not waited for
        )
        self.server = uvicorn.Server(config)
        self.where = f"{settings.host}:{settings.port}"
        self.thread = threading.Thread(target=self.server.run, daemon=True, name=f"api {self.where}")

    def start(self, timeout: float = 60) -> ApiThread:
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise SystemExit(
                    f"semsearch: the API could not listen on {self.where} (is `semsearch serve` running? "
                    "then run `semsearch mcp` without --standalone, or set SEMSEARCH_PORT)"
                )
            time.sleep(0.02)
        return self

    @property
    def running(self) -> bool:
        return self.thread.is_alive() and not self.server.should_exit

    def signal(self) -> None:
        self.app.state.draining.set()
        self.server.should_exit = True

    def stop(self) -> None:
        self.signal()
        self.thread.join(timeout=15)


class WorkerThread:
    """`semsearch worker` in a thread: it claims and executes the runs the API queues."""

    def __init__(self, settings: Settings, embedder: Embedder | None = None) -> None:
        self.stop_event = threading.Event()
        worker = Worker(settings, watch=False, requests=True, echo=False, embedder=embedder)  # stdout is not ours
        self.thread = threading.Thread(target=worker.run, args=(self.stop_event,), daemon=True, name="worker")

    def start(self) -> WorkerThread:
        self.thread.start()
        return self

    @property
    def running(self) -> bool:
        return self.thread.is_alive() and not self.stop_event.is_set()

    def signal(self) -> None:
        self.stop_event.set()

    def stop(self) -> None:
        self.signal()
        self.thread.join(timeout=15)


def main(settings: Settings, folders: Sequence[str] = ()) -> None:
    """The model in this process, the API and a worker in threads, then the MCP bridge on stdio until
    the agent closes it. `folders` are registered (if they are not yet) and a run is queued for them, which the
    worker does while the agent starts. Nothing but the MCP protocol is written to stdout."""
    limit_arenas(settings.malloc_arenas)
    # The worker and the bridge reach the API over loopback here: a line per request is noise in
    # the agent's log (the MCP SDK turns on INFO logging).
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        model = LocalEmbedder.from_settings(settings)  # no warm-up batch: it grows the arena to serve one query
    except ModelError as exc:
        sys.exit(f"semsearch mcp --standalone: {exc}")
    settings = type(settings).model_validate(settings.model_dump() | {"url": None})  # its own API, not another's
    api = ApiThread(settings, model).start()
    worker = WorkerThread(settings, model).start()
    try:
        if folders:
            register(settings, folders)
        build_bridge(settings).run("stdio")
    finally:
        worker.signal()
        api.signal()
        worker.stop()
        api.stop()


def register(settings: Settings, paths: Sequence[str]) -> None:
    """Each path registered unless it already is, then one run over everything queued."""
    with ApiClient(settings) as api:
        known = {Path(f.path).resolve() for f in api.folders()}
        for path in paths:
            if Path(path).expanduser().resolve() not in known:
                try:
                    api.add_folder(str(Path(path).expanduser().resolve()))
                except ApiError as exc:
                    sys.exit(f"semsearch mcp --standalone: {path}: {exc}")
        api.request_run(RunRequest())
