"""semsearch: the CLI and what every service shares (settings, REST wire types, API client)."""

import os

__version__ = "0.1.0"

# Validation errors reach people and agents as text (problem details, MCP tool errors); pydantic's
# documentation links in them are noise, and a link out on an offline server. Read by pydantic
# when it is first imported, so it is set here, before any service imports it.
os.environ.setdefault("PYDANTIC_ERRORS_INCLUDE_URL", "0")
