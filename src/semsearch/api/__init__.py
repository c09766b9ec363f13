"""The REST API: the engine (`semsearch.engine`) over HTTP, with tokens, scopes, guards and the web UI."""
