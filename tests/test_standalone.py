"""`semsearch mcp --standalone FOLDER`: the agent's one child process holds the model, the API and
a worker. Driven over stdio by both official SDKs (Python here, TypeScript through tests/ts_client)
as an agent spawns it: the folder is registered and indexed, searches find it, nothing but the
protocol reaches stdout, and the process ends when the client goes."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from tests.conftest import SEMSEARCH
from tests.processes import clean_env, free_port

pytestmark = pytest.mark.e2e
CLIENT = Path(__file__).parent / "ts_client"


def harbour(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    root = tmp_path / "harbour"
    root.mkdir()
    (root / "pilots.md").write_text("# Pilots\n\nThe harbour pilot boards incoming ships at the outer buoy.\n")
    (root / "tides.py").write_text("def high_water(day: int) -> float:\n    return 6.2 + day * 0.8\n")
    env = clean_env(SEMSEARCH_DATA_DIR=str(tmp_path / "data"), SEMSEARCH_PORT=str(free_port()),
                    SEMSEARCH_CORPUS_ROOT=str(tmp_path))  # fmt: skip
    return root, env


def test_one_process_registers_indexes_and_answers_over_stdio(tmp_path: Path) -> None:
    root, env = harbour(tmp_path)
    params = StdioServerParameters(command=SEMSEARCH, args=["mcp", "--standalone", str(root)], env=env)

    async def session() -> tuple[Any, Any, Any, int]:
        async with Client(params) as client:
            indexed = await client.call_tool("index", {})
            found = await client.call_tool("search", {"query": "who boards the ships", "k": 3})
            folders = await client.call_tool("list_folders", {})
            children = subprocess.run(["pgrep", "-f", "mcp --standalone"], capture_output=True, text=True).stdout
            return indexed, found, folders, len(children.split())

    indexed, found, folders, processes = anyio.run(session)
    assert json.loads(indexed.content[0].text)["state"] == "done", indexed.content
    hits = json.loads(found.content[0].text)
    assert hits and hits[0]["relPath"] == "pilots.md", hits
    assert [f["path"] for f in json.loads(folders.content[0].text)] == [str(root)]
    assert processes == 1  # the model, the API and the worker are threads of the one process
    # The index outlives the session: a second start reuses it and registers nothing twice.
    again = anyio.run(session)
    assert [f["path"] for f in json.loads(again[2].content[0].text)] == [str(root)]


@pytest.mark.skipif(
    shutil.which("node") is None or not (CLIENT / "node_modules").is_dir(),
    reason="Node.js and `npm ci` in tests/ts_client (make install does it)",
)
def test_the_typescript_sdk_drives_the_standalone_process(tmp_path: Path) -> None:
    root, env = harbour(tmp_path)
    plan = {
        "transport": "stdio", "command": SEMSEARCH, "args": ["mcp", "--standalone", str(root)], "env": env,
        "calls": [
            {"name": "index", "arguments": {}},
            {"name": "search", "arguments": {"query": "when is high water", "k": 2}},
        ],
    }  # fmt: skip
    run = subprocess.run(["node", str(CLIENT / "client.mjs")], input=json.dumps(plan), capture_output=True,
                         text=True, timeout=180, check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads(run.stdout)["results"]
    assert not results[1]["isError"], results[1]
    assert json.loads(results[0]["text"][0])["state"] == "done", results[0]
    assert json.loads(results[1]["text"][0])[0]["relPath"] == "tides.py", results[1]


def test_folders_without_standalone_and_standalone_over_http_are_refused(tmp_path: Path) -> None:
    root, env = harbour(tmp_path)
    for args, says in ((["mcp", str(root)], "FOLDERS go with --standalone"),
                       (["mcp", "--standalone", "--http"], "drop --http")):  # fmt: skip
        run = subprocess.run([SEMSEARCH, *args], env=env, capture_output=True, text=True, timeout=60, check=False)
        assert run.returncode == 2 and says in run.stderr, run.stderr
