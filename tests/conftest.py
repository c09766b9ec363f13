"""Starts the real services as processes on free loopback ports, as `semsearch serve` would.

One embedder serves the whole session (loading the model once); API instances are cheap
and tests that need a clean index start their own with `api_factory`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from semsearch.config import settings_from
from semsearch.embedder.client import EmbedderClient
from tests.inprocess import ApiThread, WorkerThread, call_mcp, run_cli
from tests.processes import Service, api_env, free_port, start_api, start_embedder, start_worker

__all__ = ["free_port"]

BIN = Path(sys.executable).parent
SEMSEARCH = str(BIN / "semsearch")
# Tests that use these start real services as processes: the `e2e` tier (`make test-fast` skips it).
PROCESS_FIXTURES = frozenset({"embedder_addr", "process_api_factory", "process_stack"})


# Every child process the suite starts (services, CLI runs, MCP servers, node, git…), counted where
# they are spawned and reported at the end: the suite's unit should be a function call, not a process.
_SPAWNED = [0]
_execute_child = subprocess.Popen._execute_child  # type: ignore[attr-defined]


def _counted(self: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> Any:
    _SPAWNED[0] += 1
    return _execute_child(self, *args, **kwargs)


subprocess.Popen._execute_child = _counted  # type: ignore[attr-defined]


def pytest_sessionfinish(session: pytest.Session) -> None:
    output = getattr(session.config, "workeroutput", None)  # an xdist worker hands its count back
    if output is not None:
        output["spawned"] = _SPAWNED[0]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:  # xdist: a worker finished
    _SPAWNED[0] += getattr(node, "workeroutput", {}).get("spawned", 0)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: a worker more than there are cores. Two workers on two cores left the CPU idle a
    fifth of the time (each waiting on the services it started: a lease to lapse, a process to
    answer), measured with /proc/stat over a whole run; `--maxprocesses` still caps it."""
    return (os.cpu_count() or 1) + 1


