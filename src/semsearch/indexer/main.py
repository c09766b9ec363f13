"""The indexer as a library: one pass over folders in this process (`run_index`, what the one-shot
`python -m semsearch.indexer` runs) and the connection the worker shares. The process entrypoint
is `__main__.py`; `semsearch index` requests a run that a worker executes with the same code."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from semsearch.client import ApiClient, ApiError
from semsearch.config import Settings
from semsearch.embedder.client import EmbedderClient, EmbedderError
from semsearch.embedder.interface import Embedder
from semsearch.indexer.progress import Reporter
from semsearch.indexer.run import Indexer, Summary
from semsearch.report import print_summary
from semsearch.targets import TargetError, resolve_target


@contextmanager
def connect(
    settings: Settings,
    reporter: Reporter | None = None,
    concurrency: int | None = None,
    embedder: Embedder | None = None,
) -> Iterator[tuple[Indexer, ApiClient]]:
    """An indexer writing through the API at `settings.api_url`, and that API's client (for the
    run's own endpoints: progress, finish). `embedder`: one this process already has (the model in
    process), kept open; by default the gRPC service at `settings.embedder_target`."""
    own = embedder is None
    embedder = embedder or EmbedderClient(
        settings.embedder_target, timeout=settings.embedder_timeout_s, retry_for_s=settings.embedder_retry_s
    )
    try:
        with ApiClient(settings) as api:
            api.folders()  # the API first: if it is down, say so at once
            yield Indexer(settings, api, embedder, reporter, concurrency or settings.index_concurrency), api
    finally:
        if own:
            embedder.close()


def run_index(
    settings: Settings,
    path: str | None,
    force: bool = False,
    max_files: int | None = None,
    dry_run: bool = False,
    verbose: bool = False,
    concurrency: int | None = None,
) -> int:
    """One pass: a line per folder, the total, and the JSON summary as the last stdout line."""
    reporter = Reporter(verbose=verbose)
    try:
        with connect(settings, reporter, concurrency) as (indexer, api):
            targets, scope = resolve_target(api.folders(), path)
            if not targets:
                print("No folders registered; add one with `semsearch add PATH`.", file=sys.stderr)
            if dry_run:
                print(json.dumps(indexer.plan(targets, scope, force).dump()))
                return 0
            summary = indexer.run(targets, scope, force, max_files)
    except (ApiError, EmbedderError, TargetError) as exc:
        print(f"semsearch index: {exc}", file=sys.stderr)
        print(json.dumps(Summary(errors=[str(exc)]).as_json()))
        return 1
    print_summary(summary.wire())
    return 1 if summary.errors else 0
