"""`semsearch index`: ask the API for a run and follow it until it ends.

The one run path: an indexer worker (started by `semsearch serve`, the `indexer-worker`
compose service) executes the run with the same code as the one-shot `python -m
semsearch.indexer`, and this prints what a local run printed — the per-folder lines, a
progress bar on a terminal (stderr), and the JSON summary as the last stdout line — needing
nothing but `SEMSEARCH_URL` (and the token).
"""

from __future__ import annotations

import json
import sys
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

from semsearch.client import ApiClient
from semsearch.report import print_summary
from semsearch.schemas import FINISHED, Run, RunRequest, RunSummary

POLL_S = 1.0  # each status request waits this long for the run to end (a long poll)
NO_WORKER = (
    "no indexer worker took index run {id} within {wait:.0f} s, so it was cancelled: start one with "
    "`semsearch serve` (it runs a worker) or `docker compose up -d indexer-worker`; or run the one-shot "
    "indexer where the folders are: `python -m semsearch.indexer`"
)


def fail(message: str) -> int:
    """A run that could not be asked for or ended without a summary: one line, the JSON summary, 2."""
    print(f"semsearch index: {message}", file=sys.stderr)
    print(json.dumps(RunSummary(errors=[message]).dump()))
    return 2


class Follower:
    def __init__(self, api: ApiClient, claim_wait_s: float, interactive: bool | None = None) -> None:
        self.api = api
        self.claim_wait_s = claim_wait_s
        self.interactive = sys.stderr.isatty() if interactive is None else interactive
        self.printed = 0  # lines of the run's log printed so far
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        self._bar_folder: str | None = None

    def run(self, request: RunRequest) -> int:
        """Requests the run, prints its output as it comes; the exit code of a local run (0 or 1)."""
        run = self.api.request_run(request)
        asked = time.monotonic()
        try:
            while run.state not in FINISHED:
                if run.state == "queued" and time.monotonic() - asked > self.claim_wait_s:
                    self.api.cancel_run(run.id)
                    return self.fail(NO_WORKER.format(id=run.id, wait=self.claim_wait_s))
                run = self.api.run(run.id, POLL_S)
                self.show(run)
        except KeyboardInterrupt:
            self.api.cancel_run(run.id)
            self.close_bar()
            print(f"semsearch index: cancelled run {run.id}", file=sys.stderr)
            return 130
        self.close_bar()
        if run.plan is not None:
            print(json.dumps(run.plan.dump()))
            return 0
        if run.summary is None:
            return self.fail(run.error or f"index run {run.id} ended {run.state} without a summary")
        print_summary(run.summary)
        return 1 if run.summary.errors or run.state != "done" else 0

    def show(self, run: Run) -> None:
        new = run.log[max(0, self.printed - run.log_offset) :]
        for line in new:
            if line.stream == "err":
                print(line.text, file=sys.stderr)
            elif self._bar is not None:
                self._bar.console.print(line.text, markup=False, highlight=False)
            else:
                print(line.text, flush=True)
        self.printed = run.log_offset + len(run.log)
        if self.interactive and run.state == "running" and run.progress.files_total:
            self.advance(run)

    def advance(self, run: Run) -> None:
        p = run.progress
        if self._bar is None or p.folder != self._bar_folder:
            self.close_bar()
            self._bar = Progress(
                TextColumn("  {task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("files  {task.fields[chunks]:,} chunks"),
                TimeRemainingColumn(),
                console=Console(stderr=True, highlight=False),
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task(p.folder or "", total=p.files_total, chunks=0)
            self._bar_folder = p.folder
        assert self._task is not None
        self._bar.update(self._task, completed=p.files_done, total=p.files_total, chunks=p.chunks)

    def close_bar(self) -> None:
        if self._bar is not None:
            self._bar.stop()
        self._bar = self._task = None

    def fail(self, message: str) -> int:
        self.close_bar()
        return fail(message)
