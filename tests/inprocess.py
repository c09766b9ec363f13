"""The services in this process, on real loopback ports: the API app under uvicorn in a thread and
an indexer worker in a thread (as `semsearch mcp --standalone` runs them), the CLI through click's
runner and the MCP bridge through the SDK's in-memory client. Real HTTP, real gRPC, real LanceDB
and the real model; what is saved is a Python start and the imports for each (the tests that need
a process — kills, memory, signals, stdio — use `tests.processes`)."""

from __future__ import annotations

import subprocess
import traceback
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
from click.testing import CliRunner
from mcp.client.client import Client

from semsearch.cli import main as cli_main
from semsearch.config import settings_from
from semsearch.mcp_bridge.server import build_server
from semsearch.standalone import ApiThread, WorkerThread

__all__ = ["ApiThread", "WorkerThread", "call_mcp", "run_cli"]


def run_cli(args: Sequence[str], env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """`semsearch ARGS` through click's runner with `env` as its environment; the result shaped as a
    finished process's (exit code, stdout, stderr), an unexpected exception as its traceback."""
    result = CliRunner().invoke(cli_main, list(args), env=dict(env), catch_exceptions=True)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
    return subprocess.CompletedProcess(["semsearch", *args], result.exit_code, result.stdout, stderr)


def call_mcp(env: Mapping[str, str], calls: Sequence[tuple[str, dict[str, Any]]]) -> list[Any]:
    """Each (tool, arguments) called in order on the bridge `semsearch mcp` would build from `env`,
    through the official SDK's in-memory client."""
    server = build_server(settings_from(env))

    async def run() -> list[Any]:
        async with Client(server) as client:
            return [await client.call_tool(name, arguments) for name, arguments in calls]

    return anyio.run(run)
