"""Every interface over the real services: REST endpoints, MCP tools (stdio and streamable HTTP),
CLI verbs, confinement of every read, grep against the indexer's file list, per-project setup."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from semsearch.version import __version__
from tests.conftest import SEMSEARCH, Stack
from tests.corpus import RETRY_REPO, write_tree
from tests.processes import Service, free_port

PROJECT = {
    "src/session.py": (
        "import time\n\n\n"
        "def refresh_session(client):\n"
        '    """Exchange the refresh token for a new access token."""\n'
        "    client.token = client.post('/oauth/token')\n"
        "    return client\n"
    ),
    "docs/guide.md": "# Guide\n\n## Deploying\n\nRun the migration, then roll the containers one by one.\n",
    "build/generated.py": "GENERATED_SECRET_MARKER = 'git ignores this build output'\n",
    "private/notes.txt": "INDEXIGNORED_MARKER lives in an .indexignore'd folder\n",
    ".env": "API_KEY=ENV_SECRET_MARKER\n",
    ".gitignore": "build/\n",
    ".indexignore": "private/\n",
}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, stack: Stack) -> Path:
    base = tmp_path_factory.mktemp("interfaces")
    root = base / "api"
    for rel, text in PROJECT.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    # A sibling whose name starts with the folder's: /x/api-secrets next to /x/api.
    (base / "api-secrets").mkdir()
    (base / "api-secrets" / "keys.txt").write_text("SIBLING_SECRET_MARKER\n")
    (base / "outside.txt").write_text("OUTSIDE_MARKER\n")
    (root / "docs" / "escape").symlink_to(base / "api-secrets")
    (root / "link-to-outside.txt").symlink_to(base / "outside.txt")
    stack.cli("add", str(root))
    stack.index()
    return root


def mcp_call(stack: Stack, tool: str, args: dict[str, Any], cwd: Path | None = None) -> tuple[bool, list[str]]:
    async def call() -> tuple[bool, list[str]]:
        params = StdioServerParameters(command=SEMSEARCH, args=["mcp"], env=stack.env, cwd=cwd)
        async with Client(params) as client:
            result = await client.call_tool(tool, args)
            return result.is_error, [c.text for c in result.content]  # type: ignore[union-attr]

    return anyio.run(call)


# --- REST ----------------------------------------------------------------------------


def test_rest_cat_reads_a_line_range(stack: Stack, project: Path) -> None:
    with stack.http() as http:
        full = http.get("/v1/files", params={"path": str(project / "src/session.py")}).json()
        part = http.get(
            "/v1/files", params={"path": str(project / "src/session.py"), "startLine": 4, "endLine": 5}
        ).json()
        bad = http.get("/v1/files", params={"path": str(project / "src/session.py"), "startLine": -1})
        reversed_range = http.get(
            "/v1/files", params={"path": str(project / "src/session.py"), "startLine": 5, "endLine": 2}
        )
    assert full["totalLines"] == 7 and full["relPath"] == "src/session.py" and full["folder"] == "api"
    assert part["text"].splitlines()[0] == "def refresh_session(client):" and part["endLine"] == 5
    assert bad.status_code == 422
    assert reversed_range.status_code == 400 and "before startLine" in reversed_range.json()["detail"]


@pytest.mark.parametrize(
    "make_path",
    [
        lambda root: str(root.parent / "outside.txt"),  # absolute path outside the corpus
        lambda root: str(root / "docs" / ".." / ".." / "outside.txt"),  # .. traversal
        lambda root: str(root / "link-to-outside.txt"),  # a symlink inside pointing outside
        lambda root: str(root / "docs" / "escape" / "keys.txt"),  # a symlinked directory inside
        lambda root: str(root.parent / "api-secrets" / "keys.txt"),  # prefix-sibling folder
        lambda root: str(root / "docs" / "%2e%2e" / ".." / "outside.txt"),  # URL-encoded dots
        lambda root: "relative/path.txt",
        lambda root: "/etc/passwd",
        lambda root: str(root / "build" / "generated.py"),  # git-ignored inside the folder
        lambda root: str(root / "private" / "notes.txt"),  # .indexignore'd
        lambda root: str(root / ".env"),  # a secret by name
    ],
)
def test_reads_outside_the_index_are_refused(stack: Stack, project: Path, make_path: Any) -> None:
    path = make_path(project)
    with stack.http() as http:
        response = http.get("/v1/files", params={"path": path})
    assert response.status_code == 403, (path, response.text)
    body = response.text
    for marker in ("OUTSIDE_MARKER", "SIBLING_SECRET_MARKER", "GENERATED_SECRET_MARKER", "ENV_SECRET_MARKER", "root:"):
        assert marker not in body
    assert "list_folders" in body or "not indexed" in body or "absolute" in body
    error, texts = mcp_call(stack, "cat_file", {"filePath": path})
    assert error and not any("MARKER" in t for t in texts)


def test_grep_sees_exactly_the_indexers_files(stack: Stack, project: Path) -> None:
    def grep(pattern: str, **params: Any) -> dict:
        with stack.http() as http:
            return http.post("/v1/grep", json={"pattern": pattern, **params}).json()  # type: ignore[no-any-return]

    for marker in ("GENERATED_SECRET_MARKER", "INDEXIGNORED_MARKER", "ENV_SECRET_MARKER", "OUTSIDE_MARKER"):
        assert grep(marker)["matches"] == [], marker
    found = grep("refresh_session")["matches"]
    assert [(m["relPath"], m["line"]) for m in found] == [("src/session.py", 4)]
    assert grep("REFRESH_SESSION", caseSensitive=True)["matches"] == []
    assert grep(r"def \w+\(client\)", regex=True)["matches"][0]["line"] == 4
    assert grep("roll the", fileGlob="*.md")["matches"][0]["relPath"] == "docs/guide.md"
    assert grep("roll the", fileGlob="*.py")["matches"] == []


def test_catastrophic_regex_is_bounded_and_bad_regex_is_a_4xx(stack: Stack, project: Path) -> None:
    with httpx.Client(base_url=stack.url, timeout=30) as http:
        evil = http.post("/v1/grep", json={"pattern": "(a+)+$", "regex": True})
        broken = http.post("/v1/grep", json={"pattern": "(unclosed", "regex": True})
        unknown = http.post("/v1/grep", json={"pattern": "x", "folder": "nope"})
    assert evil.status_code == 200
    assert broken.status_code == 400 and "RE2" in broken.json()["detail"]
    assert unknown.status_code == 404


def test_broken_globs_are_a_4xx_not_a_crash(stack: Stack, project: Path) -> None:
    # Found by the schemathesis run: a glob pathspec cannot compile used to be a 500.
    with stack.http() as http:
        grep = http.post("/v1/grep", json={"pattern": "x", "fileGlob": "[z-a]"})
        search = http.post("/v1/search", json={"query": "x", "pathGlob": "x[\\-.]"})
    for response in (grep, search):
        assert response.status_code == 400 and "invalid glob" in response.json()["detail"]


def test_gather_packs_markdown_with_headers_and_budget(stack: Stack, project: Path) -> None:
    with stack.http() as http:
        full = http.post("/v1/gather", json={"query": "exchange refresh token", "k": 2, "minScore": -1}).json()
        context = http.post(
            "/v1/gather", json={"query": "exchange refresh token", "k": 1, "contextLines": 2, "minScore": -1}
        ).json()
        tight = http.post(
            "/v1/gather", json={"query": "exchange refresh token", "k": 2, "maxTokens": 60, "minScore": -1}
        ).json()
    assert full["markdown"].startswith("### [1/2]  api  ·  src/session.py  ·  line ")
    assert "```python\n" in full["markdown"] and full["hits"] == 2
    assert context["hits"] == 1 and context["markdown"].startswith("### [1/1]")
    assert tight["leftOut"] >= 1 and "left out to stay within 60 tokens" in tight["markdown"]
    assert tight["tokens"] <= 60


def test_gather_context_lines_come_from_the_file_around_the_chunk(stack: Stack, project: Path) -> None:
    """The chunk is the `## Deploying` section (lines 3-5); two context lines bring in line 1, the
    `# Guide` heading, which no chunk of that section holds."""
    body = {"query": "roll the containers one by one", "k": 1, "pathGlob": ["docs/**"], "minScore": -1}
    with stack.http() as http:
        plain = http.post("/v1/gather", json=body).json()["markdown"]
        widened = http.post("/v1/gather", json=body | {"contextLines": 2}).json()["markdown"]
    assert "docs/guide.md  ·  line 3" in plain and "# Guide" not in plain.splitlines()
    assert "docs/guide.md  ·  line 1" in widened and "# Guide" in widened.splitlines()


def test_status_and_folders_report_counts(stack: Stack, project: Path) -> None:
    with stack.http() as http:
        status = http.get("/v1/status").json()
        folders = http.get("/v1/folders").json()
    assert status["chunks"] > 0 and status["indexBytes"] > 0 and status["embedder"]["ready"]
    api = next(f for f in folders if f["name"] == "api")
    assert api["files"] >= 3 and api["chunks"] >= 3 and api["lastIndexed"]


# --- MCP ------------------------------------------------------------------------------


def tool_calls(project: Path) -> dict[str, dict[str, Any]]:
    """One call of every tool (but index_status, which needs a run id), for stdio and HTTP alike."""
    return {
        "search": {"query": "exchange refresh token", "minScore": -1},
        "gather": {"query": "exchange refresh token", "k": 1, "contextLines": 1},
        "list_folders": {},
        "cat_file": {"filePath": str(project / "docs/guide.md"), "startLine": 3, "endLine": 5},
        "grep": {"pattern": "refresh_session", "fileGlob": "*.py"},
        "index": {"folder": "api"},
    }


async def call_all(client: Any, calls: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each tool once; every call must succeed. Returns the text parts per tool."""
    out: dict[str, Any] = {}
    for name, args in calls.items():
        result = await client.call_tool(name, args)
        assert not result.is_error, (name, result.content)
        out[name] = [c.text for c in result.content]
    return out


