"""`semsearch scaffold DIR`: set a project up for agents in one command.

Writes (merging with what is there, so a second run keeps the user's edits and only
overwrites keys passed as flags):
- `.semsearch.json` — the project's name, folders, include globs, MCP server name and tool
  description (the bridge finds it from any subdirectory);
- per agent (`--agent`, default Claude Code), the client's own MCP config and its own
  instruction file, saying in a few lines when to reach for semsearch's tools instead of the
  built-in ones: Claude Code `.mcp.json` + a section of `CLAUDE.md`; Cursor `.cursor/mcp.json` +
  `.cursor/rules/semsearch.mdc`; Codex a section of `AGENTS.md` (its MCP config is the user's
  own `~/.codex/config.toml`: the lines to add are printed). The command is plain `semsearch`
  when that is this installation on PATH, else its absolute path (an agent's PATH may not hold
  the venv). One server name, `semsearch` unless `.semsearch.json` names another, everywhere;
- `.gitignore` — an entry for `.semsearch.local.json`, where a machine's URL or token go;
- with `--hook`, `.claude/settings.local.json` (personal: git-ignored) — a Claude Code
  `PostToolUse` hook that asks for an index run after the agent writes a file (semsearch.hook),
  keeping every other setting and hook there.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from semsearch.hook import LOG_FILE, MATCHER, STATE_FILE
from semsearch.project import FILENAME, LOCAL_FILENAME

CLAUDE_SETTINGS = ".claude/settings.local.json"
HOOK_TIMEOUT_S = 15  # Claude Code's limit for our hook; it answers in well under a second

MCP_FILE = ".mcp.json"
AGENTS = ("claude", "cursor", "codex")
SERVER_NAME = "semsearch"  # the name a hand-made `claude mcp add semsearch …` gives: one tool id either way
BEGIN, END = (
    "<!-- semsearch:begin (written by `semsearch scaffold`; edits here are replaced) -->",
    "<!-- semsearch:end -->",
)
GUIDANCE = """## Searching this project: semsearch

This project is indexed by semsearch (MCP server `{server}`). Prefer its tools to the built-in
grep, find and file reads when you look for something by meaning or by name:

- `search`: questions and concepts ("where are failed uploads retried?"), with file, lines and why;
- `symbols`: where a function, class or method is defined, by name (`Class.method` narrows);
- `grep`: exact text or a regex, over exactly the indexed files;
- `gather`: the best passages with the lines around them, in one block, within a token budget;
- `outline`, `cat_file`: a file's definitions or its lines (pass a hit's `filePath`).

Use the built-in tools for the files you are editing and for anything outside these folders.
"""


def _load(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path} does not hold a JSON object; fix or remove it")
    return data


def _write(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def installed_command() -> str:
    """This installation's `semsearch`, by absolute path."""
    beside = Path(sys.executable).parent / "semsearch"
    return str(beside) if beside.exists() else shutil.which("semsearch") or "semsearch"


def mcp_command() -> str:
    """What an agent's MCP config runs: plain `semsearch` when PATH finds this installation (the
    file can then be committed), else the absolute path."""
    found = shutil.which("semsearch")
    exe = installed_command()
    return "semsearch" if found and Path(found).resolve() == Path(exe).resolve() else exe


def hook_command() -> str:
    """This installation's `semsearch hook`, by absolute path: the settings file is this
    machine's own, and an agent's PATH may not hold our venv."""
    return f"{shlex.quote(installed_command())} hook"


def write_section(path: Path, text: str) -> None:
    """`text` between our markers in `path` (Markdown), replacing an earlier one, keeping the rest."""
    path.parent.mkdir(parents=True, exist_ok=True)
    current = path.read_text() if path.exists() else ""
    block = f"{BEGIN}\n{text.rstrip()}\n{END}\n"
    if BEGIN in current and END in current:
        head, rest = current.split(BEGIN, 1)
        current = head + block + rest.split(END, 1)[1].lstrip("\n")
    else:
        current = (current.rstrip() + "\n\n" if current.strip() else "") + block
    path.write_text(current)


def add_server(path: Path, server: str, command: str) -> list[str]:
    """Our server in an MCP config file (`mcpServers`), keeping every other server there."""
    path.parent.mkdir(parents=True, exist_ok=True)
    config = _load(path)
    servers = config.setdefault("mcpServers", {})
    for other in [k for k, v in servers.items() if k != server and is_ours(v)]:  # renamed since
        del servers[other]
    servers[server] = {"command": command, "args": ["mcp"]}
    _write(path, config)
    return sorted(servers)