def pytest_terminal_summary(terminalreporter: Any) -> None:
    terminalreporter.write_line(f"processes started by the suite: {_SPAWNED[0]}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.e2e)


@dataclass
class Stack:
    """A running API (and the shared embedder) plus helpers to drive it like a user. In process
    (`stack`, `api_factory`): the API and a worker in threads, the CLI through click's runner, MCP
    in memory. As processes (`process_stack`, `process_api_factory`): what `semsearch serve` runs."""

    url: str
    embedder_addr: str
    data_dir: Path
    env: dict[str, str]
    service: Service | None = None
    token: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    worker: Service | None = None
    threads: list[ApiThread | WorkerThread] = field(default_factory=list)

    @property
    def in_process(self) -> bool:
        return self.service is None

    def alive(self) -> bool:
        """The API still serves: its process or its thread runs, and it answers `/healthz`."""
        running = self.service.proc.poll() is None if self.service and self.service.proc else self.threads[0].running
        with self.http() as http:
            return running and http.get("/healthz").status_code == 200

    def stop(self) -> None:
        """Stops the API and its worker (processes or threads)."""
        for part in self.threads:
            part.signal()
        for thread in self.threads:
            thread.stop()
        for process in (self.worker, self.service):
            if process is not None:
                process.stop()

    def cli(self, *args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        if self.in_process:
            result = run_cli(args, self.env)
        else:
            result = subprocess.run(
                [SEMSEARCH, *args], env=self.env, capture_output=True, text=True, timeout=timeout, check=False
            )
        if check and result.returncode != 0:
            raise AssertionError(f"semsearch {' '.join(args)} exited {result.returncode}:\n{result.stderr}")
        return result

    def index(self, *args: str) -> dict:
        """Runs `semsearch index` and returns its last stdout line, the JSON summary."""
        out = self.cli("index", *args).stdout.strip().splitlines()
        return json.loads(out[-1])

    def http(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=self.headers, timeout=60)

    def mcp(self, *calls: tuple[str, dict[str, Any]]) -> list[Any]:
        """Each (tool, arguments) called in order on `semsearch mcp` over stdio, with the
        official Python client; the results as the client got them."""

        if self.in_process:
            return call_mcp(self.env, calls)

        async def run() -> list[Any]:
            params = StdioServerParameters(command=SEMSEARCH, args=["mcp"], env=self.env)
            async with Client(params) as client:
                return [await client.call_tool(name, args) for name, args in calls]

        return anyio.run(run)


def wait_until_free(url: str, folder: str, timeout: float = 60) -> None:
    """Polls until nobody holds the folder's lease (a killed writer's has expired)."""
    deadline = time.monotonic() + timeout
    while True:
        taken = httpx.post(f"{url}/v1/folders/{folder}/lease", json={"holder": "test"}, timeout=10)
        if taken.status_code == 201:
            httpx.delete(f"{url}/v1/folders/{folder}/lease/{taken.json()['id']}", timeout=10)
            return
        assert taken.status_code == 409 and time.monotonic() < deadline, taken.text
        time.sleep(0.1)


def base_env(data_dir: Path, api_port: int, embedder_addr: str) -> dict[str, str]:
    return api_env(data_dir, api_port, embedder_addr)


@pytest.fixture(scope="session")
def embedder_address() -> Iterator[str]:
    """The real model behind a real gRPC server in this process, for tests that run the API app
    in process too (no subprocess: not the e2e tier)."""
    from semsearch.config import Settings
    from semsearch.embedder.model import load
    from semsearch.embedder.server import EmbedderService, build_server

    settings = Settings()
    encoder = load(None, settings.max_seq_length, settings.model_batch_size, settings.threads,
                   settings.model_cache_dir, settings.model_batch_tokens, settings.model_compute)  # fmt: skip
    address = f"127.0.0.1:{free_port()}"
    server = build_server(EmbedderService(encoder, 0.0), address)
    server.start()
    yield address
    server.stop(grace=1).wait()


@pytest.fixture(scope="session")
def embedder_addr(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    service, address = start_embedder(tmp_path_factory.mktemp("embedder") / "embedder.log")
    yield address
    service.stop()


@pytest.fixture(scope="session")
def embedder(embedder_address: str) -> Iterator[EmbedderClient]:
    """A gRPC client of the in-process embedder (real gRPC, the real model; no process)."""
    client = EmbedderClient(embedder_address)
    yield client
    client.close()


@pytest.fixture(scope="module")  # a module's stacks stop when it ends, so they never pile up
def api_factory(embedder_address: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    started: list[Stack] = []

    def make(token: str | None = None, worker: bool = True, **extra_env: str) -> Stack:
        """An API on a fresh data directory in this process and, unless `worker=False`, an indexer
        worker thread that executes the runs `semsearch index` requests."""
        data_dir = tmp_path_factory.mktemp("data")
        if token:
            extra_env["SEMSEARCH_TOKEN"] = token
        env = api_env(data_dir, free_port(), embedder_address, **extra_env)
        settings = settings_from(env)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        stack = Stack(env["SEMSEARCH_URL"], embedder_address, data_dir, env, None, token, headers)
        started.append(stack)
        stack.threads.append(ApiThread(settings).start())
        if worker:
            stack.threads.append(WorkerThread(settings).start())
        return stack

    yield make
    parts = [part for stack in started for part in stack.threads]
    for part in parts:
        part.signal()
    for part in parts:
        part.stop()


@pytest.fixture(scope="module")
def process_api_factory(embedder_addr: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    started: list[Stack] = []

    def make(token: str | None = None, worker: bool = True, **extra_env: str) -> Stack:
        """An API on a fresh data directory and, unless `worker=False`, an indexer worker (as
        `semsearch serve` runs one) that executes the runs `semsearch index` requests."""
        data_dir = tmp_path_factory.mktemp("data")
        if token:
            extra_env["SEMSEARCH_TOKEN"] = token
        service, env = start_api(data_dir, embedder_addr, **extra_env)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        stack = Stack(env["SEMSEARCH_URL"], embedder_addr, data_dir, env, service, token, headers)
        if worker:
            stack.worker = start_worker(env, data_dir / "worker.log")
        started.append(stack)
        return stack

    yield make
    for stack in started:
        for part in (stack.worker, stack.service):
            if part:
                part.stop()


@pytest.fixture(scope="module")
def stack(api_factory) -> Stack:  # type: ignore[no-untyped-def]
    """A fresh API and index per test module, in this process."""
    return api_factory()  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def process_stack(process_api_factory) -> Stack:  # type: ignore[no-untyped-def]
    """A fresh API and worker as processes per test module."""
    return process_api_factory()  # type: ignore[no-any-return]
