"""Starts the real services as processes on free loopback ports, as `semsearch serve` would.

One embedder serves the whole session (loading the model once); API instances are cheap
and tests that need a clean index start their own with `api_factory`.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from embedder.client import EmbedderClient

BIN = Path(sys.executable).parent
SEMSEARCH = str(BIN / "semsearch")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(module: str, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", module], env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_http(url: str, proc: subprocess.Popen[bytes], log: Path, headers: dict[str, str] | None = None) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"service exited with {proc.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(url, headers=headers, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} not ready after 60 s:\n{log.read_text()}")


@dataclass
class Stack:
    """A running API (and the shared embedder) plus helpers to drive it like a user."""

    url: str
    embedder_addr: str
    data_dir: Path
    env: dict[str, str]
    proc: subprocess.Popen[bytes] | None = None
    token: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def cli(self, *args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
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


def base_env(data_dir: Path, api_port: int, embedder_addr: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEMSEARCH_")}
    env.update(
        SEMSEARCH_DATA_DIR=str(data_dir),
        SEMSEARCH_PORT=str(api_port),
        SEMSEARCH_EMBEDDER_ADDR=embedder_addr,
        SEMSEARCH_URL=f"http://127.0.0.1:{api_port}",
    )
    return env


@pytest.fixture(scope="session")
def embedder_addr(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    logs = tmp_path_factory.mktemp("embedder")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEMSEARCH_")}
    env.update(SEMSEARCH_EMBEDDER_PORT=str(port))
    proc = start("embedder", env, logs / "embedder.log")
    addr = f"127.0.0.1:{port}"
    client = EmbedderClient(addr, timeout=5)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError((logs / "embedder.log").read_text())
            try:
                client.info()
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield addr
    finally:
        client.close()
        stop(proc)


@pytest.fixture(scope="session")
def embedder(embedder_addr: str) -> Iterator[EmbedderClient]:
    client = EmbedderClient(embedder_addr)
    yield client
    client.close()


@pytest.fixture(scope="session")
def api_factory(embedder_addr: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    started: list[Stack] = []

    def make(token: str | None = None, **extra_env: str) -> Stack:
        data_dir = tmp_path_factory.mktemp("data")
        port = free_port()
        env = base_env(data_dir, port, embedder_addr)
        headers = {}
        if token:
            env["SEMSEARCH_TOKEN"] = token
            headers = {"Authorization": f"Bearer {token}"}
        env.update(extra_env)
        log = data_dir / "api.log"
        proc = start("api", env, log)
        wait_http(f"http://127.0.0.1:{port}/readyz", proc, log, headers)
        stack = Stack(f"http://127.0.0.1:{port}", embedder_addr, data_dir, env, proc, token, headers)
        started.append(stack)
        return stack

    yield make
    for stack in started:
        if stack.proc:
            stop(stack.proc)


@pytest.fixture(scope="module")
def stack(api_factory) -> Stack:  # type: ignore[no-untyped-def]
    """A fresh API and index per test module."""
    return api_factory()  # type: ignore[no-any-return]
