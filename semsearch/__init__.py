"""semsearch: the CLI and what every service shares (settings, REST wire types, API client)."""

__version__ = "0.1.0"
