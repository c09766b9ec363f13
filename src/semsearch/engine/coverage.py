"""The coverage note on every answer: what, in scope, the index does not reflect.

- stale: indexed files in the folders (and path filters) in scope whose mtime on disk differs
  from the manifest's, or that are gone — found by a bounded stat pass over the manifest;
- skipped: what the last full pass over each folder left out, by rule (secret, binary,
  too-large, corrupt, …), as the indexer reported it;
- indexedAt: when the least recently indexed folder in scope was last written;
- embedded chunks: during a cold run every file is findable by its words first and embedded after,
  so an answer says how much of its scope the vector arm saw ("semantic: 3,120 of 48,310 chunks").
A folder's answer is reused for a few seconds, so a burst of queries costs one pass; nothing
here rescans the folder or reads a file.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime

from semsearch.corpus.folders import RegisteredFolder
from semsearch.engine.store import Store
from semsearch.limits import COVERAGE_REUSE_S, MAX_COVERAGE_STATS
from semsearch.schemas import Coverage

log = logging.getLogger("semsearch.engine")
_BESIDE = ThreadPoolExecutor(2, thread_name_prefix="coverage")  # passes read beside the answers

# Rules a person would not call "skipped": unchanged files are indexed; built-in skips are build output.
NOT_GAPS = frozenset({"unchanged", "skipped-dir"})


@dataclass(frozen=True)
class _FolderState:
    at: float
    version: int  # the store's manifest epoch it was read at: a write makes it old at once
    paths: dict[str, bool]  # relative path -> stale (for the checked ones)
    files: int
    skipped: dict[str, int]
    indexed_at: datetime | None
    counts: dict[str, int]  # relative path -> its chunks
    unembedded: dict[str, int]  # of those, the files a run has not embedded yet
    totals: tuple[int, int]  # chunks, and chunks not embedded yet, in the whole folder
    stale: int  # of the checked paths, how many are stale (a scope of the whole folder needs no walk of them)


class CoverageCache:
    """Each folder's pass, reused for `COVERAGE_REUSE_S` and read by one search however many need
    it at once: the others wait for that read. When what a search finds is only old (the manifest
    has not changed since), no search waits: it answers with it, and the pass is read again beside
    it. Concurrent searches each reading the pass when it expired were the slowest answers under
    load (`make bench`, 8 clients)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._folders: dict[tuple[str, str], _FolderState] = {}
        self._reading: dict[tuple[str, str], tuple[int, Future[_FolderState]]] = {}

    def coverage(
        self, store: Store, folders: list[RegisteredFolder], in_scope: Callable[[str], bool] | None = None
    ) -> Coverage:
        files = stale = checked = chunks = unembedded = 0
        skipped: dict[str, int] = {}
        times: list[datetime] = []
        for folder in folders:
            state = self._state(store, folder)
            if in_scope is None:  # the whole folder: its sums, made once with the pass
                files += state.files
                checked += len(state.paths)
                stale += state.stale
                chunks += state.totals[0]
                unembedded += state.totals[1]
            else:  # over the paths in scope, not every file again
                paths = [p for p in state.paths if in_scope(p)]
                files += len(paths)
                checked += len(paths)
                stale += sum(state.paths[p] for p in paths)
                chunks += sum(state.counts[p] for p in paths)
                unembedded += sum(state.unembedded.get(p, 0) for p in paths)
            for rule, n in state.skipped.items():
                skipped[rule] = skipped.get(rule, 0) + n
            if state.indexed_at is not None:
                times.append(state.indexed_at)
        indexed_at = min(times, default=None)
        embedded = chunks - unembedded
        return Coverage(files=files, stale=stale, checked=checked, skipped=skipped, indexed_at=indexed_at,
                        chunks=chunks, embedded_chunks=embedded,
                        note=_note(stale, checked, files, skipped, indexed_at, (embedded, chunks)))  # fmt: skip

    def _state(self, store: Store, folder: RegisteredFolder) -> _FolderState:
        key = (folder.name, folder.path)
        version = store.manifest_epoch
        with self._lock:
            cached = self._folders.get(key)
            current = cached if cached is not None and cached.version == version else None
            if current is not None and time.monotonic() - current.at < COVERAGE_REUSE_S:
                return current
            reading = self._reading.get(key)
            if reading is not None and reading[0] == version:  # another search is reading it
                if current is not None:
                    return current  # only old: that read will refresh it, this answer need not wait
                waiting = reading[1]
            else:
                waiting = None
                reading = self._reading[key] = (version, Future())
        if waiting is not None:
            return waiting.result()
        if current is not None:
            # Only old (the manifest has not changed): read it again beside this answer. The search
            # that found it old used to pay the pass — 50-250 ms at 5,000 files, a single client's
            # slowest answers at 100k chunks (make bench).
            _BESIDE.submit(self._refresh, store, folder, key, reading)
            return current
        return self._read(store, folder, key, reading)

    def _refresh(
        self, store: Store, folder: RegisteredFolder, key: tuple[str, str], reading: tuple[int, Future[_FolderState]]
    ) -> None:
        try:
            self._read(store, folder, key, reading)
        except Exception as exc:  # the next search that finds the state old reads it again
            log.warning("the coverage pass over folder %s failed (%s); the next search tries again", folder.name, exc)

    def _read(
        self, store: Store, folder: RegisteredFolder, key: tuple[str, str], reading: tuple[int, Future[_FolderState]]
    ) -> _FolderState:
        """One pass over the folder, handed to every search waiting for it."""
        version, future = reading
        try:
            state = _pass(store, folder, version)
        except BaseException as exc:
            self._done(key, reading)
            future.set_exception(exc)
            raise
        with self._lock:
            kept = self._folders.get(key)
            if kept is None or kept.version <= state.version:  # a slower pass over an older manifest loses
                self._folders[key] = state
        self._done(key, reading)  # after the state is kept: a search in between would read it again
        future.set_result(state)
        return state

    def _done(self, key: tuple[str, str], reading: tuple[int, Future[_FolderState]]) -> None:
        with self._lock:
            if self._reading.get(key) is reading:
                del self._reading[key]


