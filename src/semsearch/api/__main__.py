"""`python -m semsearch.api`: the container entrypoint, and what `semsearch serve` starts."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from types import FrameType

import uvicorn
from fastapi import FastAPI
from threadpoolctl import threadpool_limits

from semsearch.api.app import create_app
from semsearch.config import Settings, load_settings, placeholder
from semsearch.embedder.interface import Embedder
from semsearch.engine.location import IndexLocation, StoreUnavailable
from semsearch.engine.store import connect
from semsearch.engine.writer import LeaseHeld, WriterLease
from semsearch.malloc import limit_arenas
from semsearch.security import is_loopback


def main(settings: Settings | None = None) -> None:
    settings = settings or load_settings("semsearch api")
    limit_arenas(settings.malloc_arenas)  # before LanceDB and uvicorn start their threads
    one_blas_thread()
    app = prepare(settings)
    # X-Forwarded-For is believed only from the proxies named (uvicorn trusts loopback by default,
    # so any local process could write another client's address into the audit log).
    proxies = settings.forwarded_allow_ips
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level="info",
        access_log=False,
        proxy_headers=proxies is not None,
        forwarded_allow_ips=proxies,
    )
    DrainingServer(config, app.state.draining).run()


def one_blas_thread() -> None:
    """numpy's BLAS on one thread in this process. Its work here is a query vector against the
    in-memory copy, memory-bound, so a second thread adds nothing — and OpenBLAS's idle threads
    spin after each call, taking the cores the full-text query and the embedder are waiting for
    (measured side by side in docs/benchmarks.md). OPENBLAS_NUM_THREADS, when set, still wins."""
    if "OPENBLAS_NUM_THREADS" not in os.environ:
        threadpool_limits(1, user_api="blas")


class DrainingServer(uvicorn.Server):
    """On SIGTERM or SIGINT the app's `draining` event is set first, so long polls end at once."""

    def __init__(self, config: uvicorn.Config, draining: threading.Event) -> None:
        super().__init__(config)
        self.draining = draining

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.draining.set()
        super().handle_exit(sig, frame)


# The object-store credentials a deployment copies from an example file.
STORE_CREDENTIALS = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "GOOGLE_SERVICE_ACCOUNT",
)


def prepare(settings: Settings, embedder: Embedder | None = None) -> FastAPI:
    """The checks a start makes (bind without a token, the data directory, the shared store and
    its writer lease), then the app; a failed check ends the start with one line (SystemExit)."""
    if not is_loopback(settings.host) and settings.token is None and not settings.tokens_path.exists():
        sys.exit(
            f"semsearch api: refusing to listen on {settings.host} without a token; "
            "set SEMSEARCH_TOKEN or SEMSEARCH_TOKENS_FILE (or bind to 127.0.0.1)"
        )
    # The index holds the corpus's text: only this user may read it (files 0600, directories 0700).
    os.umask(0o077)
    try:
        settings.index_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        sys.exit(f"semsearch api: cannot create the data directory {settings.data_dir}: {exc.strerror}")
    if not os.access(settings.index_dir, os.W_OK):
        sys.exit(f"semsearch api: the data directory {settings.index_dir} is not writable by this user")
    for directory in (settings.data_dir, settings.index_dir):  # one made before this release may be 0755
        with contextlib.suppress(OSError):
            if directory.stat().st_uid == os.getuid():
                directory.chmod(0o700)
    location = IndexLocation.from_settings(settings)
    lease = None
    if location.local is None:
        copied = [k for k in STORE_CREDENTIALS if placeholder(os.environ.get(k, "x"))]
        if copied:  # the store would answer "access denied", which names neither the key nor the fix
            sys.exit(
                f"semsearch api: {', '.join(copied)} still hold the example's placeholder; set the store's real "
                "credentials (in Kubernetes: the `semsearch` Secret, see deploy/kubernetes/secret.example.yaml)"
            )
        try:  # an unreachable or misconfigured store, or a second writer, is one line at start
            db, _ = connect(location)
            if settings.role != "query":
                lease = WriterLease(location, db, settings.writer_lease_s)
                lease.acquire()
        except (StoreUnavailable, LeaseHeld) as exc:
            sys.exit(f"semsearch api: {exc}")
    return create_app(settings, lease, embedder)


if __name__ == "__main__":
    main()
