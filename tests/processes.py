"""Start, wait for and stop semsearch services as plain processes (tests, eval, bench).

The same `python -m <service>` entrypoints the containers and `semsearch serve` use.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import httpx

from semsearch.embedder.client import EmbedderClient
from semsearch.spawn import child_env, python_module

T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PortTaken(RuntimeError):
    """The port a service was given answered, but from another process: between `free_port()` and
    the service's bind, something else (another test's service) took it."""


def owns_port(pid: int, port: int) -> bool | None:
    """Whether `pid` or a process it started holds the socket listening on `port` (Linux /proc);
    None where /proc cannot say."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            return None
        for row in rows:
            fields = row.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                inodes.add(f"socket:[{fields[9]}]")
    if not inodes:
        return None
    family, seen = [pid], set()
    while family:
        current = family.pop()
        seen.add(current)
        for fd in Path(f"/proc/{current}/fd").glob("*"):
            try:
                if os.readlink(fd) in inodes:
                    return True
            except OSError:
                continue
        for children in Path(f"/proc/{current}/task").glob("*/children"):
            try:
                family += [int(c) for c in children.read_text().split() if int(c) not in seen]
            except OSError:
                continue
    return False


def clean_env(**extra: str) -> dict[str, str]:
    """The current environment without SEMSEARCH_* settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEMSEARCH_")}
    env.update(extra)
    return env


@dataclass
class Service:
    module: str
    env: dict[str, str]
    log: Path
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self, *args: str) -> Service:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            python_module(self.module, *args),
            env=child_env(self.env),
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        return self

    def check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"{self.module} exited with {self.proc.returncode}:\n{self.log.read_text()[-4000:]}")

    def wait_http(self, url: str, headers: dict[str, str] | None = None, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                if httpx.get(url, headers=headers, timeout=2).status_code == 200:
                    self._check_port(httpx.URL(url).port)
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"{url} not ready after {timeout:.0f} s:\n{self.log.read_text()[-4000:]}")

    def wait_embedder(self, address: str, timeout: float = 60) -> None:
        client = EmbedderClient(address, timeout=5)
        deadline = time.monotonic() + timeout
        try:
            while True:
                self.check_alive()
                try:
                    client.info()
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
                    continue
                self._check_port(int(address.rsplit(":", 1)[1]))
                return
        finally:
            client.close()

    def _check_port(self, port: int | None) -> None:
        """The answer came from this service, not from whatever else listens on its port."""
        if port is None or self.proc is None or owns_port(self.proc.pid, port) is not False:
            return
        self.stop()
        raise PortTaken(f"port {port} answered, but another process listens on it; {self.module} could not bind it")

    def stop(self) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid


def on_a_free_port(start: Callable[[int], T], port: int | None = None) -> T:
    """`start(port)` on `port` (or a free one), and on another if something took it first."""
    for attempt in range(3):
        try:
            return start(port if port and attempt == 0 else free_port())
        except PortTaken:
            continue
    raise PortTaken("three ports in a row were taken before the service could bind one")


def start_embedder(log: Path, port: int | None = None, **env: str) -> tuple[Service, str]:
    def start(chosen: int) -> tuple[Service, str]:
        service = Service("semsearch.embedder", clean_env(SEMSEARCH_EMBEDDER_PORT=str(chosen), **env), log).start()
        address = f"127.0.0.1:{chosen}"
        service.wait_embedder(address)
        return service, address

    return on_a_free_port(start, port)


def api_env(data_dir: Path, port: int, embedder_addr: str, **extra: str) -> dict[str, str]:
    # Tests, eval and bench keep their corpora in temporary folders, outside any home directory;
    # the corpus-root rule has tests of its own that set it.
    extra.setdefault("SEMSEARCH_CORPUS_ROOT", "/")
    return clean_env(
        SEMSEARCH_DATA_DIR=str(data_dir),
        SEMSEARCH_PORT=str(port),
        SEMSEARCH_EMBEDDER_ADDR=embedder_addr,
        SEMSEARCH_URL=f"http://127.0.0.1:{port}",
        **extra,
    )


def start_api(data_dir: Path, embedder_addr: str, **extra: str) -> tuple[Service, dict[str, str]]:
    def start(port: int) -> tuple[Service, dict[str, str]]:
        env = api_env(data_dir, port, embedder_addr, **extra)
        service = Service("semsearch.api", env, data_dir / "api.log").start()
        headers = {"Authorization": f"Bearer {extra['SEMSEARCH_TOKEN']}"} if "SEMSEARCH_TOKEN" in extra else None
        service.wait_http(f"http://127.0.0.1:{port}/readyz", headers)
        return service, env

    return on_a_free_port(start)


def start_worker(env: dict[str, str], log: Path) -> Service:
    """An indexer worker for the API in `env`: it executes requested runs (`semsearch index`)."""
    return Service("semsearch.indexer", env, log).start("--worker")