def _pass(store: Store, folder: RegisteredFolder, version: int) -> _FolderState:
    """The folder's manifest, a bounded stat pass over it and the last run's skips, as read at the
    manifest epoch `version` (read before them: a write meanwhile makes this state old at once)."""
    now = time.monotonic()
    entries = store.manifest(folder.name)
    # The most recently indexed first would hide old staleness; the order of the manifest is as good as any.
    paths: dict[str, bool] = {}
    for entry in entries[:MAX_COVERAGE_STATS]:
        try:
            paths[entry.path] = os.lstat(os.path.join(folder.path, entry.path)).st_mtime_ns != entry.mtime_ns
        except OSError:
            paths[entry.path] = True  # gone (or unreadable) since it was indexed
    skipped = {r: n for r, n in store.skipped().get(folder.name, {}).items() if r not in NOT_GAPS}
    stats = store.folder_stats().get(folder.name)
    counts = {entry.path: entry.chunks for entry in entries}
    unembedded = {entry.path: entry.chunks for entry in entries if not entry.embedded}
    return _FolderState(
        now, version, paths, len(entries), skipped, stats.last_indexed if stats else None, counts, unembedded,
        (sum(counts.values()), sum(unembedded.values())), sum(paths.values()),
    )  # fmt: skip


def _note(
    stale: int,
    checked: int,
    files: int,
    skipped: dict[str, int],
    indexed_at: datetime | None,
    embedded: tuple[int, int],
) -> str | None:
    parts = []
    done, chunks = embedded
    if done < chunks:
        parts.append(f"semantic: {done:,} of {chunks:,} chunks embedded so far; lexical: all")
    if stale:
        of = f" (of {checked:,} checked)" if checked < files else ""
        parts.append(f"{stale:,} file{'s' if stale != 1 else ''} in scope changed since indexing{of}")
    if skipped:
        counts = sorted(skipped.items(), key=lambda kv: -kv[1])
        parts.append("skipped: " + ", ".join(f"{n:,} as {rule}" for rule, n in counts))
    if indexed_at is None and not files:
        return "nothing in scope is indexed yet; run `semsearch index` (or the index tool)"
    if not parts:
        return None
    if stale:
        hint = "run `semsearch index` to catch up"
    elif done < chunks:
        hint = "an indexing run embeds the rest (if none is running, `semsearch index` resumes it)"
    else:
        hint = "see `semsearch explain PATH` for a file"
    return "; ".join(parts) + f" — {hint}"