def with_worker(stack: Stack, log: str, run: Any) -> Any:
    """Runs the async `run` while an indexer worker claims requested runs (the `index` tool)."""
    worker = Service("semsearch.indexer", stack.env, stack.data_dir / log).start("--worker")
    try:
        return anyio.run(run)
    finally:
        worker.stop()


def test_every_mcp_tool_over_stdio(stack: Stack, project: Path) -> None:
    async def run() -> dict[str, Any]:
        params = StdioServerParameters(command=SEMSEARCH, args=["mcp"], env=stack.env)
        async with Client(params) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            out: dict[str, Any] = {"tools": tools, "version": client.server_info.version if client.server_info else ""}
            calls = tool_calls(project) | {
                "search": {"query": "exchange refresh token", "k": 3, "folder": "api", "minScore": -1}
            }
            out |= await call_all(client, calls)
            bad = await client.call_tool("search", {"query": "x", "kk": 3})
            out["unknown_argument"] = (bad.is_error, [c.text for c in bad.content])  # type: ignore[union-attr]
            return out

    out = with_worker(stack, "worker.log", run)
    assert set(out["tools"]) == {
        "search", "gather", "list_folders", "cat_file", "grep", "index", "index_status", "symbols", "outline", "explain"
    }  # fmt: skip
    for tool in out["tools"].values():
        assert tool.input_schema.get("additionalProperties") is False
        # Titles and hints: clients that auto-approve read-only tools need not ask about a search.
        assert tool.title and tool.annotations is not None and tool.annotations.open_world_hint is False
        assert tool.annotations.read_only_hint is (tool.name != "index")
    index_hints = out["tools"]["index"].annotations
    assert index_hints.destructive_hint is False and index_hints.idempotent_hint is True
    assert out["version"] == __version__
    hits = json.loads(out["search"][0])
    assert hits[0]["relPath"] == "src/session.py"
    assert set(hits[0]) >= {
        "filePath",
        "folder",
        "relPath",
        "startLine",
        "endLine",
        "text",
        "score",
        "cosine",
        "label",
        "stale",
    }
    assert out["gather"][0].startswith("### [1/1]  api  ·  src/session.py")
    assert any(f["name"] == "api" for f in json.loads(out["list_folders"][0]))
    assert out["cat_file"][0].startswith("api · docs/guide.md:3-5") and "## Deploying" in out["cat_file"][0]
    assert out["grep"][0] == "api · src/session.py:4  def refresh_session(client):"
    index_run = json.loads(out["index"][0])
    assert index_run["state"] == "done" and index_run["summary"]["filesProcessed"] == 0
    error, texts = out["unknown_argument"]
    assert error and "kk" in " ".join(texts)


