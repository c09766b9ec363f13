"""What a run shows: a rich progress bar per folder on a terminal, plain lines otherwise.

Lines a script may read go to stdout (the per-folder lines, the total, the JSON summary);
the bar and `--verbose` per-file lines go to stderr.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

ProgressHook = Callable[[str, int, int, int], None]  # folder, files done, files total, chunks


class Reporter:
    def __init__(self, verbose: bool = False, interactive: bool | None = None, echo: bool = True) -> None:
        """`echo`: print the run's lines (a library caller that reads the summary says False)."""
        self.verbose = verbose
        self.echo = echo
        self.interactive = sys.stderr.isatty() if interactive is None else interactive
        self.err = Console(stderr=True, highlight=False)
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self.hook: ProgressHook | None = None
        # A requested run's log: every line goes there too, with the stream a local run prints it on.
        self.sink: Callable[[str, str], None] | None = None

    def line(self, text: str) -> None:
        if self.sink is not None:
            self.sink(text, "out")
        if not self.echo:
            return
        if self._progress is not None:
            self._progress.console.print(text, markup=False, highlight=False)
        else:
            print(text, flush=True)

    def file(self, action: str, rel: str, detail: str = "") -> None:
        if self.verbose:
            text = f"  {action:<10} {rel}" + (f"  ({detail})" if detail else "")
            if self.sink is not None:
                self.sink(text, "err")
            self.err.print(text, markup=False)

    def start_folder(self, name: str, total: int) -> None:
        if not self.interactive:
            return
        self._progress = Progress(
            TextColumn("  {task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("files  {task.fields[chunks]:,} chunks"),
            TextColumn("{task.fields[rate]}"),
            TimeRemainingColumn(),
            console=self.err,
            transient=True,
        )
        self._progress.start()
        self._task = self._progress.add_task(name, total=total, chunks=0, rate="")

    def advance(self, folder: str, done: int, total: int, chunks: int, rate: float) -> None:
        if self._progress is not None and self._task is not None:
            text = f"{rate:.1f} chunks/s" if rate else ""
            self._progress.update(self._task, completed=done, total=total, chunks=chunks, rate=text)
        if self.hook is not None:
            self.hook(folder, done, total, chunks)

    def end_folder(self) -> None:
        if self._progress is not None:
            self._progress.stop()
        self._progress = self._task = None
