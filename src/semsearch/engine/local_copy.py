"""A query replica's copy, on its own disk, of an index that lives on object storage.

LanceDB reads every page a query touches from the store: on S3-compatible storage a hybrid
query paid several round trips and ran ~4x slower than the same index on local disk (make
bench-scale). LanceDB itself has no local cache. But a Lance table's files never change once
written: a version is a new manifest naming data, deletion and index files that were all
written before it. So a replica can keep those files on local disk, fetching only the new ones,
and let LanceDB open that directory: every query then reads local files, and the store sees a
few listings per interval.

What keeps the copy a valid LanceDB directory at every instant:

- a manifest is copied only after every other file of its table that the store held when the
  manifest was listed, and only manifests listed *before* that listing began (so every file
  they name was in it). A file arrives under a staging name and is renamed into place, so
  LanceDB never sees half of one; a table new to the copy is assembled in staging and renamed
  into place whole;
- a file the store no longer has is removed only after a grace period, as the writer's cleanup
  keeps old versions for a while: a search still on an older version finds its files.

Bounded: when the store's tables outgrow `max_bytes` the copy is emptied and the replica reads
the store directly (and says so in its status), as it does while the first copy is made.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from semsearch.engine.location import IndexLocation, StoredFile, StoreUnavailable

log = logging.getLogger("semsearch.engine")

LANCE = ".lance"
DOWNLOADS = 4  # parallel object reads: the first copy of a large index is many files


@dataclass(frozen=True)
class CopyState:
    serving: bool
    files: int
    bytes: int
    synced_at: datetime | None
    error: str | None
    store_bytes: int | None  # set when the tables outgrew the bound


class LocalCopy:
    def __init__(self, location: IndexLocation, root: Path, max_bytes: int, period_s: float, grace_s: float) -> None:
        """`period_s`: how often the store is listed for new versions; `grace_s`: how long a file
        the store no longer has stays here."""
        self.location, self.root, self.max_bytes = location, root, max_bytes
        self.period_s, self.grace_s = period_s, grace_s
        self.tables_dir = root / "tables"
        self._staging = root / "staging"
        self.serving = False
        self._synced_at: datetime | None = None
        self._error: str | None = None
        self._store_bytes: int | None = None
        self._missing: dict[str, float] = {}  # relative path -> when the store was first seen without it
        self._seen: tuple[frozenset[str], frozenset[str]] | None = None  # tables and manifests at the last sync
        self._sync_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- the background loop ---------------------------------------------------------------

    def start(self, on_change: Callable[[], None]) -> None:
        """Syncs now and then every `period_s` in a thread; `on_change` runs after a sync that
        changed what the copy holds (a new version, a new table) or whether it serves."""
        self.prepare()
        self._thread = threading.Thread(target=self._run, args=(on_change,), name="local-copy", daemon=True)
        self._thread.start()

    def prepare(self) -> None:
        """The directories, without what a stopped process left half-fetched."""
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        shutil.rmtree(self._staging, ignore_errors=True)
        self.tables_dir.mkdir(exist_ok=True)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _run(self, on_change: Callable[[], None]) -> None:
        while not self._stop.is_set():
            if self.sync():
                try:
                    on_change()
                except Exception:  # the store reopens on the next change; the copy keeps syncing
                    log.exception("re-opening the index on its local copy failed")
            self._stop.wait(self.period_s)

    # --- what callers read ----------------------------------------------------------------------

    def has(self, tables: Iterable[str]) -> bool:
        return all((self.tables_dir / f"{t}{LANCE}").is_dir() for t in tables)

    def state(self) -> CopyState:
        held = self._local()
        size = sum(length for length, _ in held.values())
        return CopyState(self.serving, len(held), size, self._synced_at, self._error, self._store_bytes)

    # --- one sync -------------------------------------------------------------------------------

    def sync(self) -> bool:
        """Brings the copy to the store's latest versions; True when what it serves changed. A
        store that cannot be reached leaves the copy as it is (searches answer from it) and is
        named in the status."""
        with self._sync_lock:
            try:
                changed = self._sync()
            except (StoreUnavailable, OSError) as exc:
                if str(exc) != self._error:
                    log.warning("the local copy of the index could not be brought up to date: %s", exc)
                self._error = str(exc)
                return False
            except Exception as exc:  # never a silent stop: a copy that no longer syncs says so in status
                log.exception("the local copy of the index could not be brought up to date")
                self._error = f"{type(exc).__name__}: {exc}"
                return False
            self._error = None
            self._synced_at = datetime.now(UTC)
            return changed

    def _sync(self) -> bool:
        tables = [f.path for f in self.location.listing("", recursive=False) if f.is_dir and f.path.endswith(LANCE)]
        # Manifests first: every file they name was written before them, so it is in the listing after.
        listed = {f.path for t in tables for f in self.location.listing(f"{t}/_versions")}
        # Every commit and every cleanup adds or removes a manifest: when none did since the last
        # sync, and no dropped file waits for its grace period, there is nothing to fetch or remove.
        seen = (frozenset(tables), frozenset(listed))
        if self.serving and seen == self._seen and not self._missing:
            return False
        remote = {f.path: f for t in tables for f in self.location.listing(t)}
        total = sum(f.size for f in remote.values())
        if total > self.max_bytes:
            return self._over_bound(total)
        self._store_bytes = None
        local = self._local()
        for path in remote:
            if not safe(path):
                raise StoreUnavailable(f"the index at {self.location} holds an object named {path!r}; refusing it")
        wanted = [f for f in remote.values() if local.get(f.path) != (f.size, f.mtime_ns)]
        manifests = [f for f in wanted if is_manifest(f.path) and (f.path in listed or "/_versions/" not in f.path)]
        files = [f for f in wanted if not is_manifest(f.path)]
        new_tables = {t for t in tables if not (self.tables_dir / t).is_dir()}
        self._fetch(files)
        self._fetch(manifests)
        for table in list(new_tables):  # whole, with a version, or not yet: LanceDB opens what it lists
            staged = self._staging / "new" / table
            if any((staged / "_versions").glob("*.manifest")):
                os.replace(staged, self.tables_dir / table)
            else:
                new_tables.discard(table)
        self._forget(remote, local)
        self._seen = seen
        became = not self.serving
        self.serving = True
        return became or bool(manifests) or bool(new_tables)

    def _over_bound(self, total: int) -> bool:
        if self._store_bytes is None:
            log.warning(
                "the index's tables on the store take %.1f MB, over SEMSEARCH_LOCAL_COPY_MB (%.0f): this query "
                "replica reads the store directly",
                total / 1e6,
                self.max_bytes / 2**20,
            )
        self._store_bytes = total
        if self.serving:  # the store re-opens on the store first; the files go at the next sync
            self.serving = False
            return True
        shutil.rmtree(self.tables_dir, ignore_errors=True)
        self.tables_dir.mkdir(exist_ok=True)
        self._missing.clear()
        return False

    def _local(self) -> dict[str, tuple[int, int]]:
        out = {}
        for path in self.tables_dir.rglob("*"):
            if path.is_file():
                st = path.stat()
                out[path.relative_to(self.tables_dir).as_posix()] = (st.st_size, st.st_mtime_ns)
        return out

    def _fetch(self, files: list[StoredFile]) -> None:
        if not files:
            return
        self._staging.mkdir(exist_ok=True)
        with ThreadPoolExecutor(DOWNLOADS) as pool:
            list(pool.map(self._fetch_one, files))

    def _fetch_one(self, f: StoredFile) -> None:
        table = f.path.split("/", 1)[0]
        present = (self.tables_dir / table).is_dir()
        dest = (self.tables_dir if present else self._staging / "new") / f.path
        tmp = self._staging / f"{threading.get_ident()}-{time.monotonic_ns()}.part"
        try:
            self.location.download(f.path, tmp)
        except FileNotFoundError:  # cleaned up since the listing: only versions older than one listed
            tmp.unlink(missing_ok=True)
            return
        # The store's time on the copy: a restarted replica knows which files it already has.
        os.utime(tmp, ns=(f.mtime_ns, f.mtime_ns))
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, dest)

    def _forget(self, remote: dict[str, StoredFile], local: dict[str, tuple[int, int]]) -> None:
        """Removes what the store dropped, once the grace period has passed."""
        now = time.monotonic()
        for path in list(self._missing):
            if path in remote:
                del self._missing[path]
        for path in local:
            if path in remote:
                continue
            since = self._missing.setdefault(path, now)
            if now - since >= self.grace_s:
                (self.tables_dir / path).unlink(missing_ok=True)
                del self._missing[path]
        for table in self.tables_dir.iterdir():
            if table.is_dir() and not any(p.is_file() for p in table.rglob("*")):
                shutil.rmtree(table, ignore_errors=True)


def is_manifest(path: str) -> bool:
    """A file that makes a version visible: copied after everything it can name."""
    return path.endswith(".manifest")


def safe(path: str) -> bool:
    """An object's relative path that stays inside the copy."""
    parts = PurePosixPath(path).parts
    return bool(parts) and not PurePosixPath(path).is_absolute() and ".." not in parts