def test_mcp_tool_errors_carry_the_apis_reason(stack: Stack, project: Path) -> None:
    """An agent is told why a call failed and what to do, not just `Error executing tool cat_file`."""

    async def run() -> dict[str, tuple[bool, str]]:
        params = StdioServerParameters(command=SEMSEARCH, args=["mcp"], env=stack.env)
        calls: dict[str, dict[str, Any]] = {
            "cat_file": {"filePath": "/etc/passwd"},
            "index_status": {"runId": "nope"},
            "search": {"query": "x", "exclude": ",".join(f"f{i}" for i in range(40))},
            "grep": {"pattern": "(unclosed", "regex": True},
            "index": {"folder": "not-a-folder"},
        }
        out = {}
        async with Client(params) as client:
            for tool, args in calls.items():
                result = await client.call_tool(tool, args)
                out[tool] = (result.is_error, " ".join(getattr(c, "text", "") for c in result.content))
        return out

    out = anyio.run(run)
    assert all(error for error, _ in out.values()), out
    assert "outside the indexed folders" in out["cat_file"][1] and "list_folders" in out["cat_file"][1]
    assert "no index run 'nope'" in out["index_status"][1]
    assert "invalid arguments: exclude" in out["search"][1] and "32" in out["search"][1]
    assert "invalid regular expression" in out["grep"][1]
    assert "not a registered folder" in out["index"][1]


