"""The indexer's entrypoint, shared by `python -m indexer` (containers, cron) and `semsearch index`."""

from __future__ import annotations

import argparse
import json
import os
import sys

from embedder.client import EmbedderClient, EmbedderError
from indexer.run import Indexer, Summary
from semsearch.client import ApiClient, ApiError
from semsearch.config import Settings
from semsearch.schemas import Folder


class TargetError(ValueError):
    pass


def resolve_target(folders: list[Folder], path: str | None) -> tuple[list[Folder], str]:
    """All folders, or the one folder containing PATH plus the relative scope inside it."""
    if path is None:
        return folders, ""
    for folder in folders:
        if folder.name == path:
            return [folder], ""
    real = os.path.realpath(path)
    for folder in folders:
        root = os.path.realpath(folder.path)
        if real == root:
            return [folder], ""
        if real.startswith(root + os.sep):
            return [folder], os.path.relpath(real, root).replace(os.sep, "/")
    raise TargetError(f"{path} is not inside a registered folder; add it first with `semsearch add {path}`")


def run_index(settings: Settings, path: str | None, force: bool = False, max_files: int | None = None) -> int:
    """Runs one pass, prints a line per folder and the JSON summary last; returns the exit code."""
    embedder = EmbedderClient(settings.embedder_target, timeout=settings.embedder_timeout_s)
    try:
        with ApiClient(settings) as api:
            targets, scope = resolve_target(api.folders(), path)
            if not targets:
                print("No folders registered; add one with `semsearch add PATH`.", file=sys.stderr)
            summary = Indexer(settings, api, embedder).run(targets, scope, force, max_files)
    except (ApiError, EmbedderError, TargetError) as exc:
        print(f"semsearch index: {exc}", file=sys.stderr)
        failed = Summary(errors=[str(exc)])
        print(json.dumps(failed.as_json()))
        return 1
    finally:
        embedder.close()
    total = summary.as_json()
    print(
        f"total  {summary.files_processed:,} indexed  {summary.files_skipped:,} skipped  "
        f"{summary.files_deleted:,} deleted  {summary.chunks_written:,} chunks  {summary.seconds:.1f}s"
    )
    print(json.dumps(total))
    return 1 if summary.errors else 0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m indexer", description="One incremental indexing pass.")
    parser.add_argument("path", nargs="?", help="a registered folder (name or path) or a path inside one")
    parser.add_argument("--force", action="store_true", help="re-read and re-embed every file")
    parser.add_argument("--max-files", type=int, help="stop after this many newly processed files")
    args = parser.parse_args(argv)
    sys.exit(run_index(Settings(), args.path, args.force, args.max_files))
