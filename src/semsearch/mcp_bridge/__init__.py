"""The MCP server: each tool is a REST call to the API; nothing is ranked here."""
