"""`semsearch scaffold DIR`: set a project up for agents in one command.

Writes (merging with what is there, so a second run keeps the user's edits and only
overwrites keys passed as flags):
- `.semsearch.json` — the project's name, folders, include globs, MCP server name and tool
  description (the bridge finds it from any subdirectory);
- `.mcp.json` — the project-level MCP config agents read, keeping existing servers; its
  command is plain `semsearch mcp`, no machine-specific paths, so it can be committed;
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


def _load(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path} does not hold a JSON object; fix or remove it")
    return data


def _write(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def hook_command() -> str:
    """This installation's `semsearch hook`, by absolute path: the settings file is this
    machine's own, and an agent's PATH may not hold our venv."""
    beside = Path(sys.executable).parent / "semsearch"
    exe = str(beside) if beside.exists() else shutil.which("semsearch") or "semsearch"
    return f"{shlex.quote(exe)} hook"


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
    project.setdefault("serverName", f"{project['name']}-search")
    default_description = (
        f"Search the {project['name']} project's code and documents (semsearch): where something is "
        "implemented, configured or explained."
    )
    project.setdefault("toolDescription", default_description)
    if description:
        project["toolDescription"] = description
    _write(project_path, project)
    report.append(f"wrote {project_path}")

    mcp_path = directory / MCP_FILE
    mcp = _load(mcp_path)
    servers = mcp.setdefault("mcpServers", {})
    servers.setdefault(project["serverName"], {"command": "semsearch", "args": ["mcp"]})
    _write(mcp_path, mcp)
    report.append(f"wrote {mcp_path} (servers: {', '.join(sorted(servers))})")

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
