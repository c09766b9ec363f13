"""The CLI as a person uses it: `serve` runs and stops cleanly (processes); errors are one
readable line (through click's runner, in this process)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import SEMSEARCH, base_env, free_port
from tests.inprocess import run_cli


def test_unreachable_api_is_one_line_naming_the_fix(tmp_path: Path) -> None:
    env = base_env(tmp_path, free_port(), "127.0.0.1:1")
    for args in (["list"], ["search", "anything"], ["status"], ["add", str(tmp_path)]):
        result = run_cli(args, env)
        assert result.returncode == 1, args
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert "not reachable" in lines[0] and "semsearch serve" in lines[0]


def test_index_without_api_prints_json_summary_and_fails(tmp_path: Path) -> None:
    env = base_env(tmp_path, free_port(), "127.0.0.1:1")
    result = run_cli(["index"], env)
    assert result.returncode == 1
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["filesProcessed"] == 0 and summary["errors"]


@pytest.mark.e2e  # starts processes
def test_serve_starts_both_services_and_stops_on_sigint(tmp_path: Path) -> None:
    api_port, embedder_port = free_port(), free_port()
    env = base_env(tmp_path, api_port, f"127.0.0.1:{embedder_port}")
    env.pop("SEMSEARCH_EMBEDDER_ADDR")
    proc = subprocess.Popen(
        [SEMSEARCH, "serve", "--port", str(api_port), "--embedder-port", str(embedder_port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90
        status = None
        while time.monotonic() < deadline:
            status = subprocess.run([SEMSEARCH, "status"], env=env, capture_output=True, text=True, timeout=30)
            if status.returncode == 0:
                break
            time.sleep(0.5)
        assert status is not None and status.returncode == 0, status.stderr if status else "no status"
        assert "all-MiniLM-L6-v2-onnx-int8+int8-matmul" in status.stdout
        assert "indexes   vectors: flat, no BM25 index yet" in status.stdout  # nothing indexed yet
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    # Both children are gone: nothing answers on either port.
    for port in (api_port, embedder_port):
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
            raise AssertionError(f"something still listens on {port}")
        except httpx.TransportError:
            pass


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["gather", "x", "--max-tokens", "10"], "max_tokens"),
        (["grep", "x", "-m", "5000"], "max_results"),
        (["search", "x", "-k", "0"], "k"),
        (["add", "/tmp", "--name", "two words"], "name"),
        (["search", "x", "--boost", "tests"], "GLOB=FACTOR"),
        (["search", "x", "--boost", "**/tests/**=0"], "path_boosts"),
    ],
)
def test_invalid_arguments_are_one_line_naming_the_problem(tmp_path: Path, args: list[str], named: str) -> None:
    env = base_env(tmp_path, free_port(), "127.0.0.1:1")
    result = run_cli(args, env)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and named in lines[0] and "Traceback" not in result.stderr, result.stderr