def test_index_status_tool_and_cli(api_factory: Any, tmp_path: Path) -> None:
    stack = api_factory(worker=False)  # nothing claims the run: it stays queued, and the tool says why
    (tmp_path / "queued").mkdir()
    stack.cli("add", str(tmp_path / "queued"))
    with stack.http() as http:
        run = http.post("/v1/runs", json={"folder": "queued"}).json()
    error, texts = mcp_call(stack, "index_status", {"runId": run["id"]})
    assert not error and json.loads(texts[0])["state"] == "queued" and "index_status" in json.loads(texts[0])["hint"]
    cli = json.loads(stack.cli("index-status", run["id"], "--json").stdout)
    assert cli["id"] == run["id"]
    missing = stack.cli("index-status", "nope", check=False)
    assert missing.returncode == 2 and "no index run 'nope'" in missing.stderr


def test_streamable_http_needs_the_token_and_checks_origin(stack: Stack, project: Path) -> None:
    port = free_port()
    env = stack.env | {"SEMSEARCH_MCP_TOKEN": "mcp-secret", "SEMSEARCH_MCP_PORT": str(port)}
    bridge = Service("semsearch.mcp_bridge", env, stack.data_dir / "mcp-http.log").start("--http")
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        for _ in range(300):  # until the port answers (any status)
            bridge.check_alive()
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        assert httpx.post(url, json={}).status_code == 401
        evil_origin = httpx.post(
            url,
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={
                "Authorization": "Bearer mcp-secret",
                "Origin": "http://evil.example",
                "Accept": "application/json, text/event-stream",
            },
        )
        assert evil_origin.status_code in (400, 403, 421)

        async def run() -> dict[str, list[str]]:
            http_client = httpx.AsyncClient(headers={"Authorization": "Bearer mcp-secret"})
            from mcp.client.streamable_http import streamable_http_client

            calls = tool_calls(project)
            out: dict[str, list[str]] = {}
            async with Client(streamable_http_client(url, http_client=http_client)) as client:  # type: ignore[arg-type]
                out |= await call_all(client, calls)
                run_id = json.loads(out["index"][0])["id"]
                status = await client.call_tool("index_status", {"runId": run_id})
                out["index_status"] = [c.text for c in status.content]  # type: ignore[union-attr]
            return out

        out = with_worker(stack, "worker-http.log", run)
        assert json.loads(out["search"][0])[0]["relPath"] == "src/session.py"
        assert out["gather"][0].startswith("### [1/1]  api  ·  src/session.py")
        assert any(f["name"] == "api" for f in json.loads(out["list_folders"][0]))
        assert "## Deploying" in out["cat_file"][0]
        assert out["grep"][0] == "api · src/session.py:4  def refresh_session(client):"
        assert json.loads(out["index"][0])["state"] == "done"
        assert json.loads(out["index_status"][0])["state"] == "done"
    finally:
        bridge.stop()


