"""Per-project settings for the MCP bridge: `.semsearch.json`, found by walking up from the
working directory (agents start the bridge in the project root or any subdirectory).

    {"name": "my-api", "folders": ["my-api"], "include": ["src/**"],
     "serverName": "my-api-search", "toolDescription": "Search the my-api service's code and docs."}
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

FILENAME = ".semsearch.json"
LOCAL_FILENAME = ".semsearch.local.json"  # this machine's `url` / `token`; never committed


class ProjectConfig(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True, extra="allow")

    name: str | None = None
    folders: list[str] = []
    include: list[str] = []
    server_name: str | None = None
    tool_description: str | None = None
    url: str | None = None  # from .semsearch.local.json
    token: str | None = None  # from .semsearch.local.json
    path: Path | None = None  # where it was found

    @classmethod
    def discover(cls, start: Path | None = None) -> ProjectConfig:
        here = (start or Path.cwd()).resolve()
        for directory in (here, *here.parents):
            candidate = directory / FILENAME
            if candidate.is_file():
                try:
                    data = json.loads(candidate.read_text())
                except (OSError, ValueError) as exc:
                    raise SystemExit(f"semsearch mcp: {candidate} is not valid JSON ({exc})") from exc
                local = directory / LOCAL_FILENAME
                if local.is_file():
                    data |= json.loads(local.read_text())
                return cls.model_validate({**data, "path": candidate})
        return cls()
