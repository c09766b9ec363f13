"""The test harness's own guard: a service whose port another process took between `free_port()`
and its bind is noticed (the other process answered its readiness check once, and the test then
talked to a stranger), and the start helpers take another port."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.processes import PortTaken, Service, api_env, owns_port

pytestmark = pytest.mark.e2e


class Ready(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # a stranger that says it is ready
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def stranger() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Ready)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_the_listening_socket_is_found_on_its_owner_only(stranger: int) -> None:
    assert owns_port(os.getpid(), stranger) is True
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        assert owns_port(os.getpid(), unused.getsockname()[1]) is None  # nothing listens there
    other = subprocess.Popen(["sleep", "30"])  # argv list: no shell
    try:
        assert owns_port(other.pid, stranger) is False
    finally:
        other.kill()
        other.wait()


def test_a_service_answered_for_by_another_process_is_refused(stranger: int, tmp_path: Path) -> None:
    api = Service("semsearch.api", api_env(tmp_path, stranger, "127.0.0.1:9"), tmp_path / "api.log").start()
    try:
        with pytest.raises(PortTaken, match=f"port {stranger} answered, but another process listens"):
            api.wait_http(f"http://127.0.0.1:{stranger}/readyz", timeout=30)
        assert api.proc is not None and api.proc.poll() is not None  # and it was stopped
    finally:
        api.stop()
