"""`semsearch mcp --standalone`: everything an agent's search needs, in the agent's one child process.

The production topology is three processes (embedder, API, MCP bridge) plus a worker, each with
its own interpreter and imports. On a laptop the agent spawns one process instead: the embedder's
gRPC server, the API under uvicorn and an indexer worker run as threads beside the stdio bridge,
each exactly as it runs alone — the bridge still makes REST calls and the API still asks the
embedder over gRPC (on loopback, inside the process), so the scopes, limits, errors and the
index's single owner are the same code. What goes is two interpreters and their imports.
"""

from __future__ import annotations

import logging
import socket
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import uvicorn

from semsearch.api.__main__ import prepare
from semsearch.client import ApiClient, ApiError
from semsearch.config import Settings
from semsearch.embedder.model import ModelError, load
from semsearch.embedder.server import EmbedderService, build_server
from semsearch.indexer.worker import Worker
from semsearch.malloc import limit_arenas
from semsearch.mcp_bridge.server import build_server as build_bridge
from semsearch.schemas import RunRequest


class ApiThread:
    """`semsearch api` as a uvicorn server in a thread: the same start-up checks and app."""

    def __init__(self, settings: Settings) -> None:
        self.app = prepare(settings)
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

    def __init__(self, settings: Settings) -> None:
        self.stop_event = threading.Event()
        worker = Worker(settings, watch=False, requests=True, echo=False)  # stdout is not ours
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
    """The embedder, the API and a worker in threads, then the MCP bridge on stdio until the agent
    closes it. `folders` are registered (if they are not yet) and a run is queued for them, which the
    worker does while the agent starts. Nothing but the MCP protocol is written to stdout."""
    limit_arenas(settings.malloc_arenas)
    # The worker and the bridge reach the API over loopback here: a line per request is noise in
    # the agent's log (the MCP SDK turns on INFO logging).
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        encoder = load(settings.model_dir, settings.max_seq_length, settings.model_batch_size, settings.threads,
                       settings.model_cache_dir, settings.model_batch_tokens, settings.model_compute)  # fmt: skip
    except ModelError as exc:
        sys.exit(f"semsearch mcp --standalone: {exc}")
    address = f"127.0.0.1:{loopback_port()}"  # this process's own embedder, on a port nobody chose
    embedder = build_server(EmbedderService(encoder, settings.query_grace_ms / 1000), address)
    embedder.start()
    fields = settings.model_dump() | {"embedder_addr": address, "url": None}
    settings = type(settings).model_validate(fields)
    api = ApiThread(settings).start()
    worker = WorkerThread(settings).start()
    try:
        if folders:
            register(settings, folders)
        build_bridge(settings).run("stdio")
    finally:
        worker.signal()
        api.signal()
        worker.stop()
        api.stop()
        embedder.stop(grace=1).wait()


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


def loopback_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