def test_mcp_http_refuses_public_bind_without_token(stack: Stack) -> None:
    env = {k: v for k, v in stack.env.items() if k not in ("SEMSEARCH_TOKEN", "SEMSEARCH_MCP_TOKEN")}
    result = subprocess.run(
        [sys.executable, "-m", "semsearch.mcp_bridge", "--http", "--host", "0.0.0.0", "--port", str(free_port())],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode != 0 and "without a token" in result.stderr


# --- CLI parity and per-project setup ---------------------------------------------------


def test_cli_verbs_speak_json(stack: Stack, project: Path) -> None:
    gathered = json.loads(stack.cli("gather", "exchange refresh token", "-k", "1", "--json").stdout)
    assert gathered["markdown"].startswith("### [1/1]")
    folders = json.loads(stack.cli("folders", "--json").stdout)
    assert any(f["name"] == "api" for f in folders)
    cat = json.loads(stack.cli("cat", str(project / "src/session.py"), "--start", "4", "--end", "4", "--json").stdout)
    assert cat["text"] == "def refresh_session(client):"
    grep = json.loads(stack.cli("grep", "refresh_session", "--json").stdout)
    assert grep["matches"][0]["line"] == 4
    assert stack.cli("grep", "NO_SUCH_TEXT_ANYWHERE", check=False).returncode == 1
    refused = stack.cli("cat", str(project / ".env"), check=False)
    assert refused.returncode == 2 and "ENV_SECRET_MARKER" not in refused.stdout + refused.stderr
    config = json.loads(stack.cli("config", "--json").stdout)
    data_dir = next(s for s in config["settings"] if s["name"] == "data_dir")
    assert data_dir["source"] == "env" and data_dir["value"] == str(stack.data_dir)
    assert "_SEMSEARCH_COMPLETE" in stack.cli("completion", "bash").stdout


def test_scaffold_writes_project_files_and_keeps_edits(stack: Stack, tmp_path: Path) -> None:
    root = tmp_path / "shop"
    (root / "src").mkdir(parents=True)
    (root / "src" / "cart.py").write_text("def add_to_cart(item):\n    return item\n")
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {"other": {"command": "other-tool"}}}))
    out = stack.cli("scaffold", str(root), "--include", "src/**", "--desc", "Shop code", "--yes").stdout
    assert "wrote" in out
    project = json.loads((root / ".semsearch.json").read_text())
    mcp = json.loads((root / ".mcp.json").read_text())
    assert (
        project["folders"] == ["shop"]
        and project["include"] == ["src/**"]
        and project["toolDescription"] == "Shop code"
    )
    assert mcp["mcpServers"]["other"] == {"command": "other-tool"}
    ours = mcp["mcpServers"]["semsearch"]  # one server name, the one `claude mcp add semsearch` gives
    assert ours["args"] == ["mcp"]
    assert Path(shutil.which(ours["command"], path=stack.env["PATH"]) or ours["command"]).is_file()
    assert "`symbols`" in (root / "CLAUDE.md").read_text()
    assert ".semsearch.local.json" in (root / ".gitignore").read_text()
    # A user edit survives a second run; a flag overwrites only its own key.
    project["toolDescription"] = "Edited by hand"
    project["serverName"] = "shop-code"
    (root / ".semsearch.json").write_text(json.dumps(project))
    stack.cli("scaffold", str(root), "--include", "src/**/*.py", "--yes")
    again = json.loads((root / ".semsearch.json").read_text())
    assert again["toolDescription"] == "Edited by hand" and again["serverName"] == "shop-code"
    assert again["include"] == ["src/**/*.py"]
    renamed = json.loads((root / ".mcp.json").read_text())["mcpServers"]
    assert set(renamed) == {"other", "shop-code"}  # ours under its new name, once
    assert (root / ".gitignore").read_text().count(".semsearch.local.json") == 1
    stack.index(str(root))

    async def tools_from_subdirectory() -> tuple[str, str]:
        params = StdioServerParameters(command=SEMSEARCH, args=["mcp"], env=stack.env, cwd=root / "src")
        async with Client(params) as client:
            listed = (await client.list_tools()).tools
            description = next(t.description or "" for t in listed if t.name == "search")
            name = client.server_info.name if client.server_info else ""
            return name, description

    name, description = anyio.run(tools_from_subdirectory)
    # The project's words describe the corpus, labelled as the project's, after semsearch's own.
    assert name == "shop-code" and "The project describes this corpus as: Edited by hand" in description
    assert description.startswith("Search the user's local folders")


