"""Per-project settings for the MCP bridge: `.semsearch.json`, found by walking up from the
working directory (agents start the bridge in the project root or any subdirectory).

    {"name": "my-api", "folders": ["my-api"], "include": ["src/**"],
     "serverName": "my-api-search", "toolDescription": "Search the my-api service's code and docs."}

Trust: `.semsearch.json` is committed, so anyone who can push to the repository (or write a
parent folder) writes it. It may scope searches and describe the corpus; it may not choose
where the bridge connects or which token it sends. `url`/`token` come only from the
environment or from `.semsearch.local.json` — and only while git does not track that file —
and a token is sent only to a URL from the same place: the user's `SEMSEARCH_TOKEN` never
goes to an address a file chose.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict, field_validator
from pydantic.alias_generators import to_camel

from semsearch.client import ApiClient
from semsearch.config import Settings
from semsearch.limits import MAX_DESCRIPTION

FILENAME = ".semsearch.json"
LOCAL_FILENAME = ".semsearch.local.json"  # this machine's `url` / `token`; never committed


def warn(message: str) -> None:
    print(f"semsearch mcp: {message}", file=sys.stderr, flush=True)


def tracked_by_git(path: Path) -> bool:
    """`path` is in git's index (committed or staged): then it came with the repository."""
    try:
        result = subprocess.run(
            ["git", "-C", str(path.parent), "ls-files", "--error-unmatch", "--", path.name],
            capture_output=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0


class ProjectConfig(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True, extra="allow")

    name: str | None = None
    folders: list[str] = []
    include: list[str] = []
    path_boosts: dict[str, float] | None = None  # glob -> multiplier of the fused score
    server_name: str | None = None
    tool_description: str | None = None
    url: str | None = None  # from .semsearch.local.json only
    token: str | None = None  # from .semsearch.local.json only
    path: Path | None = None  # where it was found

    @field_validator("tool_description")
    @classmethod
    def _one_short_paragraph(cls, value: str | None) -> str | None:
        if value is None:
            return None
        return " ".join(value.split())[:MAX_DESCRIPTION] or None

    @field_validator("server_name")
    @classmethod
    def _plain_name(cls, value: str | None) -> str | None:
        return re.sub(r"[^A-Za-z0-9._-]+", "-", value)[:64] or None if value else None

    @classmethod
    def discover(cls, start: Path | None = None) -> ProjectConfig:
        here = (start or Path.cwd()).resolve()
        for directory in (here, *here.parents):
            candidate = directory / FILENAME
            if candidate.is_file():
                data = _read(candidate)
                for key in ("url", "token"):
                    if data.pop(key, None) is not None:
                        warn(
                            f"ignoring {key!r} in {candidate}: a committed file does not choose where the bridge "
                            f"connects or what it sends; put it in {LOCAL_FILENAME} (git-ignored) or SEMSEARCH_URL"
                        )
                local = directory / LOCAL_FILENAME
                if local.is_file():
                    if tracked_by_git(local):
                        warn(f"ignoring {local}: git tracks it, so it came with the repository; untrack it")
                    else:
                        machine = _read(local)
                        data |= {k: machine[k] for k in ("url", "token") if k in machine}
                return cls.model_validate({**data, "path": candidate})
        return cls()


def _read(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SystemExit(f"semsearch mcp: {path} is not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise SystemExit(f"semsearch mcp: {path} does not hold a JSON object; fix or remove it")
    return data


def project_client(settings: Settings, project: ProjectConfig) -> ApiClient:
    """The REST client for a project: a URL from its machine-local file goes with that file's
    token only, never with the user's SEMSEARCH_TOKEN (a file in a repository must not be able
    to send the user's token somewhere)."""
    if project.url and not settings.url:
        if settings.token is not None and not project.token:
            warn(
                f"SEMSEARCH_TOKEN is not sent to {project.url} (from {LOCAL_FILENAME}); put the token in "
                "that file too, or set SEMSEARCH_URL"
            )
        return ApiClient(settings, url=project.url, token=project.token)
    if project.token and settings.token is None:
        return ApiClient(settings, token=project.token)
    return ApiClient(settings)
