"""`semsearch hook`: re-index on edit for agents that run no watcher (Claude Code's `PostToolUse`).

`semsearch scaffold DIR --hook` installs it in `.claude/settings.local.json`. Claude Code runs it
after every Write/Edit with the event as JSON on stdin; it asks the API for an index run of the
edited file's folder and returns at once (the API's indexer worker does the run).

- Coalesced: at most one request per `hook_coalesce_s`. An edit inside the window is not
  dropped: the first one starts a single detached follow-up (`semsearch hook --follow-up DIR`)
  that asks for a run when the window ends, covering every edit made until then. Edited paths
  stay in the state file until a run was requested for them, so a follow-up that died is made
  good by the next edit.
- Quiet: when the API is down (or refuses), the user is warned once per outage through a
  `systemMessage`, not once per save; every failure is in `.claude/semsearch-hook.log`.
- Never in the agent's way: it always exits 0 and never blocks the edit.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from pydantic import BaseModel, ValidationError

from semsearch.client import ApiError
from semsearch.config import Settings
from semsearch.project import ProjectConfig, project_client
from semsearch.schemas import RunRequest
from semsearch.spawn import NEUTRAL_CWD, child_env, python_module
from semsearch.targets import TargetError, resolve_target
from semsearch.text import one_line

STATE_FILE = ".claude/semsearch-hook.json"
LOG_FILE = ".claude/semsearch-hook.log"
# Claude Code's tools that write files; the event's tool_input names the file.
MATCHER = "Write|Edit|MultiEdit|NotebookEdit"
MAX_PENDING = 1000  # edited paths remembered between runs; past that the folder is re-read anyway


class HookRefused(OSError):
    """A file the hook keeps in `.claude/` is (or lies behind) a symlink: it is never followed."""


def open_private(project: Path, name: str, flags: int) -> TextIO:
    """`name` (`.claude/…`) opened for the hook without following a symlink anywhere on the way.

    The project is the repository's: a committed `.claude` or `.claude/semsearch-hook.json` that
    is a symlink would otherwise make the hook truncate or append to any file the user can write
    (`~/.ssh/authorized_keys`, `~/.bashrc`)."""
    folder, _, leaf = name.rpartition("/")
    directory = project / folder
    with contextlib.suppress(FileExistsError):
        directory.mkdir(mode=0o700)
    try:
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise HookRefused(f"{directory} is not a plain directory (a symlink?); remove it and edit again") from exc
    try:
        fd = os.open(leaf, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o600, dir_fd=dir_fd)
    except OSError as exc:
        raise HookRefused(f"{directory / leaf} cannot be opened ({exc.strerror}; a symlink is never followed)") from exc
    finally:
        os.close(dir_fd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise HookRefused(f"{directory / leaf} is not a regular file; remove it")
    return os.fdopen(fd, "r+" if flags & os.O_RDWR else "a")


def append_log(project: Path, line: str) -> None:
    """One line in `.claude/semsearch-hook.log`: every control character in it (an edited path may
    hold newlines) is escaped, so no path can start a line of its own in the file."""
    with contextlib.suppress(OSError), open_private(project, LOG_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND) as f:
        f.write(f"{datetime.now(UTC).isoformat(timespec='seconds')} {one_line(line)}\n")


class HookState(BaseModel):
    last_request: float = 0.0
    follow_up_at: float | None = None
    pending: list[str] = []
    warned: bool = False  # the user was told about the current outage


def edited_path(event: dict[str, Any]) -> Path | None:
    """The file a PostToolUse event's tool wrote, made absolute against the event's cwd."""
    tool_input = event.get("tool_input")
    if not isinstance(tool_input, dict):
        return None
    raw = tool_input.get("file_path") or tool_input.get("notebook_path")
    if not isinstance(raw, str) or not raw:
        return None
    return Path(event.get("cwd") or os.getcwd(), raw)


def project_dir(event: dict[str, Any]) -> Path:
    return Path(os.environ.get("CLAUDE_PROJECT_DIR") or event.get("cwd") or os.getcwd())


def spawn_follow_up(project: Path) -> subprocess.Popen[bytes]:
    """A detached `semsearch hook --follow-up`: it outlives this hook call, which must return now."""
    return subprocess.Popen(
        python_module("semsearch.cli", "hook", "--follow-up", str(project)),
        cwd=NEUTRAL_CWD,  # the project is an argument: nothing in it is on the child's import path
        env=child_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


class Hook:
    def __init__(
        self,
        project: Path,
        settings: Settings,
        clock: Callable[[], float] = time.time,
        spawn: Callable[[Path], object] = spawn_follow_up,
    ) -> None:
        self.project = project
        self.settings = settings.model_copy(update={"api_timeout_s": settings.hook_timeout_s})
        self.window = settings.hook_coalesce_s
        self.clock = clock
        self.spawn = spawn

    @contextmanager
    def state(self) -> Iterator[HookState]:
        """The state file, locked: hooks for two quick edits run at the same time."""
        with open_private(self.project, STATE_FILE, os.O_RDWR | os.O_CREAT) as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            f.seek(0)
            text = f.read()
            try:
                state = HookState.model_validate_json(text) if text.strip() else HookState()
            except ValidationError:
                self.log(f"{STATE_FILE} was unreadable; starting afresh")
                state = HookState()
            yield state
            f.seek(0)
            f.truncate()
            f.write(state.model_dump_json())

    def log(self, line: str) -> None:
        append_log(self.project, line)

    def on_edit(self, path: Path) -> str | None:
        """Handles one edit; returns a message for the user, or None."""
        with self.state() as state:
            if str(path) not in state.pending and len(state.pending) < MAX_PENDING:
                state.pending.append(str(path))
            now = self.clock()
            # A follow-up long overdue has died (a reboot, a kill); this edit takes over.
            if state.follow_up_at is not None and now < state.follow_up_at + self.window:
                return None
            if now - state.last_request < self.window:
                state.follow_up_at = state.last_request + self.window
                self.log(f"edit of {path} within {self.window:g} s of the last run request; one follow-up is due")
                self.spawn(self.project)
                return None
            state.follow_up_at = None
            failure = self.request(state, now)
            if failure is None or state.warned:
                return None
            state.warned = True
            return (
                f"semsearch: edits are not being re-indexed: {failure}. You are told once until it works "
                f"again; details in {self.project / LOG_FILE}."
            )

    def follow_up(self) -> None:
        """The detached follow-up: waits for the window to end, then asks for one run. Nobody
        reads its output: a failure is logged, and the next edit tells the user."""
        with self.state() as state:
            due = state.follow_up_at
        if due is None:
            return
        time.sleep(max(0.0, due - self.clock()))
        with self.state() as state:
            state.follow_up_at = None
            if state.pending:
                self.request(state, self.clock())

    def request(self, state: HookState, now: float) -> str | None:
        """One run per folder with pending edits; returns why it failed, and then the edits stay pending."""
        try:
            with project_client(self.settings, ProjectConfig.discover(self.project)) as api:
                folders = api.folders()
                wanted: dict[str, list[str]] = {}
                for pending in state.pending:
                    try:
                        (folder,), rel = resolve_target(folders, pending)
                    except TargetError:
                        self.log(f"{pending} is in no registered folder; not indexed")
                        continue
                    wanted.setdefault(folder.name, []).append(rel)
                for name, edited in sorted(wanted.items()):
                    # Named, so a run of the folder already under way (a long first run) embeds them next.
                    run = api.request_run(RunRequest(folder=name, paths=sorted({p for p in edited if p})))
                    edits = len(edited)
                    self.log(
                        f"requested run {run.id} for folder {name} ({edits} edited file{'s' if edits != 1 else ''})"
                    )
        except ApiError as exc:
            self.log(f"could not request an index run: {exc}")
            return str(exc)
        if state.warned:
            self.log("the API answers again")
        state.warned = False
        state.last_request = now
        state.pending = []
        return None


def run(stdin: str, follow_up: Path | None, settings: Settings) -> str | None:
    """The CLI's `semsearch hook`: the JSON Claude Code reads from stdout, if any."""
    if follow_up is not None:
        with contextlib.suppress(HookRefused):  # nobody reads a follow-up's output; the next edit says why
            Hook(follow_up, settings).follow_up()
        return None
    try:
        event = json.loads(stdin or "{}")
    except json.JSONDecodeError:
        return None
    path = edited_path(event) if isinstance(event, dict) else None
    if path is None:
        return None
    try:
        message = Hook(project_dir(event), settings).on_edit(path)
    except HookRefused as exc:
        message = f"semsearch: edits are not being re-indexed: {exc}"
    return json.dumps({"systemMessage": message}) if message else None
