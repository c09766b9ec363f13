"""The MCP bridge driven by a client we did not write: the official TypeScript SDK
(`@modelcontextprotocol/sdk`, pinned in tests/ts_client, installed by `make install` with
`npm ci`), over stdio and streamable HTTP. What it sees is what most agents see."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from semsearch.version import __version__
from tests.conftest import SEMSEARCH, Stack
from tests.processes import Service, free_port

CLIENT = Path(__file__).parent / "ts_client"
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        shutil.which("node") is None or not (CLIENT / "node_modules").is_dir(),
        reason="Node.js and `npm ci` in tests/ts_client (make install does it)",
    ),
]


def ts_client(plan: dict[str, Any]) -> dict[str, Any]:
    run = subprocess.run(["node", str(CLIENT / "client.mjs")], input=json.dumps(plan), capture_output=True,
                         text=True, timeout=120, check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, stack: Stack) -> Path:
    root = tmp_path_factory.mktemp("ts") / "harbour"
    root.mkdir()
    (root / "pilots.md").write_text("# Pilots\n\nThe harbour pilot boards incoming ships at the outer buoy.\n")
    # Real TypeScript nobody here wrote, for symbols and outline: eventsource-parser's parser.
    shutil.copy(CLIENT / "node_modules" / "eventsource-parser" / "src" / "parse.ts", root / "parse.ts")
    stack.cli("add", str(root))
    stack.index()
    return root


def test_typescript_client_over_stdio(stack: Stack, project: Path) -> None:
    out = ts_client({
        "transport": "stdio", "command": SEMSEARCH, "args": ["mcp"], "env": stack.env,
        "calls": [
            {"name": "search", "arguments": {"query": "who boards the ships", "k": 3, "minScore": -1}},
            {"name": "cat_file", "arguments": {"filePath": "/etc/passwd"}},
            {"name": "index_status", "arguments": {"runId": "nope"}},
            {"name": "grep", "arguments": {"pattern": "(unclosed", "regex": True}},
            {"name": "search", "arguments": {"query": "x", "kk": 3}},
            {"name": "list_folders", "arguments": {}},
            {"name": "grep", "arguments": {"pattern": "outer buoy"}},
            {"name": "search", "arguments": {"query": "zzzz qqqq", "minScore": 0.99}},
            {"name": "gather", "arguments": {"query": "pilot", "maxTokens": 10}},
        ],
    })  # fmt: skip
    assert out["serverInfo"]["version"] == __version__
    tools = {t["name"]: t for t in out["tools"]}
    assert set(tools) == {
        "search", "gather", "list_folders", "cat_file", "grep", "index", "index_status", "symbols", "outline", "explain"
    }  # fmt: skip
    for name, tool in tools.items():
        hints = tool["annotations"]
        assert tool["title"] and hints["openWorldHint"] is False, name
        assert hints["readOnlyHint"] is (name != "index"), name
        assert tool["inputSchema"].get("additionalProperties") is False, name
    assert tools["index"]["annotations"]["idempotentHint"] is True
    assert tools["index"]["annotations"]["destructiveHint"] is False
    search, cat, status, grep, unknown, folders, found, empty, small = out["results"]
    assert not search["isError"] and json.loads(search["text"][0])[0]["relPath"] == "pilots.md"
    # Structure beside the text, checked by the TypeScript client against the outputSchema where one is
    # declared (search, list_folders: what a client reads as structure); the others stay small in
    # tools/list and still return structuredContent.
    for name in ("search", "list_folders"):
        assert tools[name].get("outputSchema", {}).get("type") == "object", name
    assert all("outputSchema" not in tools[name] for name in ("grep", "index", "index_status", "symbols"))
    assert set(tools["search"]["outputSchema"]["properties"]) == {"hits", "message", "queryNote", "coverage"}
    assert search["structuredContent"]["hits"][0]["relPath"] == "pilots.md"
    assert {"filePath", "startLine", "endLine", "score", "cosine", "label", "stale"} <= set(
        search["structuredContent"]["hits"][0]
    )
    assert found["structuredContent"]["matches"][0]["line"] == 3 and found["text"][0].startswith(
        "harbour · pilots.md:3"
    )
    assert empty["structuredContent"] == {"hits": [], "message": empty["text"][1], "queryNote": None, "coverage": None}
    assert "threshold" in empty["text"][1]
    assert folders["structuredContent"]["folders"][0]["name"] == "harbour"
    # Every refusal reaches the agent with the API's reason and what to do.
    assert cat["isError"] and "outside the indexed folders" in cat["text"][0] and "list_folders" in cat["text"][0]
    assert status["isError"] and "no index run 'nope'" in status["text"][0]
    assert grep["isError"] and "invalid regular expression '(unclosed': missing ): (unclosed;" in grep["text"][0]
    assert small["isError"] and "maxTokens" in small["text"][0] and "greater than or equal to 50" in small["text"][0]
    assert "errors.pydantic.dev" not in small["text"][0]  # no link out in an argument error
    assert unknown["isError"] and "kk" in " ".join(unknown["text"])
    assert not folders["isError"] and json.loads(folders["text"][0])[0]["name"] == "harbour"


def test_typescript_client_symbols_and_outline(stack: Stack, project: Path) -> None:
    out = ts_client({
        "transport": "stdio", "command": SEMSEARCH, "args": ["mcp"], "env": stack.env,
        "calls": [
            {"name": "symbols", "arguments": {"name": "createParser"}},
            {"name": "symbols", "arguments": {"name": "parseLine", "kind": "function"}},
            {"name": "outline", "arguments": {"filePath": str(project / "parse.ts")}},
            {"name": "outline", "arguments": {"filePath": "/etc/hostname"}},
            {"name": "symbols", "arguments": {"name": "x", "limit": 0}},
        ],
    })  # fmt: skip
    tools = {t["name"]: t for t in out["tools"]}
    for name in ("symbols", "outline"):  # structuredContent without an outputSchema (tools/list stays small)
        assert tools[name]["annotations"]["readOnlyHint"] is True and "outputSchema" not in tools[name]
    exact, nested, outline, refused, invalid = out["results"]
    assert not exact["isError"] and exact["structuredContent"]["symbols"][0]["symbolPath"] == "createParser"
    assert exact["text"][0].startswith("harbour · parse.ts:") and "function createParser" in exact["text"][0]
    assert nested["structuredContent"]["symbols"][0]["symbolPath"] == "createParser › parseLine"
    paths = [s["symbolPath"] for s in outline["structuredContent"]["symbols"]]
    assert paths.index("createParser") < paths.index("createParser › feed")
    assert outline["text"][0].splitlines()[0] == "harbour · parse.ts"
    assert refused["isError"] and "outside the indexed folders" in refused["text"][0]
    assert invalid["isError"] and "limit" in invalid["text"][0]


def test_typescript_client_over_streamable_http(stack: Stack, project: Path) -> None:
    port = free_port()
    env = stack.env | {"SEMSEARCH_MCP_TOKEN": "ts-client-secret", "SEMSEARCH_MCP_PORT": str(port)}
    bridge = Service("semsearch.mcp_bridge", env, stack.data_dir / "mcp-ts.log").start("--http")
    try:
        _wait_port(bridge, port)
        plan = {"transport": "http", "url": f"http://127.0.0.1:{port}/mcp",
                "headers": {"Authorization": "Bearer ts-client-secret"},
                "calls": [{"name": "search", "arguments": {"query": "harbour pilot", "k": 1, "minScore": -1}},
                          {"name": "cat_file", "arguments": {"filePath": "/etc/shadow"}}]}  # fmt: skip
        out = ts_client(plan)
    finally:
        bridge.stop()
    search, cat = out["results"]
    assert json.loads(search["text"][0])[0]["relPath"] == "pilots.md"
    assert cat["isError"] and "outside the indexed folders" in cat["text"][0]


def _wait_port(service: Service, port: int) -> None:
    import socket
    import time

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        service.check_alive()
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError("the MCP HTTP bridge did not listen")
