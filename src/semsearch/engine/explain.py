"""`explain`: why a path is, or is not, indexed — the rule that decided, its chunks, whether it
is stale. Answered by the API, which sees the folders as the indexer does, so it works with
nothing but `SEMSEARCH_URL` (from the host of a compose stack too)."""

from __future__ import annotations

import os
from pathlib import Path

from semsearch.config import Settings
from semsearch.corpus.extract import Unindexable, extract
from semsearch.corpus.files import file_list
from semsearch.corpus.folders import FolderRegistry
from semsearch.engine.filters import path_multiplier
from semsearch.engine.store import Store
from semsearch.schemas import Explained, FlaggedChunk
from semsearch.targets import TargetError, resolve_target


def explain(path: str, folders: FolderRegistry, store: Store, settings: Settings) -> Explained:
    absolute = os.path.normpath(path)
    try:
        targets, rel = resolve_target(folders.all(), absolute)
    except (TargetError, OSError) as exc:
        return Explained(path=absolute, indexed=False, rule="outside", detail=str(exc))
    folder = targets[0]
    if not rel:
        return Explained(path=absolute, folder=folder.name, indexed=True, rule="folder", detail="registered")
    verdict = file_list(folder.path, settings).explain(rel)
    rule, detail, redacted = verdict.rule, verdict.detail, 0
    if verdict.included:
        try:  # content checks that only reading can make (NUL bytes, corrupt PDF, …)
            redacted = extract(Path(folder.path) / rel, settings.max_document_bytes, settings.redact_secrets).redacted
        except Unindexable as exc:
            rule, detail = exc.reason, str(exc)
    entry = next(iter(store.manifest(folder.name, [rel])), None)
    stale = None
    if entry is not None:
        try:
            stale = os.lstat(absolute).st_mtime_ns != entry.mtime_ns
        except OSError:
            stale = True
    return Explained(
        path=absolute,
        folder=folder.name,
        rel_path=rel,
        indexed=rule == "included",
        rule=rule,
        detail=detail,
        chunks=entry.chunks if entry else 0,
        in_index=entry is not None,
        stale=stale,
        secrets_redacted=redacted,
        boost=path_multiplier(settings.path_boosts)(rel),
        flagged=[FlaggedChunk(start_line=r["start_line"], end_line=r["end_line"], flags=r["flags"])
                 for r in store.flagged(folder.name, rel)],
    )  # fmt: skip