def test_scaffold_sets_up_each_agent_with_its_own_files_and_indexes(stack: Stack, tmp_path: Path) -> None:
    """Cursor and Codex get their own MCP config and instruction file; the instructions are a
    section that a second run replaces (the user's own text around it stays); the command is an
    absolute path when the agent's PATH would not find this installation; the folder is indexed."""
    root = tmp_path / "harbour"
    root.mkdir()
    (root / "tides.md").write_text("# Tides\n\nHigh water comes an hour later each day.\n")
    (root / "AGENTS.md").write_text("# House rules\n\nRun the tests before pushing.\n")
    no_venv = {**stack.env, "PATH": "/usr/bin:/bin"}
    runner = Stack(stack.url, stack.embedder_addr, stack.data_dir, no_venv)
    for _ in range(2):
        out = runner.cli("scaffold", str(root), "--agent", "cursor", "--agent", "codex", "--yes").stdout
    assert "Queued index run" in out and "[mcp_servers.semsearch]" in out
    cursor = json.loads((root / ".cursor" / "mcp.json").read_text())["mcpServers"]["semsearch"]
    assert Path(cursor["command"]).is_absolute() and Path(cursor["command"]).is_file(), cursor
    assert "alwaysApply: true" in (root / ".cursor" / "rules" / "semsearch.mdc").read_text()
    agents = (root / "AGENTS.md").read_text()
    assert agents.startswith("# House rules") and agents.count("semsearch:begin") == 1 and "`grep`" in agents
    assert not (root / ".mcp.json").exists() and not (root / "CLAUDE.md").exists()  # only the agents asked for
    run_id = out.split("Queued index run ")[1].split()[0]
    assert json.loads(stack.cli("index-status", run_id, "--wait", "60", "--json").stdout)["state"] == "done"
    with stack.http() as http:
        hits = http.post("/v1/search", json={"query": "when is high water", "k": 1}).json()["hits"]
    assert hits[0]["relPath"] == "tides.md"


def test_path_boosts_from_the_cli_and_from_a_projects_file_over_mcp(stack: Stack, tmp_path: Path) -> None:
    """`--boost` for one query; `pathBoosts` in `.semsearch.json` for every search the bridge makes."""
    repo = tmp_path / "retrying"
    write_tree(repo, RETRY_REPO)
    stack.cli("add", str(repo))
    stack.index(str(repo))
    query = ["search", "test retry backoff", "--folder", "retrying", "--min-score", "-1", "--json"]
    with stack.http() as http:
        body = {"query": "test retry backoff", "folder": ["retrying"], "minScore": -1, "pathBoosts": {}}
        unboosted = http.post("/v1/search", json=body).json()["hits"]
    assert unboosted[0]["relPath"] == "tests/test_retry.py" and unboosted[0].get("boost") is None
    plain = json.loads(stack.cli(*query).stdout)["hits"]  # the server's default: tests and examples at 0.8
    assert [h["boost"] for h in plain if h["relPath"].startswith("tests/")] == [0.8]
    boosted = json.loads(stack.cli(*query, "--boost", "**/tests/**=0.5").stdout)["hits"]
    assert boosted[0]["relPath"] == "src/retry.py"
    assert [h["boost"] for h in boosted if h["relPath"].startswith("tests/")] == [0.5]
    # A project's boosts replace the server's: here its sources go down, so its test comes first.
    (repo / ".semsearch.json").write_text(json.dumps({"folders": ["retrying"], "pathBoosts": {"src/**": 0.5}}))
    failed, texts = mcp_call(stack, "search", {"query": "test retry backoff", "minScore": -1}, cwd=repo)
    assert not failed and json.loads(texts[0])[0]["relPath"] == "tests/test_retry.py"
