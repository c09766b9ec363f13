"""`semsearch scaffold DIR`: set a project up for agents in one command.

Writes (merging with what is there, so a second run keeps the user's edits and only
overwrites keys passed as flags):
- `.semsearch.json` — the project's name, folders, include globs, MCP server name and tool
  description (the bridge finds it from any subdirectory);
- `.mcp.json` — the project-level MCP config agents read, keeping existing servers; its
  command is plain `semsearch mcp`, no machine-specific paths, so it can be committed;
- `.gitignore` — an entry for `.semsearch.local.json`, where a machine's URL or token go.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from semsearch.project import FILENAME, LOCAL_FILENAME

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


def scaffold(
    directory: Path, folder_name: str, include: list[str] | None, description: str | None, name: str | None
) -> list[str]:
    """Writes the three files; returns a line per file saying what happened."""
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

    gitignore = directory / ".gitignore"
    lines = gitignore.read_text().splitlines() if gitignore.exists() else []
    if LOCAL_FILENAME not in lines:
        gitignore.write_text("\n".join([*lines, "# semsearch: this machine's URL/token", LOCAL_FILENAME]) + "\n")
        report.append(f"added {LOCAL_FILENAME} to {gitignore}")
    return report
