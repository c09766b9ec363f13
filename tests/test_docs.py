"""The docs: the generated references match the code, the site builds offline with no warnings,
the README stays a front page, and the getting-started page works as written — each of its
commands run in order by a fresh user (an empty HOME), as they would be typed."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from docsgen import PAGES, REFERENCE, generate
from tests.conftest import BIN, SEMSEARCH
from tests.processes import Service, clean_env, free_port

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)


def test_the_generated_references_match_the_code() -> None:
    stale = [name for name, text in generate().items() if (REFERENCE / PAGES[name]).read_text() != text]
    assert stale == [], f"run `python -m docsgen` (make docs): {stale} drifted from the code"


def test_every_setting_command_tool_and_route_is_in_its_reference() -> None:
    from semsearch.config import Settings

    pages = generate()
    assert all(f"`SEMSEARCH_{name.upper()}`" in pages["configuration"] for name in Settings.model_fields)
    assert "`semsearch mcp`" in pages["cli"] and "`--standalone`" in pages["cli"]
    assert "## `search`" in pages["mcp"] and "`pathGlob`" in pages["mcp"] and "path_glob" not in pages["mcp"]
    assert "### `POST /v1/search`" in pages["rest"]


def test_the_readme_is_a_front_page() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) <= 12 * 1024
    assert "pipx install" in readme and "docs/getting-started.md" in readme
    for target in re.findall(r"\]\(((?:docs/|SECURITY)[^)#]+)", readme):
        assert (ROOT / target).is_file(), target


@pytest.mark.e2e
def test_the_site_builds_offline_with_no_warnings(tmp_path: Path) -> None:
    argv = [str(BIN / "mkdocs"), "build", "--strict", "--site-dir", str(tmp_path / "site")]
    env = os.environ | {"NO_MKDOCS_2_WARNING": "1"}
    run = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "configuration.html").is_file()


def blocks(page: Path) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(page.read_text())]


def words(line: str, home: Path) -> list[str]:
    """A command line as a shell splits it, `~/` expanded against `home` (for the lines run here)."""
    return [str(home) + w[1:] if w.startswith("~/") else w for w in shlex.split(line)]


@pytest.mark.e2e
def test_the_getting_started_page_works_as_written(tmp_path: Path) -> None:
    """Each block of docs/getting-started.md in order: the install (from this checkout's own
    install, which `pipx install '.[all]'` makes alike), shell lines, the Python example, the
    agent's command (run as the agent would spawn it) and `semsearch serve` with the CLI."""
    home = tmp_path / "home"
    home.mkdir()
    ports = {"SEMSEARCH_PORT": str(free_port()), "SEMSEARCH_EMBEDDER_PORT": str(free_port())}
    env = clean_env(HOME=str(home), PATH=f"{BIN}:{os.environ['PATH']}", **ports)
    for key in ("XDG_DATA_HOME", "XDG_CACHE_HOME"):
        env.pop(key, None)
    env["XDG_CACHE_HOME"] = os.environ.get("XDG_CACHE_HOME", str(Path.home() / ".cache"))  # the prepared model
    served: Service | None = None
    seen: list[str] = []
    try:
        for language, code in blocks(ROOT / "docs" / "getting-started.md"):
            if language == "python":
                run = subprocess.run([sys.executable, "-c", code], cwd=home, env=env, capture_output=True, text=True,
                                     timeout=300)  # fmt: skip
                assert run.returncode == 0, run.stderr[-3000:]
                assert run.stdout.split()[:2] == ["src/retry.py", "1"], run.stdout
                seen.append("python")
                continue
            for line in code.strip().splitlines():
                argv = words(line, home)
                if argv[:2] == ["pipx", "install"]:
                    seen.append("install")  # the suite runs from this checkout's install
                elif argv[:3] == ["claude", "mcp", "add"]:
                    seen.append(agent(argv[argv.index("--") + 1 :], env))
                elif argv[:2] == ["semsearch", "serve"]:
                    served = Service("semsearch", env, tmp_path / "serve.log").start("serve")
                    served.wait_http(f"http://127.0.0.1:{ports['SEMSEARCH_PORT']}/readyz", timeout=120)
                    seen.append("serve")
                else:  # as typed into the user's shell (its quoting, `~` and redirections)
                    run = subprocess.run(["bash", "-c", line], env=env, cwd=home, capture_output=True, text=True,
                                         timeout=300)  # fmt: skip
                    assert run.returncode == 0, f"{line}\n{run.stderr[-3000:]}"
                    seen.append(" ".join(argv[:2]) if argv[0] == "semsearch" else argv[0])
                    if "--json" in argv:
                        hits = json.loads(run.stdout)["hits"]
                        assert hits[0]["relPath"] == "src/retry.py", hits
        assert seen == [
            "install",
            "mkdir",
            "printf",
            "python",
            "mcp --standalone",
            "serve",
            "semsearch add",
            "semsearch index",
            "semsearch search",
            "semsearch search",
        ], seen
        assert "serve" in seen and "semsearch search" in seen, seen
        status = httpx.get(f"http://127.0.0.1:{ports['SEMSEARCH_PORT']}/v1/status", timeout=30).json()
        assert [f["name"] for f in status["folders"]] == ["my-api"], status
    finally:
        if served is not None:
            served.stop()


def agent(command: list[str], env: dict[str, str]) -> str:
    """The command an agent spawns, driven over stdio by the MCP client: it must find the file."""
    assert command[0] == "semsearch", command
    params = StdioServerParameters(command=SEMSEARCH, args=command[1:], env=env)

    async def session() -> str:
        async with Client(params) as client:
            await client.call_tool("index", {})
            found = await client.call_tool("search", {"query": "wait longer after each failure", "k": 3})
            return found.content[0].text  # type: ignore[union-attr, no-any-return]

    hits = json.loads(anyio.run(session))
    assert hits[0]["relPath"] == "src/retry.py", hits
    return " ".join(command[1:3])
