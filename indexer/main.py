"""The indexer as a library: one pass over folders (`run_index`), `explain`, and the target resolution
the worker and the CLI share. The process entrypoint is `__main__.py`."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from semsearch.client import ApiClient, ApiError
from semsearch.config import Settings
from semsearch.corpus.discovery import FileList
from semsearch.corpus.extract import Unindexable, extract
from semsearch.embedder.client import EmbedderClient, EmbedderError
from semsearch.indexer.progress import Reporter
from semsearch.indexer.run import Indexer, Summary
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
    absolute = os.path.abspath(path)
    resolved = os.path.realpath(absolute)
    # A symlink *inside* a folder is a path in that folder (and is explained as a symlink),
    # so the last component is not resolved when looking for the containing folder.
    lexical = os.path.join(os.path.realpath(os.path.dirname(absolute)), os.path.basename(absolute))
    for folder in folders:
        root = os.path.realpath(folder.path)
        if resolved == root:
            return [folder], ""
        for candidate in (lexical, resolved):
            if candidate.startswith(root + os.sep):
                return [folder], os.path.relpath(candidate, root).replace(os.sep, "/")
    raise TargetError(f"{path} is not inside a registered folder; add it first with `semsearch add {path}`")


@contextmanager
def connect(settings: Settings, reporter: Reporter | None = None, concurrency: int | None = None) -> Iterator[Indexer]:
    embedder = EmbedderClient(
        settings.embedder_target, timeout=settings.embedder_timeout_s, retry_for_s=settings.embedder_retry_s
    )
    try:
        with ApiClient(settings) as api:
            api.folders()  # the API first: if it is down, say so at once
            yield Indexer(settings, api, embedder, reporter, concurrency or settings.index_concurrency)
    finally:
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
        with connect(settings, reporter, concurrency) as indexer:
            targets, scope = resolve_target(indexer.api.folders(), path)
            if not targets:
                print("No folders registered; add one with `semsearch add PATH`.", file=sys.stderr)
            if dry_run:
                print(json.dumps(indexer.plan(targets, scope, force)))
                return 0
            summary = indexer.run(targets, scope, force, max_files)
    except (ApiError, EmbedderError, TargetError) as exc:
        print(f"semsearch index: {exc}", file=sys.stderr)
        print(json.dumps(Summary(errors=[str(exc)]).as_json()))
        return 1
    print("total  " + summary.line(summary.seconds))
    for bad in summary.unindexable:
        print(f"  could not index {bad['path']}: {bad['detail']}", file=sys.stderr)
    print(json.dumps(summary.as_json()))
    return 1 if summary.errors else 0


def explain(settings: Settings, path: str) -> dict[str, object]:
    """Why PATH is or is not indexed, and how many chunks it has."""
    with ApiClient(settings) as api:
        folders = api.folders()
        absolute = os.path.abspath(path)
        try:
            targets, rel = resolve_target(folders, absolute)
        except TargetError as exc:
            return {"path": absolute, "indexed": False, "rule": "outside", "detail": str(exc)}
        folder = targets[0]
        if not rel:
            return {"path": absolute, "folder": folder.name, "indexed": True, "rule": "folder", "detail": "registered"}
        verdict = FileList.from_settings(Path(folder.path), settings).explain(rel)
        rule, detail = verdict.rule, verdict.detail
        redacted = 0
        if verdict.included:
            try:  # content checks that only reading can make (NUL bytes, corrupt PDF, …)
                redacted = extract(
                    Path(folder.path) / rel, settings.max_document_bytes, settings.redact_secrets
                ).redacted
            except Unindexable as exc:
                rule, detail = exc.reason, str(exc)
        entry = next((e for e in api.manifest(folder.name).files if e.path == rel), None)
    result: dict[str, object] = {
        "path": absolute,
        "folder": folder.name,
        "relPath": rel,
        "indexed": rule == "included",
        "rule": rule,
        "detail": detail,
        "chunks": entry.chunks if entry else 0,
        "inIndex": entry is not None,
        "secretsRedacted": redacted,
    }
    if entry is not None:
        try:
            result["stale"] = os.lstat(absolute).st_mtime_ns != entry.mtime_ns
        except OSError:
            result["stale"] = True
    return result
