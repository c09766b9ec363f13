"""The engine: the index (LanceDB), the ranking pipeline, runs and leases, snapshots, coverage.

Below every service: the REST API routes to it, and `semsearch.connect` uses it in one process.
It knows nothing of HTTP (no FastAPI, no Starlette: an import contract holds it to that).
"""
