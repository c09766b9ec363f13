"""Symbols and outlines over REST, MCP and the CLI, on real code nobody here wrote, in six
languages: Python's own `json` package, express (JavaScript) and eventsource-parser
(TypeScript) from the TypeScript client's npm install, git's persistent-https helper (Go) and
git-subtree (Bash) from Debian's git package, and CPython's `object.h` (C).

Each test copies what it needs into its own folder, so it runs alone and in any order.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from tests.conftest import SEMSEARCH, Stack

NODE = Path(__file__).parent / "ts_client" / "node_modules"
GIT_CONTRIB = Path("/usr/share/doc/git/contrib")
SOURCES: dict[str, Path] = {
    "python/json": Path(json.__file__).parent,
    "javascript/express": NODE / "express" / "lib",
    "typescript/eventsource-parser": NODE / "eventsource-parser" / "src",
    "go/persistent-https": GIT_CONTRIB / "persistent-https",
    "bash/git-subtree.sh": GIT_CONTRIB / "subtree" / "git-subtree.sh",
    "c/object.h": Path(sysconfig.get_paths()["include"]) / "object.h",
}


def copy_sources(root: Path) -> Path:
    for rel, source in SOURCES.items():
        if not source.exists():
            pytest.skip(f"{source} is not installed (make install and Debian's git package provide it)")
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.d.ts", "*.map"))
        else:
            shutil.copy(source, target)
    return root


@pytest.fixture(scope="module")
def repos(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = copy_sources(tmp_path_factory.mktemp("symbols") / "repos")
    stack.cli("add", str(root), "--name", "repos")
    stack.index()
    return root


def lookup(stack: Stack, **params: Any) -> dict[str, Any]:
    with stack.http() as http:
        response = http.get("/v1/symbols", params=params)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("name", "kind", "symbol_path", "rel_path"),
    [
        ("JSONDecoder", "class", "JSONDecoder", "python/json/decoder.py"),
        ("raw_decode", "method", "JSONDecoder › raw_decode", "python/json/decoder.py"),
        ("createApplication", "function", "createApplication", "javascript/express/express.js"),
        ("listen", "method", "app › listen", "javascript/express/application.js"),
        ("createParser", "function", "createParser", "typescript/eventsource-parser/parse.ts"),
        ("resolveArgs", "method", "Client › resolveArgs", "go/persistent-https/client.go"),
        ("cache_setup", "function", "cache_setup", "bash/git-subtree.sh"),
        ("Py_IS_TYPE", "function", "Py_IS_TYPE", "c/object.h"),
    ],
)
def test_a_definition_is_found_by_its_exact_name(
    stack: Stack, repos: Path, name: str, kind: str, symbol_path: str, rel_path: str
) -> None:
    best = lookup(stack, name=name)["symbols"][0]
    assert (best["name"], best["kind"], best["symbolPath"], best["relPath"]) == (name, kind, symbol_path, rel_path)
    lines = (repos / rel_path).read_text().splitlines()
    assert name in lines[best["startLine"] - 1] or name in best["signature"]  # the line of its definition
    assert best["endLine"] >= best["startLine"] and best["filePath"] == str(repos / rel_path)
    assert best["stale"] is False


def test_ranking_exact_then_prefix_then_near_misses(stack: Stack, repos: Path) -> None:
    names = [s["name"] for s in lookup(stack, name="scanstring")["symbols"]]
    assert names[0] == "scanstring" or names[0] == "py_scanstring"
    decoders = [s["name"] for s in lookup(stack, name="JSONDecode")["symbols"]]
    assert decoders[:2] == ["JSONDecodeError", "JSONDecoder"] or decoders[:2] == ["JSONDecoder", "JSONDecodeError"]
    typo = lookup(stack, name="createParsr")["symbols"]
    assert typo and typo[0]["name"] == "createParser"  # a near miss still finds it
    assert lookup(stack, name="zzzqqq_nothing")["message"].startswith("no symbol named like 'zzzqqq_nothing'")


def test_qualified_names_and_kinds_narrow_the_answer(stack: Stack, repos: Path) -> None:
    (decode,) = [s for s in lookup(stack, name="JSONDecoder.decode")["symbols"] if s["name"] == "decode"]
    assert decode["symbolPath"] == "JSONDecoder › decode" and decode["kind"] == "method"
    go = lookup(stack, name="Client::Run")["symbols"]
    assert go[0]["relPath"] == "go/persistent-https/client.go" and go[0]["symbolPath"] == "Client › Run"
    only_classes = lookup(stack, name="JSON", kind=["class"])["symbols"]
    assert only_classes and {s["kind"] for s in only_classes} == {"class"}


def test_outline_lists_a_files_definitions_in_order(stack: Stack, repos: Path) -> None:
    with stack.http() as http:
        response = http.get("/v1/outline", params={"path": str(repos / "python/json/decoder.py")})
    assert response.status_code == 200, response.text
    outline = response.json()
    paths = [s["symbolPath"] for s in outline["symbols"]]
    starts = [s["startLine"] for s in outline["symbols"]]
    assert starts == sorted(starts)
    assert paths.index("JSONDecoder") < paths.index("JSONDecoder › __init__") < paths.index("JSONDecoder › decode")
    assert {"JSONDecodeError", "py_scanstring", "JSONObject", "JSONArray"} <= set(paths)


def test_outline_is_confined_like_a_read(stack: Stack, repos: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere.py").write_text("def secret_helper():\n    pass\n")
    ignored = repos / "python" / "json" / ".env"  # never indexed: a credential file by its name
    ignored.write_text("def ignored_helper():\n    pass\n")
    with stack.http() as http:
        outside = http.get("/v1/outline", params={"path": str(tmp_path / "elsewhere.py")})
        hidden = http.get("/v1/outline", params={"path": str(ignored)})
        relative = http.get("/v1/outline", params={"path": "python/json/decoder.py"})
    assert outside.status_code == 403 and "outside the indexed folders" in outside.json()["detail"]
    assert hidden.status_code == 403 and "is not indexed" in hidden.json()["detail"]
    assert relative.status_code == 403 and "not an absolute path" in relative.json()["detail"]
    ignored.unlink()


def test_a_files_symbols_are_replaced_with_its_chunks(api_factory: Any, tmp_path: Path) -> None:
    stack = api_factory()
    root = tmp_path / "lib"
    root.mkdir()
    module = root / "tokens.py"
    module.write_text("class Vault:\n    def refresh_token(self):\n        return 1\n")
    stack.cli("add", str(root))
    stack.index()
    assert lookup(stack, name="refresh_token")["symbols"][0]["symbolPath"] == "Vault › refresh_token"
    module.write_text("class Vault:\n    def rotate_token(self):\n        return 2\n")
    stack.index()
    assert lookup(stack, name="rotate_token")["symbols"][0]["startLine"] == 2
    assert all(s["name"] != "refresh_token" for s in lookup(stack, name="refresh_token")["symbols"])
    module.unlink()
    stack.index()
    assert lookup(stack, name="Vault")["symbols"] == []


def test_search_hits_carry_the_symbol_path(stack: Stack, repos: Path) -> None:
    with stack.http() as http:
        body = {"query": "Decode a JSON document from a string that may have extraneous data", "k": 5,
                "folder": ["repos"], "pathGlob": ["*.py"], "minScore": -1}  # fmt: skip
        hits = http.post("/v1/search", json=body).json()["hits"]
    decoder = [h for h in hits if h["relPath"] == "python/json/decoder.py"]
    assert decoder and any("JSONDecoder" in (h.get("heading") or "") for h in decoder)
    assert any(h.get("kind") in ("method", "class") for h in decoder)


def test_cli_symbols_and_outline(stack: Stack, repos: Path) -> None:
    found = stack.cli("symbols", "cache_setup").stdout.splitlines()  # piped: tab-separated
    path, start, end, kind, name, _ = found[0].split("\t")
    assert path == str(repos / "bash/git-subtree.sh") and (kind, name) == ("function", "cache_setup")
    assert 0 < int(start) <= int(end)
    as_json = json.loads(stack.cli("symbols", "JSONDecoder", "--kind", "class", "--json").stdout)
    assert as_json["symbols"][0]["relPath"] == "python/json/decoder.py"
    missing = stack.cli("symbols", "zzzqqq_nothing", check=False)
    assert missing.returncode == 1 and "no symbol named like" in missing.stderr
    listed = stack.cli("outline", str(repos / "go/persistent-https/client.go")).stdout.splitlines()
    outline = [line.split("\t") for line in listed]
    assert any(row[2:4] == ["type", "Client"] for row in outline), outline
    assert any(
        row[2:4] == ["method", "Client › Run"] and row[4].startswith("func (c *Client) Run()") for row in outline
    )
    refused = stack.cli("outline", "/etc/passwd", check=False)
    assert refused.returncode != 0 and "outside the indexed folders" in refused.stderr


@pytest.mark.e2e  # starts processes
def test_mcp_symbols_and_outline_tools(stack: Stack, repos: Path) -> None:
    async def run() -> dict[str, Any]:
        params = StdioServerParameters(command=SEMSEARCH, args=["mcp"], env=stack.env)
        async with Client(params) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            found = await client.call_tool("symbols", {"name": "createParser", "kind": "function"})
            outline = await client.call_tool("outline", {"filePath": str(repos / "python/json/decoder.py")})
            refused = await client.call_tool("outline", {"filePath": "/etc/passwd"})
            return {"tools": tools, "found": found, "outline": outline, "refused": refused}

    out = anyio.run(run)
    for name in ("symbols", "outline"):
        hints = out["tools"][name].annotations
        assert hints.read_only_hint is True and hints.open_world_hint is False and out["tools"][name].title
    found = out["found"]
    assert not found.is_error
    assert found.content[0].text.startswith("repos · typescript/eventsource-parser/parse.ts:")
    assert found.structured_content["symbols"][0]["symbolPath"] == "createParser"
    outline = out["outline"].content[0].text.splitlines()
    assert outline[0] == "repos · python/json/decoder.py"
    assert any(line.startswith("  ") and "method decode" in line for line in outline)  # nested under its class
    assert out["refused"].is_error and "outside the indexed folders" in out["refused"].content[0].text


@pytest.mark.e2e  # starts processes
def test_switching_the_code_chunker_asks_for_a_rebuild(api_factory: Any, tmp_path: Path) -> None:
    stack = api_factory(worker=False)  # the one-shot indexer, run here with the chunker under test

    def index(chunker: str | None) -> subprocess.CompletedProcess[str]:
        env = stack.env | ({"SEMSEARCH_CODE_CHUNKER": chunker} if chunker else {})
        return subprocess.run([sys.executable, "-m", "semsearch.indexer"], env=env, capture_output=True, text=True,
                              timeout=300, check=False)  # fmt: skip

    root = tmp_path / "src"
    root.mkdir()
    (root / "a.py").write_text("def first():\n    return 1\n")
    stack.cli("add", str(root))
    assert index("paragraph").returncode == 0
    assert lookup(stack, name="first")["symbols"] == []  # paragraph chunks record no symbols
    (root / "b.py").write_text("def second():\n    return 2\n")
    refused = index(None)
    assert refused.returncode != 0
    assert "paragraph code chunker" in refused.stderr and "semsearch index --rebuild" in refused.stderr
    with stack.http() as http:
        assert http.post("/v1/index/reset", json={"confirm": True}).status_code == 200
    assert index(None).returncode == 0
    assert lookup(stack, name="second")["symbols"][0]["relPath"] == "b.py"
