"""The long-running indexer: runs requested index runs and/or follows file changes.

Everything it does goes through one queue and one loop, so a watched change and a
requested run never index the same folder at the same time.
"""

from __future__ import annotations

import os
import queue
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import watchfiles

from semsearch.client import ApiClient, ApiError
from semsearch.config import Settings
from semsearch.embedder.client import EmbedderError
from semsearch.embedder.interface import Embedder
from semsearch.indexer.main import connect
from semsearch.indexer.progress import Reporter
from semsearch.limits import MAX_LOG_LINES
from semsearch.malloc import trim
from semsearch.schemas import Run, RunFinish, RunLine, RunProgress
from semsearch.targets import resolve_target

DEBOUNCE_MS = 1_000  # editors and `git checkout` write in bursts; one pass per burst
FOLDER_POLL_S = 10.0  # how often the watcher notices folders added or removed
RETRY_S = 3.0  # after the API or embedder was unreachable


@dataclass(frozen=True)
class _Job:
    folder: str | None = None  # a watched folder that changed
    run: Run | None = None  # a requested run


class Worker:
    def __init__(
        self,
        settings: Settings,
        watch: bool,
        requests: bool,
        path: str | None = None,
        verbose: bool = False,
        echo: bool = True,
        embedder: Embedder | None = None,
    ) -> None:
        """`echo`: print what runs do on this process's stdout (a worker process's log); a worker
        that is a thread of another program (`mcp --standalone`, whose stdout is the MCP protocol)
        says False: a requested run's lines still reach whoever asked, through the API."""
        self.settings = settings
        self.echo = echo
        self.embedder = embedder  # one this process has (the model in process); else the gRPC service
        self.watch = watch
        self.requests = requests
        self.path = path
        self.verbose = verbose
        self.name = f"worker pid {os.getpid()} on {socket.gethostname()}"
        self.jobs: queue.Queue[_Job] = queue.Queue()
        # One requested run at a time is taken from the API: the rest stay queued there, where
        # identical requests share one run and can be cancelled (not here, claimed and waiting).
        self._free = threading.Semaphore(1)
        # What the watcher saw change, by folder name (relative paths), for the run in progress to
        # embed next (`Indexer.urgent`): a file edited during a long run is not left for its end.
        self._touched: dict[str, set[str]] = {}
        self._touched_lock = threading.Lock()
        self._stop: threading.Event | None = None  # set by run(): a run in progress ends at the next file

    def run(self, stop: threading.Event) -> None:
        self._stop = stop
        threads = []
        if self.requests:
            threads.append(threading.Thread(target=self._claim_loop, args=(stop,), daemon=True, name="claim"))
        if self.watch:
            threads.append(threading.Thread(target=self._watch_loop, args=(stop,), daemon=True, name="watch"))
        for thread in threads:
            thread.start()
        if self.watch:
            self.jobs.put(_Job(folder="*"))  # catch up on what changed while nobody watched
        while not stop.is_set():
            try:
                job = self.jobs.get(timeout=0.5)
            except queue.Empty:
                continue
            if job.run is not None:
                self._run_request(job.run)
            elif job.folder is not None:
                self._index_changed(job.folder)
            # A pass's buffers (files read, chunks, batches) are garbage now; glibc keeps freed heap
            # unless asked, and a worker waits far longer than it works.
            trim()

    # --- sources of work ---------------------------------------------------------------

    def _claim_loop(self, stop: threading.Event) -> None:
        with ApiClient(self.settings) as api:
            while not stop.is_set():
                if not self._free.acquire(timeout=0.5):
                    continue  # the last claimed run is still being indexed
                try:
                    run = api.claim_run(self.name, wait_s=10)
                except ApiError:
                    self._free.release()
                    stop.wait(RETRY_S)
                    continue
                if run is None:
                    self._free.release()
                else:
                    self.jobs.put(_Job(run=run))  # _run_request releases the slot when it is done

    def _watch_loop(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                with ApiClient(self.settings) as api:
                    folders = {f.path: f.name for f in resolve_target(api.folders(), self.path)[0]}
            except (ApiError, ValueError):
                stop.wait(RETRY_S)
                continue
            roots = [p for p in folders if Path(p).is_dir()]
            if not roots:
                stop.wait(FOLDER_POLL_S)
                continue
            started = time.monotonic()
            for changes in watchfiles.watch(
                *roots, debounce=DEBOUNCE_MS, stop_event=stop, yield_on_timeout=True, rust_timeout=2_000
            ):
                touched = self._note_touched(folders, [changed for _, changed in changes])
                for name in sorted(touched):
                    self.jobs.put(_Job(folder=name))
                if time.monotonic() - started > FOLDER_POLL_S:
                    started = time.monotonic()
                    if self._folders_changed(folders):
                        break  # watch the new set of folders

    def _note_touched(self, folders: dict[str, str], changed: list[str]) -> set[str]:
        """The folders these changes are in; the files among them kept for the run in progress."""
        names: set[str] = set()
        with self._touched_lock:
            for path in changed:
                for root, name in folders.items():
                    if path == root:
                        names.add(name)
                    elif path.startswith(root.rstrip(os.sep) + os.sep):
                        names.add(name)
                        self._touched.setdefault(name, set()).add(os.path.relpath(path, root).replace(os.sep, "/"))
        return names

    def _stopping(self) -> bool:
        return self._stop is not None and self._stop.is_set()

    def take_touched(self, folder: str) -> set[str]:
        """The relative paths the watcher saw change in `folder` since the last call."""
        with self._touched_lock:
            return self._touched.pop(folder, set())

    def _folders_changed(self, known: dict[str, str]) -> bool:
        try:
            with ApiClient(self.settings) as api:
                return {f.path: f.name for f in resolve_target(api.folders(), self.path)[0]} != known
        except (ApiError, ValueError):
            return False

    # --- doing the work -----------------------------------------------------------------

    def _index_changed(self, name: str) -> None:
        pending = {name}
        while True:  # fold queued duplicates into this pass
            try:
                job = self.jobs.get_nowait()
            except queue.Empty:
                break
            if job.folder is not None:
                pending.add(job.folder)
            else:
                self.jobs.put(job)
                break
        try:
            reporter = Reporter(self.verbose, False, self.echo)
            with connect(self.settings, reporter, embedder=self.embedder) as (indexer, api):
                indexer.urgent = self.take_touched
                indexer.stopping = self._stopping
                folders, scope = resolve_target(api.folders(), self.path)
                targets = folders if "*" in pending else [f for f in folders if f.name in pending]
                if targets:
                    summary = indexer.run(targets, scope)
                    self._say("watch  " + summary.line(summary.seconds))
        except (ApiError, EmbedderError, ValueError) as exc:
            self._say(f"semsearch watch: {exc}; retrying in {RETRY_S:.0f}s")
            time.sleep(RETRY_S)
            self.jobs.put(_Job(folder="*" if "*" in pending else sorted(pending)[0]))

    def _say(self, text: str) -> None:
        if self.echo:
            print(text, flush=True)

    def _run_request(self, run: Run) -> None:
        try:
            self._execute(run)
        finally:
            self._free.release()

    def _execute(self, run: Run) -> None:
        """A requested run, executed with the same code as a local one; its output lines go to the
        run's log (the CLI that asked prints them), its progress and summary to the run."""
        asked = run.request
        reporter = Reporter(verbose=self.verbose or asked.verbose, interactive=False, echo=self.echo)
        lines: list[RunLine] = []
        reporter.sink = lambda text, stream: lines.append(RunLine(text=text[:4000], stream=stream))  # type: ignore[arg-type]
        last = 0.0

        def taken() -> list[RunLine]:
            out = lines[:MAX_LOG_LINES]
            del lines[: len(out)]
            return out

        asked_for: dict[str, set[str]] = {}  # files named in requests since the run began (`Run.urgent`)

        def urgent(folder: str) -> set[str]:
            return self.take_touched(folder) | asked_for.pop(folder, set())

        try:
            with connect(self.settings, reporter, asked.concurrency, self.embedder) as (indexer, api):
                indexer.urgent = urgent

                def progress(folder: str, done: int, total: int, chunks: int) -> None:
                    nonlocal last
                    if time.monotonic() - last > 0.5 or done == total:
                        last = time.monotonic()
                        report = RunProgress(folder=folder, files_done=done, files_total=total, chunks=chunks)
                        answer = api.run_progress(run.id, report.model_copy(update={"lines": taken()}))
                        for name, paths in answer.urgent.items():
                            asked_for.setdefault(name, set()).update(paths)

                reporter.hook = progress
                folders = [f for f in api.folders() if asked.folder in (None, f.name)]
                if asked.folder is not None and not folders:
                    raise ApiError(404, f"no folder named {asked.folder!r}; `semsearch list` shows the registered ones")
                scope = (asked.scope or "").strip("/")
                if asked.dry_run:
                    plan = indexer.plan(folders, scope, asked.force)
                    api.finish_run(run.id, RunFinish(plan=plan, lines=taken()))
                    return
                summary = indexer.run(folders, scope, force=asked.force, max_files=asked.max_files)
                error = "; ".join(summary.errors) or None
                while len(lines) > MAX_LOG_LINES:  # a long run's last lines; the summary has the totals
                    api.run_progress(run.id, RunProgress(folder=run.progress.folder, lines=taken()))
                api.finish_run(run.id, RunFinish(summary=summary.wire(), error=error, lines=taken()))
        except (ApiError, EmbedderError) as exc:
            try:
                with ApiClient(self.settings) as api:
                    api.finish_run(run.id, RunFinish(error=str(exc), lines=taken()))
            except ApiError:
                pass