def is_ours(entry: Any) -> bool:
    return (
        isinstance(entry, dict)
        and Path(str(entry.get("command", ""))).name == "semsearch"
        and (entry.get("args") == ["mcp"])
    )


def set_up_agent(directory: Path, agent: str, server: str) -> list[str]:
    """The agent's own MCP config and instruction file; a line per file written."""
    command = mcp_command()
    guidance = GUIDANCE.format(server=server)
    if agent == "claude":
        servers = add_server(directory / MCP_FILE, server, command)
        write_section(directory / "CLAUDE.md", guidance)
        return [f"wrote {directory / MCP_FILE} (servers: {', '.join(servers)})", f"wrote {directory / 'CLAUDE.md'}"]
    if agent == "cursor":
        servers = add_server(directory / ".cursor" / "mcp.json", server, command)
        rules = directory / ".cursor" / "rules" / "semsearch.mdc"
        rules.parent.mkdir(parents=True, exist_ok=True)
        rules.write_text("---\ndescription: When to use semsearch's MCP tools\nalwaysApply: true\n---\n\n" + guidance)
        return [f"wrote {directory / '.cursor' / 'mcp.json'} (servers: {', '.join(servers)})", f"wrote {rules}"]
    if agent == "codex":
        write_section(directory / "AGENTS.md", guidance)
        toml = f'[mcp_servers.{server}]\ncommand = "{command}"\nargs = ["mcp"]'
        return [f"wrote {directory / 'AGENTS.md'}", f"add to ~/.codex/config.toml:\n{toml}"]
    raise ValueError(f"unknown agent {agent!r}; one of {', '.join(AGENTS)}")


def is_our_hook(entry: Any) -> bool:
    return isinstance(entry, dict) and any(
        isinstance(h, dict) and str(h.get("command", "")).endswith("semsearch hook") for h in entry.get("hooks", [])
    )


def install_hook(directory: Path) -> str:
    path = directory / CLAUDE_SETTINGS
    path.parent.mkdir(exist_ok=True)
    settings = _load(path)
    hooks = settings.setdefault("hooks", {})
    post = hooks.setdefault("PostToolUse", [])
    if not isinstance(post, list):
        raise ValueError(f"{path}: hooks.PostToolUse is not a list; fix or remove it")
    ours = {"matcher": MATCHER, "hooks": [{"type": "command", "command": hook_command(), "timeout": HOOK_TIMEOUT_S}]}
    kept = [entry for entry in post if not is_our_hook(entry)]
    hooks["PostToolUse"] = [*kept, ours]
    _write(path, settings)
    return f"wrote {path} (PostToolUse hook: an index run after the agent writes a file; log in {LOG_FILE})"


def scaffold(
    directory: Path,
    folder_name: str,
    include: list[str] | None,
    description: str | None,
    name: str | None,
    hook: bool = False,
    agents: tuple[str, ...] = ("claude",),
) -> list[str]:
    """Writes the files; returns a line per file saying what happened."""
    report = []
    project_path = directory / FILENAME
    project = _load(project_path)
    project.setdefault("name", name or folder_name)
    if name:
        project["name"] = name
    project.setdefault("folders", [folder_name])
    if include:
        project["include"] = include
    project.setdefault("serverName", SERVER_NAME)
    default_description = (
        f"Search the {project['name']} project's code and documents (semsearch): where something is "
        "implemented, configured or explained."
    )
    project.setdefault("toolDescription", default_description)
    if description:
        project["toolDescription"] = description
    _write(project_path, project)
    report.append(f"wrote {project_path}")

    for agent in agents:
        report.extend(set_up_agent(directory, agent, project["serverName"]))

    if hook:
        report.append(install_hook(directory))

    gitignore = directory / ".gitignore"
    lines = gitignore.read_text().splitlines() if gitignore.exists() else []
    personal = [LOCAL_FILENAME, *([CLAUDE_SETTINGS, STATE_FILE, LOG_FILE] if hook else [])]
    missing = [entry for entry in personal if entry not in lines]
    if missing:
        gitignore.write_text("\n".join([*lines, "# semsearch: this machine's own files", *missing]) + "\n")
        report.append(f"added {', '.join(missing)} to {gitignore}")
    return report
