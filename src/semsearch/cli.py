"""The `semsearch` command: a thin client of the REST API, plus `serve` and `mcp`."""

from __future__ import annotations

import importlib
import json
import os
import secrets
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar, cast

import click
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table
from rich.text import Text

from semsearch.client import ApiClient, ApiError, snapshot_manifest
from semsearch.config import Settings, load_settings, setting_problems
from semsearch.corpus.repositories import RepositoryError, check_url, is_url
from semsearch.follow import Follower, fail
from semsearch.project import ProjectConfig
from semsearch.schemas import (
    Folder,
    FolderIn,
    GatherRequest,
    GrepRequest,
    LocalCopyStatus,
    ModelSwitch,
    ModelSwitchIn,
    RunRequest,
    SearchRequest,
)
from semsearch.spawn import child_env, python_module
from semsearch.targets import TargetError, resolve_target
from semsearch.version import __version__

F = TypeVar("F", bound=Callable[..., Any])
# `semsearch serve` restarts a service that dies: after 1, 2, 4 … s (at most this), and gives up when
# it dies this many times in a row, each within SERVE_HEALTHY_S of starting (it cannot start at all).
SERVE_MAX_BACKOFF_S = 30.0
SERVE_MAX_QUICK_FAILURES = 5
SERVE_HEALTHY_S = 30.0
console = Console()

# Every verb's exit status (grep's convention, clig.dev's yardstick): scripts tell "nothing found"
# from "could not ask". The CLI reference prints this table.
FOUND, NOTHING, FAILED = 0, 1, 2
EXIT_CODES = {
    FOUND: "success: something was found, or what was asked was done",
    NOTHING: "nothing found (search, gather, grep, symbols, outline); for `index`, the run finished but "
    "some files failed (its summary lists them)",
    FAILED: "usage error, invalid input, or the API refused or could not be reached: nothing was done",
    130: "interrupted (Ctrl-C); `index` cancels the run it asked for",
}


class Failure(click.ClickException):
    """An error that is not the caller's usage: one line, exit code 2."""

    exit_code = FAILED

    def show(self, file: Any = None) -> None:
        click.echo(f"semsearch: {self.format_message()}", err=True)


def api_errors(fn: F) -> F:
    """Turns API errors into one readable line and exit code 2, never a traceback."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ApiError as exc:
            raise Failure(str(exc)) from exc

    return wrapper  # type: ignore[return-value]


def piped() -> bool:
    """stdout is a pipe or a file: plain tab-separated lines instead of tables and decorations."""
    return not sys.stdout.isatty()


def rows_out(header: list[str], rows: list[list[str]]) -> None:
    """A table on a terminal; tab-separated lines (the header first) when piped."""
    if piped():
        for row in [header, *rows]:
            click.echo("\t".join(" ".join(cell.split()) for cell in row))
        return
    table = Table(*header)
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))  # Text: a path or label may look like markup
    console.print(table)


def print_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


def confirm(action: str, yes: bool) -> None:
    """Destructive verbs ask on a terminal; a script says --yes (never a silent default)."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise click.UsageError(f"this would {action}; pass --yes to confirm when not at a terminal")
    if not click.confirm(f"This will {action}. Continue?", default=False, err=True):
        raise Failure("nothing was changed")


def count_option(default: int, what: str = "results") -> Callable[[F], F]:
    """The one count flag of every verb that returns a list."""
    return click.option("-k", "--limit", "limit", type=int, default=default, show_default=True,
                        help=f"At most this many {what}.")  # fmt: skip


def folder_option(fn: F) -> F:
    return click.option("--folder", "folders", multiple=True, metavar="NAME",
                        help="Only this folder (repeatable, or a,b).")(fn)  # fmt: skip


def glob_option(fn: F) -> F:
    return click.option("--glob", "globs", multiple=True, metavar="GLOB",
                        help="Only paths matching this glob, e.g. 'src/**/*.py' (repeatable, or a,b).")(fn)  # fmt: skip


def fields_of(
    options: dict[str, Any], folders: tuple[str, ...], globs: tuple[str, ...], glob_field: str, **given: Any
) -> dict[str, Any]:
    """A request's fields from a verb's options: the ones set (a repeated option joined as a,b; a
    0 is set, an empty value is not), the shared --folder and --glob under the field names this
    request uses, and `given`."""
    joined = {key: ",".join(v) if isinstance(v, tuple) else v for key, v in options.items()}
    fields = {key: v for key, v in joined.items() if v is not None and v is not False and v != ""} | given
    fields |= {"folder": ",".join(folders)} if folders else {}
    fields |= {glob_field: ",".join(globs)} if globs else {}
    return fields


def listed(values: tuple[str, ...] | str | None) -> list[str] | None:
    """A repeatable option's values, each of which may also be a,b."""
    if not values:
        return None
    items = [values] if isinstance(values, str) else list(values)
    return [part.strip() for item in items for part in item.split(",") if part.strip()] or None


def settings() -> Settings:
    """This invocation's settings, built once from the environment and shared by what it calls."""
    context = click.get_current_context()
    if not isinstance(context.find_root().obj, Settings):
        context.find_root().obj = Settings()
    return cast(Settings, context.find_root().obj)


def service_part(module: str, extra: str) -> Any:
    """A service's module for a command that runs it in this process; a missing extra is one line."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise Failure(
            f"this command needs semsearch's {extra!r} extra ({exc.name or exc} is not installed): "
            f"pip install 'semsearch[{extra}]'"
        ) from exc


# `semsearch --help` lists the verbs under these headings; each verb is under exactly one.
SECTIONS = {
    "Search and read": ["search", "gather", "grep", "symbols", "outline", "cat", "explain", "eval"],
    "Folders and indexing": ["add", "list", "folders", "remove", "index", "index-status", "status"],
    "Agents": ["mcp", "scaffold", "hook"],
    "Administration": ["token", "snapshot", "model", "config", "env-file", "completion"],
    "Services (what `serve`, containers and pods run)": ["serve", "api", "embedder", "worker", "indexer"],
}


# The flags the listing verbs share, and the request fields each fills (search's `k` and grep's
# `max_results` are both `--limit`); tests/test_cli_surface.py checks every other flag is a field.
SHARED_FLAGS = {
    "limit": ("k", "max_results", "limit"),
    "folders": ("folder",),
    "globs": ("path_glob", "file_glob"),
    "kinds": ("kind",),
    "boosts": ("path_boosts",),
}


def flag_of(command: click.Command, field: str) -> str:
    """The flag a person typed for a request model's field (`--since` for `date_from`)."""
    for param in command.params:
        names = {
            param.name,
            *SHARED_FLAGS.get(param.name or "", ()),
            *(o.lstrip("-").replace("-", "_") for o in param.opts),
        }
        if field in names or _snake(field) in names:
            return param.opts[-1] if isinstance(param, click.Option) else param.human_readable_name
    return field


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


def one_line(exc: ValidationError, command: click.Command | None) -> str:
    if exc.title == "Settings":
        return setting_problems(exc)
    problems = []
    for error in exc.errors():
        loc = [str(part) for part in error["loc"]]
        where = (flag_of(command, loc[0]) if command else loc[0]) if loc else "value"
        problems.append(f"{where}{''.join(f'.{part}' for part in loc[1:])}: {error['msg']}")
    return "; ".join(problems)


class Verb(click.Command):
    """An invalid value ends in one line that names the flag the person typed, exit code 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ValidationError as exc:
            click.echo(f"semsearch: {one_line(exc, self)}", err=True)
            sys.exit(FAILED)


class Cli(click.Group):
    """Bad settings and invalid arguments end in one line naming the problem, never a traceback."""

    command_class = Verb
    group_class = type  # subgroups (token, snapshot) are Cli too, their verbs Verb

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ValidationError as exc:
            click.echo(f"semsearch: {one_line(exc, None)}", err=True)
            sys.exit(FAILED)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        if self is not main:
            super().format_commands(ctx, formatter)
            return
        for title, names in SECTIONS.items():
            rows = [
                (n, c.get_short_help_str(limit=70)) for n in names if (c := self.get_command(ctx, n)) and not c.hidden
            ]
            with formatter.section(title):
                formatter.write_dl(rows)


@click.group(cls=Cli, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="semsearch")
def main() -> None:
    """Self-hosted retrieval over folders of code and documents."""


# --- running the services ---------------------------------------------------------


@main.command()
@click.option("--host", help="API bind address (default: SEMSEARCH_HOST, 127.0.0.1).")
@click.option("--port", type=int, help="API port (default: SEMSEARCH_PORT, 8765).")
@click.option("--embedder-port", type=int, help="Embedder port (default: SEMSEARCH_EMBEDDER_PORT, 8766).")
@click.option("--watch", is_flag=True, help="Also re-index registered folders as their files change.")
def serve(host: str | None, port: int | None, embedder_port: int | None, watch: bool) -> None:
    """Run the embedder, the API and an indexer worker (their container entrypoints) until Ctrl-C."""
    defaults = settings()  # the flags override the settings; the settings hold the defaults
    host = host or defaults.host
    port = port or defaults.port
    embedder_port = embedder_port or defaults.embedder_port
    env = child_env(
        SEMSEARCH_HOST=host,
        SEMSEARCH_PORT=str(port),
        SEMSEARCH_EMBEDDER_PORT=str(embedder_port),
        SEMSEARCH_EMBEDDER_ADDR=os.environ.get("SEMSEARCH_EMBEDDER_ADDR", f"127.0.0.1:{embedder_port}"),
    )
    shown = Settings(host=host, port=port)
    commands = {
        "embedder": python_module("semsearch.embedder"),
        "api": python_module("semsearch.api"),
        # Runs index requests made over REST/MCP; --watch also follows file changes.
        "indexer": python_module("semsearch.indexer", "--worker", *(["--watch"] if watch else [])),
    }
    children = {name: subprocess.Popen(argv, env=env) for name, argv in commands.items()}
    started = dict.fromkeys(children, time.monotonic())
    quick_failures = dict.fromkeys(children, 0)
    restart_at: dict[str, float] = {}
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    click.echo(
        f"semsearch {__version__}: API {shown.api_url}  embedder 127.0.0.1:{embedder_port}  "
        f"data {shown.data_dir}  (Ctrl-C stops)"
    )
    code = 0
    while not stopping:
        now = time.monotonic()
        for name, proc in children.items():
            if name in restart_at or proc.poll() is None:
                continue
            # One crash (a bad request, the OOM killer) must not take the other services down: restart
            # it, backing off while it keeps dying young, and give up only if it cannot start at all.
            ran = now - started[name]
            quick_failures[name] = quick_failures[name] + 1 if ran < SERVE_HEALTHY_S else 1
            if quick_failures[name] > SERVE_MAX_QUICK_FAILURES:
                click.echo(
                    f"semsearch serve: {name} exited with code {proc.returncode} {quick_failures[name] - 1} times "
                    f"within {SERVE_HEALTHY_S:.0f} s of starting; stopping (its output above says why)",
                    err=True,
                )
                code, stopping = FAILED, True
                break
            delay = min(SERVE_MAX_BACKOFF_S, 2.0 ** (quick_failures[name] - 1))
            click.echo(
                f"semsearch serve: {name} exited with code {proc.returncode} after {ran:.0f} s; "
                f"restarting it in {delay:.0f} s",
                err=True,
            )
            restart_at[name] = now + delay
        for name, when in list(restart_at.items()):
            if not stopping and now >= when:
                del restart_at[name]
                children[name] = subprocess.Popen(commands[name], env=env)
                started[name] = time.monotonic()
                click.echo(f"semsearch serve: {name} restarted (pid {children[name].pid})", err=True)
        time.sleep(0.2)
    for proc in children.values():
        if proc.poll() is None:
            proc.terminate()
    deadline = time.monotonic() + 10
    for proc in children.values():
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
    sys.exit(code)


@main.command()
@click.argument("folders", nargs=-1, type=click.Path(exists=True, file_okay=False))
@click.option("--http", is_flag=True, help="Streamable HTTP instead of stdio.")
@click.option("--host", help="HTTP bind address (default 127.0.0.1).")
@click.option("--port", type=int, help="HTTP port (default 8767).")
@click.option(
    "--standalone",
    is_flag=True,
    help="Everything in this one process (the model, the index's API on SEMSEARCH_PORT, a worker): "
    "no `semsearch serve` needed. For one agent on a laptop.",
)
def mcp(folders: tuple[str, ...], http: bool, host: str | None, port: int | None, standalone: bool) -> None:
    """Run the MCP bridge: stdio for local agents (Claude Code, Cursor, Zed…), --http for remote ones.

    With --standalone, FOLDERS are registered if they are not yet and indexed in the background
    while the agent starts, e.g. `claude mcp add semsearch -- semsearch mcp --standalone ~/code/api`."""
    if folders and not standalone:
        raise click.UsageError("FOLDERS go with --standalone; with `semsearch serve` add them by `semsearch add PATH`")
    if standalone:
        if http:
            raise click.UsageError("--standalone serves one agent over stdio; drop --http (or run `semsearch serve`)")
        service_part("semsearch.standalone", "all").main(settings(), folders)
        return
    bridge = service_part("semsearch.mcp_bridge.main", "mcp").main

    argv = ["--http"] if http else []
    argv += ["--host", host] if host else []
    argv += ["--port", str(port)] if port else []
    bridge(argv)


# Each service as a verb, so any topology (a container, a Kubernetes pod, a second embedder on
# another port) starts without knowing module paths. Options override the settings they name,
# built once here and handed to the service (nothing is written into the environment).


@main.command("embedder")
@click.option("--host", help="Bind address (default: SEMSEARCH_EMBEDDER_HOST, 127.0.0.1).")
@click.option("--port", type=int, help="gRPC port (default: SEMSEARCH_EMBEDDER_PORT, 8766).")
@click.option("--model", type=click.Path(exists=True), help="A model folder or .onnx file (default: SEMSEARCH_MODEL).")
def embedder_(host: str | None, port: int | None, model: str | None) -> None:
    """Run the embedder (gRPC) in this process."""
    config = load_settings("semsearch embedder", embedder_host=host, embedder_port=port, model=model)
    service_part("semsearch.embedder.server", "embedder").main(config)


@main.command("api")
@click.option("--host", help="Bind address (default: SEMSEARCH_HOST, 127.0.0.1).")
@click.option("--port", type=int, help="Port (default: SEMSEARCH_PORT, 8765).")
@click.option("--role", type=click.Choice(["all", "query", "writer"]), help="Default: SEMSEARCH_ROLE, all.")
def api_(host: str | None, port: int | None, role: str | None) -> None:
    """Run the REST API (it owns the index) in this process; `--role query` for a read replica."""
    config = load_settings("semsearch api", host=host, port=port, role=role)
    service_part("semsearch.api.__main__", "api").main(config)


@main.command("worker")
@click.option("--watch", is_flag=True, help="Also follow file changes in the registered folders.")
def worker(watch: bool) -> None:
    """Run an indexer worker: it executes the runs `semsearch index` (or the MCP `index` tool) requests."""
    indexer = service_part("semsearch.indexer.__main__", "indexer")
    indexer.main(["--worker", *(["--watch"] if watch else [])])


@main.command("indexer", context_settings={"ignore_unknown_options": True, "help_option_names": []})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def indexer_(args: tuple[str, ...]) -> None:
    """Run the indexer in this process: one pass over every folder, or PATH, and exit (the scheduled
    job's entrypoint). Takes the indexer's own options: `semsearch indexer --help`."""
    service_part("semsearch.indexer.__main__", "indexer").main(list(args))


# --- corpus -----------------------------------------------------------------------


@main.command()
@click.argument("paths", nargs=-1, required=True, metavar="PATH|URL...")
@click.option("--name", help="Name for the folder (default: its basename); only with one PATH or URL.")
@click.option("--allow-outside-root", is_flag=True, help="Allow a folder outside SEMSEARCH_CORPUS_ROOT (your home).")
@click.option("--branch", help="A repository URL's branch (default: the remote's default branch).")
@api_errors
def add(paths: tuple[str, ...], name: str | None, allow_outside_root: bool, branch: str | None) -> None:
    """Register folders to index, or git repositories by URL (https://, ssh://, git://, file://,
    git@host:path): the API keeps a shallow clone in its data directory and fetches it before each
    index run; credentials come from your git configuration only. A folder already registered (by
    this path or through a link to it) is left as it is, so a script can run `add` then `index`
    every time."""
    if name and len(paths) > 1:
        raise click.UsageError("--name goes with a single PATH or URL")
    urls = [p for p in paths if is_url(p)]
    if branch and not urls:
        raise click.UsageError("--branch goes with a repository URL")
    for path in paths:  # a bad name, path or URL is a usage error before anything is asked of the API
        if path in urls:
            FolderIn(url=path, name=name, branch=branch)
            try:
                check_url(path)
            except RepositoryError as exc:
                raise click.UsageError(str(exc)) from exc
        else:
            FolderIn(path=os.path.abspath(os.path.expanduser(path)), name=name, allow_outside_root=allow_outside_root)
    with ApiClient(settings()) as api:
        registered = api.folders()
        known = {os.path.realpath(f.path): f for f in registered}
        for path in paths:
            if path in urls:
                cloned = api.add_folder(None, name, url=path, branch=branch)
                click.echo(f"added {cloned.name}  {cloned.url}  (clone: {cloned.path})")
                continue
            if os.path.isfile(os.path.expanduser(path)):
                raise click.UsageError(f"{path} is a file; add the folder it is in (or a repository's URL)")
            same = known.get(os.path.realpath(os.path.expanduser(path)))
            if same is not None and name in (None, same.name):
                click.echo(f"already registered: {same.name}  {same.path}")
                continue
            folder = api.add_folder(os.path.abspath(os.path.expanduser(path)), name, allow_outside_root)
            click.echo(f"added {folder.name}  {folder.path}")
    click.echo("Run `semsearch index` to index it.")


def _waiting(folder: Folder) -> str:
    """` (1,200 embedded so far)` while a run embeds what it made findable by words; else nothing."""
    done = folder.embedded_chunks
    return "" if done is None or done >= folder.chunks else f" ({done:,} embedded so far)"


@main.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the REST answer (the folders) as JSON.")
@api_errors
def list_(as_json: bool) -> None:
    """The registered folders with files, chunks and last indexed time."""
    _list(as_json)


@main.command("folders")
@click.option("--json", "as_json", is_flag=True, help="Print the REST answer (the folders) as JSON.")
@api_errors
def folders_(as_json: bool) -> None:
    """Same as `list` (the MCP tool's name)."""
    _list(as_json)


@main.command("eval")
@click.argument("questions", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--qrels", type=click.Path(dir_okay=False, path_type=Path),
              help="BEIR layout: QUESTIONS is queries.jsonl and this the qrels TSV (ids are file names).")  # fmt: skip
@click.option("--mode", "modes", multiple=True, type=click.Choice(["hybrid", "vector", "lexical"]),
              help="Modes to score (repeatable; default: all three).")  # fmt: skip
@count_option(100, "results per question (Recall@k is at this depth)")
@folder_option
@click.option("--compare", "arms", multiple=True, metavar="NAME=JSON",
              help="Another arm: search fields to change, e.g. 'plain={\"pathBoosts\": {}}' (repeatable).")  # fmt: skip
@click.option("--worst", type=int, default=5, show_default=True, help="List this many of the worst questions.")
@click.option("--run-file", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the first arm's hybrid ranking as a TREC run (for any standard scorer).")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print every figure, per arm, mode and question, as JSON.")
@api_errors
def eval_(
    questions: Path,
    qrels: Path | None,
    modes: tuple[str, ...],
    limit: int,
    folders: tuple[str, ...],
    arms: tuple[str, ...],
    worst: int,
    run_file: Path | None,
    as_json: bool,
) -> None:
    """Score search on your own questions: MRR@10, nDCG@10 and Recall@k per mode, worst questions first."""
    from semsearch import evaluate

    try:
        asked, by_id = evaluate.load(questions, qrels)
    except evaluate.EvalInputError as exc:
        raise click.UsageError(str(exc)) from exc
    compared: dict[str, dict[str, Any]] = {"default": {}}
    for arm in arms:
        name, _, body = arm.partition("=")
        try:
            overrides = json.loads(body)
        except ValueError:
            overrides = None
        if not name or not isinstance(overrides, dict):
            raise click.UsageError(f"--compare {arm!r}: write NAME=JSON, e.g. 'plain={{\"pathBoosts\": {{}}}}'")
        compared[name] = overrides
    base = {"folder": listed(folders)} if folders else {}
    results: dict[str, list[Any]] = {}
    runs: dict[str, dict[str, list[str]]] = {}
    with ApiClient(settings()) as api:
        for index, (name, overrides) in enumerate(compared.items()):
            results[name] = evaluate.evaluate(api, asked, by_id, modes or evaluate.MODES, limit, base | overrides,
                                              runs if index == 0 else None)  # fmt: skip
    if run_file is not None:
        run_file.write_text(evaluate.trec_run(runs.get("hybrid") or next(iter(runs.values())), "semsearch"))
    if as_json:
        print_json({name: [r.summary() | {"perQuestion": {q: vars(s) for q, s in r.per_question.items()}}
                           for r in reports] for name, reports in results.items()})  # fmt: skip
        return
    header = ["arm", "mode", "questions", "MRR@10", "nDCG@10", f"Recall@{limit}"]
    rows_out(header, [[name, r.mode, str(len(r.per_question)), f"{r.mean('mrr10'):.4f}", f"{r.mean('ndcg10'):.4f}",
                       f"{r.mean('recall'):.4f}"] for name, reports in results.items() for r in reports])  # fmt: skip
    first = results["default"][0]
    texts = {q.id: q.text for q in asked}
    hardest = sorted(first.per_question.items(), key=lambda item: (item[1].ndcg10, item[0]))[:worst]
    if hardest:
        click.echo(f"worst questions ({first.mode}):", err=True)
        for qid, s in hardest:
            where = f"first answer at rank {s.first_relevant}" if s.first_relevant else f"no answer in the top {limit}"
            click.echo(f"  nDCG@10 {s.ndcg10:.3f}  {where}  {qid}: {texts[qid][:90]}", err=True)


def _list(as_json: bool) -> None:
    with ApiClient(settings()) as api:
        folders = api.folders()
    if as_json:
        print_json([f.dump() for f in folders])
        return
    if not folders:
        click.echo("No folders yet; add one with `semsearch add PATH`.", err=True)
        return
    rows = []
    for f in folders:
        if piped():
            when = f.last_indexed.isoformat(timespec="seconds") if f.last_indexed else ""
            rows.append([f.name, f.path, str(f.files), str(f.chunks), when])
        else:
            when = f.last_indexed.astimezone().strftime("%Y-%m-%d %H:%M") if f.last_indexed else "never"
            rows.append([f.name, f.path, f"{f.files:,}", f"{f.chunks:,}{_waiting(f)}", when])
    rows_out(["name", "path", "files", "chunks", "last indexed"], rows)


@main.command()
@click.argument("target")
@click.option("--keep-index", is_flag=True, help="Keep its chunks (hidden from search) for a cheap re-add.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask (needed when not at a terminal).")
@api_errors
def remove(target: str, keep_index: bool, yes: bool) -> None:
    """Unregister a folder by NAME or PATH; its chunks are purged unless --keep-index."""
    if not keep_index:
        confirm(f"unregister {target} and purge its chunks from the index", yes)
    with ApiClient(settings()) as api:
        name = target
        if os.sep in target or target in (".", ".."):
            real = os.path.realpath(target)
            matches = [f.name for f in api.folders() if os.path.realpath(f.path) == real]
            if not matches:
                raise ApiError(404, f"{target} is not a registered folder; `semsearch list` shows them")
            name = matches[0]
        folder = api.remove_folder(name, keep_index)
    click.echo(f"removed {folder.name}  {folder.path}" + ("  (index kept)" if keep_index else ""))


# --- indexing and search ----------------------------------------------------------


@main.command()
@click.argument("path", required=False)
@click.option("--force", is_flag=True, help="Re-read and re-embed every file.")
@click.option("--max-files", type=int, help="Stop after N newly processed files (the summary says truncated).")
@click.option("--dry-run", is_flag=True, help="List what would be indexed and estimate chunks, time and disk.")
@click.option("--verbose", is_flag=True, help="Log every file (indexed, skipped and why, deleted) to stderr.")
@click.option("--concurrency", type=int, help="Threads reading and chunking ahead of the embedder.")
@click.option("--watch", is_flag=True, help="After the pass, re-index what changes until Ctrl-C.")
@click.option("--rebuild", is_flag=True, help="Drop the whole index (e.g. after changing the model) and re-index.")
@click.option("-y", "--yes", is_flag=True, help="With --rebuild: do not ask (needed when not at a terminal).")
def index(
    path: str | None,
    force: bool,
    max_files: int | None,
    dry_run: bool,
    verbose: bool,
    concurrency: int | None,
    watch: bool,
    rebuild: bool,
    yes: bool,
) -> None:
    """Index all registered folders, or just PATH (a folder, or a path inside one).

    Asks the API for a run, which an indexer worker executes, and follows it: only
    SEMSEARCH_URL (and the token) are needed. `--watch` follows file changes in this process."""
    config = settings()
    if rebuild:
        if path:
            raise click.UsageError("--rebuild drops the whole index, so it takes no PATH")
        if dry_run or watch:
            raise click.UsageError("--rebuild drops the index at once; it cannot be a --dry-run or --watch")
        confirm("drop the whole index and re-embed every file", yes)
        try:
            with ApiClient(config) as api:
                if not worker_seen(api, config.run_claim_wait_s):  # dropped with nobody to rebuild it
                    sys.exit(fail("no indexer worker is running, so nothing was dropped; start one "
                                  "(`semsearch worker`, or `semsearch serve`) and run this again"))  # fmt: skip
                api.reset_index()
        except ApiError as exc:
            sys.exit(fail(str(exc)))
        click.echo("Index dropped; re-indexing every folder.", err=True)
        force = True
    if not watch:
        try:
            with ApiClient(config) as api:
                folders, scope = resolve_target(api.folders(), path)
                if not folders:
                    click.echo("No folders registered; add one with `semsearch add PATH`.", err=True)
                request = RunRequest(
                    folder=folders[0].name if path and folders else None,
                    scope=scope or None,
                    force=force,
                    max_files=max_files,
                    dry_run=dry_run,
                    concurrency=concurrency,
                    verbose=verbose,
                )
                sys.exit(Follower(api, config.run_claim_wait_s).run(request))
        except (ApiError, TargetError) as exc:
            sys.exit(fail(str(exc)))
    import threading

    Worker = service_part("semsearch.indexer.worker", "indexer").Worker  # noqa: N806

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    Worker(config, watch=True, requests=False, path=path, verbose=verbose).run(stop)


def worker_seen(api: ApiClient, within_s: float) -> bool:
    """A worker has asked the API for runs lately, or does within `within_s` (one just started)."""
    deadline = time.monotonic() + within_s
    while not api.status().workers:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)
    return True


@main.command()
@click.argument("path")
@click.option("--json", "as_json", is_flag=True, help="Print the REST answer as JSON.")
@api_errors
def explain(path: str, as_json: bool) -> None:
    """Why PATH is, or is not, indexed: the rule that decided and its chunks."""
    with ApiClient(settings()) as api:
        result = api.explain(os.path.abspath(path))
    if as_json:
        click.echo(json.dumps(result.dump(), indent=2))
        return
    click.echo("\n".join(result.lines()))


@main.command()
@click.argument("query")
@count_option(10)
@click.option("--mode", type=click.Choice(["hybrid", "vector", "lexical"]), help="Ranking (default: hybrid).")
@folder_option
@glob_option
@click.option("--exclude", multiple=True, help="Skip paths containing this fragment (repeatable, or a,b).")
@click.option("--ext", multiple=True, help="Only these extensions, e.g. py,md.")
@click.option("--tag", "tags", multiple=True, help="Only documents with this frontmatter tag (mail: `from:ADDRESS`).")
@click.option("--since", "date_from", help="Only documents dated on/after YYYY-MM-DD.")
@click.option("--until", "date_to", help="Only documents dated on/before YYYY-MM-DD.")
@click.option("--all", "include_all", is_flag=True, help="Include superseded/archived documents and excluded paths.")
@click.option("--min-score", type=float, help="Cosine threshold for this query (default: minScore).")
@click.option("--files", "group_files", is_flag=True, help="Group by file: at most --per-file chunks per file.")
@click.option("--per-file", type=int, default=1, show_default=True)
@click.option("--boost", "boosts", multiple=True, metavar="GLOB=FACTOR",
              help="Multiply the score of paths matching GLOB, e.g. '**/tests/**=0.8' (repeatable).")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the REST answer (hits, coverage, message) as JSON.")
@click.option("--timing", is_flag=True, help="Say where the time went (embed, vector, lexical, fuse, …) on stderr.")
@api_errors
def search(
    query: str,
    limit: int,
    folders: tuple[str, ...],
    globs: tuple[str, ...],
    as_json: bool,
    group_files: bool,
    boosts: tuple[str, ...],
    timing: bool,
    **options: Any,
) -> None:
    """Find the chunks most relevant to QUERY."""
    group = "file" if group_files else "chunk"
    params = fields_of(options, folders, globs, "path_glob", query=query, k=limit, group=group)
    if boosts:
        if not all("=" in b for b in boosts):
            click.echo("semsearch: invalid --boost: write each as GLOB=FACTOR, e.g. '**/tests/**=0.8'", err=True)
            sys.exit(FAILED)
        params["path_boosts"] = {glob: factor for glob, _, factor in (b.rpartition("=") for b in boosts)}
    request = SearchRequest.model_validate(params)  # an invalid value: one line naming its flag (Verb)
    with ApiClient(settings()) as api:
        response = api.search(request)
    if timing:
        click.echo("timing: " + "  ".join(f"{stage} {ms:.1f} ms" for stage, ms in api.last_timings.items()), err=True)
    if response.query_note:
        click.echo(f"note: {response.query_note}", err=True)
    if as_json:
        print_json(response.dump())
        sys.exit(FOUND if response.hits else NOTHING)
    if not response.hits:
        click.echo(response.message or "No results.", err=True)
        if response.coverage and response.coverage.note:
            click.echo(f"coverage: {response.coverage.note}", err=True)
        sys.exit(NOTHING)
    rows = []
    for hit in response.hits:
        preview = " ".join(hit.text.split())[:80]
        where = f"{hit.start_line}-{hit.end_line}" + (f" {hit.location}" if hit.location else "")
        name = f"{hit.folder}/{hit.rel_path}" + (" (stale)" if hit.stale else "")
        if hit.heading and not piped():
            preview = f"[{hit.kind + ' ' if hit.kind else ''}{hit.heading}] {preview}"
        rows.append([hit.label, "–" if hit.cosine is None else f"{hit.cosine:.3f}", name, where, preview])
    if piped():  # the path a script opens, the lines, the score, why
        for hit, row in zip(response.hits, rows, strict=True):
            click.echo("\t".join([hit.file_path, str(hit.start_line), str(hit.end_line), row[1], row[0], row[4]]))
    else:
        table = Table("why", "cosine", "file", "lines", "preview", show_lines=False)
        for column in table.columns[:4]:
            column.no_wrap = True
        for row in rows:
            table.add_row(*(Text(cell) for cell in row))
        console.print(table)
    if response.coverage and response.coverage.note:
        click.echo(f"coverage: {response.coverage.note}", err=True)


@main.command()
@click.argument("query")
@count_option(5, "hits")
@click.option("--context-lines", type=int, default=0, show_default=True, help="Lines of the file around each chunk.")
@click.option("--max-tokens", type=int, help="Pack whole hits until this many tokens.")
@folder_option
@glob_option
@click.option("--all", "include_all", is_flag=True, help="Include superseded/archived documents.")
@click.option("--json", "as_json", is_flag=True, help="Print the REST answer (markdown, hits, tokens) as JSON.")
@api_errors
def gather(
    query: str, limit: int, folders: tuple[str, ...], globs: tuple[str, ...], as_json: bool, **options: Any
) -> None:
    """Search and print one Markdown block ready for a context window."""
    request = GatherRequest.model_validate(fields_of(options, folders, globs, "path_glob", query=query, k=limit))
    with ApiClient(settings()) as api:
        response = api.gather(request)
    if as_json:
        print_json(response.dump())
    else:
        click.echo(response.markdown)
    sys.exit(FOUND if response.hits else NOTHING)


@main.command()
@click.argument("file_path")
@click.option("--start", "start_line", type=int, default=1, show_default=True, help="First line (1-based).")
@click.option("--end", "end_line", type=int, help="Last line (inclusive).")
@click.option("--json", "as_json", is_flag=True, help="Print the REST answer (text, lines, total) as JSON.")
@api_errors
def cat(file_path: str, start_line: int, end_line: int | None, as_json: bool) -> None:
    """Print a file (or a line range) from the indexed folders."""
    with ApiClient(settings()) as api:
        content = api.read_file(os.path.abspath(file_path), start_line, end_line)
    if as_json:
        print_json(content.dump())
    else:
        click.echo(content.text)


@main.command()
@click.argument("pattern")
@count_option(100, "matching lines")
@folder_option
@glob_option
@click.option("--case-sensitive", is_flag=True, help="Match case exactly (default: ignore case).")
@click.option("-E", "--regex", is_flag=True, help="PATTERN is an RE2 regular expression (default: plain text).")
@click.option("--json", "as_json", is_flag=True, help="Print the REST answer (matches, truncated) as JSON.")
@api_errors
def grep(
    pattern: str, limit: int, folders: tuple[str, ...], globs: tuple[str, ...], as_json: bool, **options: Any
) -> None:
    """Find PATTERN in the indexed files (never in ignored ones)."""
    request = GrepRequest.model_validate(
        fields_of(options, folders, globs, "file_glob", pattern=pattern, max_results=limit)
    )
    with ApiClient(settings()) as api:
        response = api.grep(request)
    if as_json:
        print_json(response.dump())
    else:
        for m in response.matches:
            if piped():
                click.echo(f"{m.file_path}\t{m.line}\t{m.text}")
            else:
                click.echo(f"{m.folder} · {m.rel_path}:{m.line}  {m.text}")
        if response.truncated:
            click.echo("(truncated: narrow with --folder or --glob, or raise --limit)", err=True)
    sys.exit(FOUND if response.matches else NOTHING)


@main.command()
@click.argument("name")
@count_option(50, "definitions")
@click.option(
    "--kind", "kinds", multiple=True, help="Only these kinds (repeatable, or a,b): function, method, class, …"
)
@folder_option
@click.option("--json", "as_json", is_flag=True, help="Print the REST answer (symbols, truncated, message) as JSON.")
@api_errors
def symbols(name: str, limit: int, kinds: tuple[str, ...], folders: tuple[str, ...], as_json: bool) -> None:
    """Where NAME is defined (a function, method, class, …; `Class.method` narrows)."""
    with ApiClient(settings()) as api:
        found = api.symbols(name, listed(kinds), listed(folders), limit)
    if as_json:
        print_json(found.dump())
    else:
        for s in found.symbols:
            if piped():
                click.echo(f"{s.file_path}\t{s.start_line}\t{s.end_line}\t{s.kind}\t{s.symbol_path}\t{s.signature}")
            else:
                click.echo(f"{s.folder} · {s.rel_path}:{s.start_line}-{s.end_line}  {s.kind:<9} {s.symbol_path}  —  "
                           f"{s.signature}")  # fmt: skip
        if found.message:
            click.echo(found.message, err=True)
        if found.truncated:
            click.echo(f"(more than {limit} matched: narrow with --kind or --folder, or raise --limit)", err=True)
    sys.exit(FOUND if found.symbols else NOTHING)


@main.command()
@click.argument("file_path")
@click.option("--json", "as_json", is_flag=True, help="Print the REST answer (symbols, message) as JSON.")
@api_errors
def outline(file_path: str, as_json: bool) -> None:
    """The definitions in FILE_PATH, in order and nested (from the index)."""
    with ApiClient(settings()) as api:
        found = api.outline(os.path.abspath(file_path))
    if as_json:
        print_json(found.dump())
        sys.exit(FOUND if found.symbols else NOTHING)
    for s in found.symbols:
        if piped():
            click.echo(f"{s.start_line}\t{s.end_line}\t{s.kind}\t{s.symbol_path}\t{s.signature}")
        else:
            indent = "  " * s.symbol_path.count(" › ")
            click.echo(f"{s.start_line:>5}-{s.end_line:<5} {indent}{s.kind} {s.name}  —  {s.signature}")
    if found.message:
        click.echo(found.message, err=True)
    sys.exit(FOUND if found.symbols else NOTHING)


@main.group()
def token() -> None:
    """Scoped tokens: read, write or admin, for every folder or only some."""


@token.command("create")
@click.argument("name")
@click.option("--scope", type=click.Choice(["read", "write", "admin"]), required=True)
@click.option("--folder", "folders", multiple=True, help="Limit it to this folder (repeatable; default: every folder).")
@click.option("--rate", type=float, help="Requests per second (default: SEMSEARCH_TOKEN_RATE_PER_S).")
@click.option("--long-polls", type=int, help="Long polls at once (default: SEMSEARCH_TOKEN_LONG_POLLS).")
@api_errors
def token_create(name: str, scope: str, folders: tuple[str, ...], rate: float | None, long_polls: int | None) -> None:
    """Create a token; its secret is printed once (only its sha256 is kept)."""
    with ApiClient(settings()) as api:
        created = api.create_token(name, scope, list(folders) or None, rate, long_polls)
    where = ", ".join(created.folders) if created.folders else "every folder"
    click.echo(f"created {created.name}: {created.scope} on {where}")
    click.echo(created.secret)
    click.echo("Keep it now: it is not shown again. Use it as SEMSEARCH_TOKEN or `Authorization: Bearer …`.", err=True)


@token.command("generate")
def token_generate() -> None:
    """Print a new random secret, made here without asking the API: for SEMSEARCH_TOKEN, a
    Kubernetes Secret, or anything else that needs a long random value."""
    click.echo(secrets.token_hex(24))


@token.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the REST answer as JSON.")
@api_errors
def token_list(as_json: bool) -> None:
    """The scoped tokens (never their secrets)."""
    with ApiClient(settings()) as api:
        tokens = api.tokens()
    if as_json:
        click.echo(json.dumps([t.dump() for t in tokens], indent=2))
        return
    for t in tokens:
        click.echo(
            f"{t.name:<24} {t.scope:<6} {', '.join(t.folders) if t.folders else 'every folder':<30} {t.created_at}"
        )


@token.command("revoke")
@click.argument("name")
@api_errors
def token_revoke(name: str) -> None:
    """Revoke a token: the next request with it is refused."""
    with ApiClient(settings()) as api:
        gone = api.revoke_token(name)
    click.echo(f"revoked {gone.name}")


@main.group()
def model() -> None:
    """The embedding model: switch the index to another while the current one keeps answering."""


def _local_copy_line(copy: LocalCopyStatus) -> str:
    """A query replica's copy of an index on object storage, in one line."""
    held = f"{copy.files:,} files, {copy.bytes / 1e6:.1f} MB on local disk"
    if copy.store_bytes is not None:
        line = f"none: the tables take {copy.store_bytes / 1e6:.1f} MB, over SEMSEARCH_LOCAL_COPY_MB; reading the store"
    elif copy.answering:
        line = f"{held}, answering"
    else:
        line = f"{held}, being made (reading the store until then)"
    if copy.synced_at is not None:
        line += f"; synced {copy.synced_at:%H:%M:%S} UTC"
    return line + (f"; last sync failed: {copy.error}" if copy.error else "")


def _switch_line(state: ModelSwitch) -> str:
    if state.state == "none":
        return "none: no model switch has run; `semsearch model switch HOST:PORT` starts one"
    counts = f"{state.embedded:,} of {state.total:,} chunks" if state.total else "starting"
    line = f"{state.state}: {state.from_model or '?'} -> {state.to_model or state.target or '?'} ({counts})"
    if state.truncated:
        line += f"; {state.truncated:,} longer than the new model's window (`semsearch index --rebuild` re-chunks)"
    return line + (f"\n{state.error}" if state.error else "")


def _switch_out(state: ModelSwitch, as_json: bool) -> None:
    if as_json:
        print_json(state.dump())
    else:
        click.echo(_switch_line(state))
        if state.state == "done":
            click.echo(
                f"Next: point SEMSEARCH_EMBEDDER_ADDR at {state.target} for the API and the indexers (or start "
                "the embedder there with the new model) before they restart; until then the API embeds for them."
            )
    if state.state in ("failed", "paused"):
        sys.exit(FAILED)


@model.command("switch")
@click.argument("embedder")
@click.option(
    "--no-wait", is_flag=True, help="Return once the switch has started (`semsearch model status` follows it)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the REST answer as JSON.")
@api_errors
def model_switch(embedder: str, no_wait: bool, as_json: bool) -> None:
    """Re-embed the index with the model the embedder at EMBEDDER (host:port) serves, then swap it
    in: searches go on with the current model until the swap. Run again after a stop, it resumes."""
    try:
        request = ModelSwitchIn(embedder=embedder)
    except ValidationError as exc:
        raise click.UsageError(
            f"EMBEDDER {embedder!r} is not an address: give host:port (e.g. 127.0.0.1:8767)"
        ) from exc
    with ApiClient(settings()) as api:
        state = api.switch_model(request)
        shown = ""
        while not no_wait and state.state == "building":
            if not as_json and sys.stderr.isatty() and _switch_line(state) != shown:
                shown = _switch_line(state)
                click.echo(f"\r{shown}", nl=False, err=True)
            time.sleep(0.5)  # the API reports progress, not its end: polled
            state = api.model_switch()
        if shown:
            click.echo(err=True)
    _switch_out(state, as_json)


@model.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print the REST answer as JSON.")
@api_errors
def model_status(as_json: bool) -> None:
    """The switch under way or the last one (`none` when there was none)."""
    with ApiClient(settings()) as api:
        state = api.model_switch()
    _switch_out(state, as_json)


@model.command("cancel")
@click.option("--json", "as_json", is_flag=True, help="Print the REST answer as JSON.")
@api_errors
def model_cancel(as_json: bool) -> None:
    """Stop a switch and drop what it built; the index keeps its model."""
    with ApiClient(settings()) as api:
        _switch_out(api.cancel_switch(), as_json)


@main.group()
def snapshot() -> None:
    """Move an index between machines: export it once (in CI, on a bigger box), import it elsewhere."""


@snapshot.command("export")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--folder", "folders", multiple=True, help="A folder to include (repeatable; default: all).")
@click.option("--root", help="Record the folders' paths relative to this directory (default: their common parent).")
@click.option("--json", "as_json", is_flag=True, help="Print the archive's manifest as JSON.")
@api_errors
def snapshot_export(file: Path, folders: tuple[str, ...], root: str | None, as_json: bool) -> None:
    """Write the index of some folders to FILE (one verified archive)."""
    with ApiClient(settings()) as api:
        manifest = api.export_snapshot(file, list(folders), os.path.abspath(root) if root else None)
    if as_json:
        click.echo(json.dumps(manifest.dump(), indent=2))
        return
    size = file.stat().st_size / 1e6
    click.echo(
        f"wrote {file} ({size:.1f} MB): {len(manifest.folders)} folder(s), {manifest.files:,} files, "
        f"{manifest.chunks:,} chunks, digest {manifest.digest}"
    )
    for f in manifest.folders:
        click.echo(f"  {f.name:<20} {f.path}  (under {manifest.root})")
    if manifest.excluded:
        left = ", ".join(f"{n} {rule}" for rule, n in sorted(manifest.excluded.items()))
        click.echo(f"left out, as the indexer's rules now exclude them: {left}")


@snapshot.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--root", help="Where the snapshot's folders are here (default: where they were exported from).")
@click.option("--allow-outside-root", is_flag=True, help="Allow folders outside SEMSEARCH_CORPUS_ROOT.")
@click.option("--json", "as_json", is_flag=True, help="Print the REST answer as JSON.")
@api_errors
def snapshot_import(file: Path, root: str | None, allow_outside_root: bool, as_json: bool) -> None:
    """Verify FILE and swap it in: its folders replace those of the same names; others are kept."""
    with ApiClient(settings()) as api:
        imported = api.import_snapshot(file, os.path.abspath(root) if root else None, allow_outside_root)
    if as_json:
        click.echo(json.dumps(imported.dump(), indent=2))
        return
    click.echo(f"imported {file}: {imported.files:,} files, {imported.chunks:,} chunks, digest {imported.digest}")
    for f in imported.folders:
        click.echo(f"  {f.name:<20} {f.path}")
    if imported.kept:
        click.echo(f"kept: {', '.join(imported.kept)}")
    click.echo(f"Next: {imported.next_step}.")


@snapshot.command("show")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the manifest as JSON.")
@api_errors
def snapshot_show(file: Path, as_json: bool) -> None:
    """What FILE holds, read from the archive itself (no API needed)."""
    manifest = snapshot_manifest(file)
    if as_json:
        click.echo(json.dumps(manifest.dump(), indent=2))
        return
    click.echo(f"{file}: semsearch {manifest.semsearch_version}, {manifest.created_at:%Y-%m-%d %H:%M} UTC")
    click.echo(f"model     {manifest.model_id} ({manifest.dimension} dims), chunker {manifest.chunker or 'paragraph'}")
    click.echo(f"contents  {manifest.files:,} files, {manifest.chunks:,} chunks, {manifest.symbols:,} symbols")
    click.echo(f"digest    {manifest.digest}")
    for f in manifest.folders:
        click.echo(f"  {f.name:<20} {f.path}  (under {manifest.root})")


@main.command("index-status")
@click.argument("run_id", required=False)
@click.option("--wait", type=float, default=0, help="Seconds to wait for the run to finish.")
@click.option("--json", "as_json", is_flag=True, help="Print the REST answer as JSON.")
@api_errors
def index_status(run_id: str | None, wait: float, as_json: bool) -> None:
    """State, progress and summary of a requested index run (the latest one without RUN_ID)."""
    with ApiClient(settings()) as api:
        if run_id is None:
            runs = api.runs()
            if not runs:
                click.echo("No index runs requested since the API started.")
                return
            run_id = runs[0].id
        run = api.run(run_id, wait)
    if as_json:
        click.echo(json.dumps(run.dump(), indent=2))
        return
    p = run.progress
    click.echo(f"{run.id}  {run.state}  {p.files_done}/{p.files_total} files  {p.chunks} chunks")
    for line in run.log:
        click.echo(line.text, err=line.stream == "err")
    if run.summary:
        click.echo(json.dumps(run.summary.dump()))
    if run.plan:
        click.echo(json.dumps(run.plan.dump()))
    if run.error:
        click.echo(f"error: {run.error}")


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the REST answer as JSON.")
def config(as_json: bool) -> None:
    """Where config, data and logs live, and every setting with its source (default / env)."""
    config = settings()
    rows = []
    for name, field in Settings.model_fields.items():
        env = f"SEMSEARCH_{name.upper()}"
        value = getattr(config, name)
        if hasattr(value, "get_secret_value"):
            value = "********"
        rows.append({"name": name, "value": str(value), "source": "env" if env in os.environ else "default",
                     "env": env, "why": field.description or ""})  # fmt: skip
    places = {
        "data": str(config.data_dir),
        "index": config.index_uri or str(config.index_dir),
        "folders": str(config.folders_file),
        "globalIndexignore": str(config.global_indexignore_path),
        "logs": "stderr of each service (docker compose logs; journald under systemd)",
        "project": str(ProjectConfig.discover().path or "none (.semsearch.json, searched upwards from here)"),
    }
    if as_json:
        click.echo(json.dumps({"places": places, "settings": rows}, indent=2))
        return
    for key, value in places.items():
        click.echo(f"{key:<18} {value}")
    table = Table("setting", "value", "source", "why")
    for row in rows:
        table.add_row(Text(row["env"]), Text(row["value"]), row["source"], Text(row["why"]))
    console.print(table)


@main.command()
@click.argument("directory", type=click.Path(file_okay=False, exists=True))
@click.option("--name", help="Project name (default: the folder's name).")
@click.option("--include", multiple=True, help="Only paths matching this glob are searched (repeatable).")
@click.option("--desc", help="What the corpus holds; agents read it to decide when to search.")
@click.option("--yes", is_flag=True, help="Do not ask before writing.")
@click.option("--hook", is_flag=True, help="Also a Claude Code hook: re-index after the agent edits a file.")
@click.option(
    "--agent",
    "agents",
    multiple=True,
    type=click.Choice(["claude", "cursor", "codex"]),
    help="The agent(s) to set up: its MCP config and its instruction file (repeatable; default claude).",
)
@click.option("--allow-outside-root", is_flag=True, help="Allow a folder outside SEMSEARCH_CORPUS_ROOT (your home).")
@click.option("--no-index", is_flag=True, help="Do not queue an index run of the folder.")
@api_errors
def scaffold(
    directory: str,
    name: str | None,
    include: tuple[str, ...],
    desc: str | None,
    yes: bool,
    hook: bool,
    agents: tuple[str, ...],
    allow_outside_root: bool,
    no_index: bool,
) -> None:
    """Set up DIR for agents: register it, write .semsearch.json, each agent's MCP config and
    instruction file (when to use search, symbols, grep, gather) and a .gitignore entry, then queue
    an index run.

    \b
    Examples:
      semsearch scaffold ~/code/my-api --yes
      semsearch scaffold . --agent claude --agent cursor --hook --yes"""
    from semsearch.scaffold import scaffold as write_project

    root = Path(directory).resolve()
    with ApiClient(settings()) as api:
        existing = [f for f in api.folders() if os.path.realpath(f.path) == str(root)]
        if not existing and not yes:
            click.confirm(f"Register {root} and write the agents' files there?", abort=True)
        folder = existing[0] if existing else api.add_folder(str(root), name, allow_outside_root)
        for line in write_project(root, folder.name, list(include) or None, desc, name, hook, agents or ("claude",)):
            click.echo(line)
        if no_index:
            click.echo(f"Next: `semsearch index {root}`; agents started in {root} now see the MCP server.")
            return
        run = api.request_run(RunRequest(folder=folder.name))
    click.echo(f"Queued index run {run.id} of {folder.name} (`semsearch index-status {run.id} --wait 60`); "
               f"agents started in {root} now see the MCP server.")  # fmt: skip


@main.command()
@click.option("--follow-up", type=click.Path(file_okay=False, path_type=Path), hidden=True)
def hook(follow_up: Path | None) -> None:
    """Claude Code PostToolUse hook (`scaffold --hook` installs it): reads the event on stdin
    and asks for an index run of the edited file's folder. Always exits 0."""
    from semsearch.hook import append_log
    from semsearch.hook import run as run_hook

    try:
        out = run_hook("" if follow_up else sys.stdin.read(), follow_up, settings())
    except Exception as exc:  # an agent's edit must never fail because of us
        project = follow_up or Path(os.environ.get("CLAUDE_PROJECT_DIR") or Path.cwd())
        append_log(project, f"unexpected error in the hook: {type(exc).__name__}: {exc}")
        return
    if out:
        click.echo(out)


@main.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script: eval "$(semsearch completion bash)"."""
    from click.shell_completion import get_completion_class

    cls = get_completion_class(shell)
    assert cls is not None
    click.echo(cls(main, {}, "semsearch", "_SEMSEARCH_COMPLETE").source())


@main.command("env-file")
@click.argument("path", default=".env", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--object-storage", is_flag=True, help="Keep the index in the compose file's SeaweedFS store "
              "(start it with `docker compose --profile object-storage up -d`).")  # fmt: skip
@click.option(
    "--corpus-root", type=click.Path(file_okay=False), help="What the containers may read (default: your home)."
)
@click.option("--lan", "lan_hosts", multiple=True, metavar="NAME", help="Publish the API on every interface and "
              "answer to NAME, a host name or IP the other machines dial (repeatable).")  # fmt: skip
@click.option("--port", type=int, help="The API's port on the host (default 8765).")
def env_file(
    path: Path, object_storage: bool, corpus_root: str | None, lan_hosts: tuple[str, ...], port: int | None
) -> None:
    """Write a `.env` for `docker compose` with fresh random secrets; never overwrites a file."""
    values: dict[str, str] = {"SEMSEARCH_TOKEN": secrets.token_hex(24)}
    if corpus_root:
        values["SEMSEARCH_CORPUS_ROOT"] = os.path.abspath(os.path.expanduser(corpus_root))
    if port:
        values["SEMSEARCH_PORT"] = str(port)
    if lan_hosts:
        values |= {"SEMSEARCH_PUBLISH_ADDR": "0.0.0.0", "SEMSEARCH_LAN_HOSTS": ",".join(lan_hosts)}
    if object_storage:
        values |= {
            "SEMSEARCH_INDEX_URI": "s3://semsearch/index",
            "AWS_ENDPOINT_URL": "http://seaweedfs:8333",
            "AWS_ACCESS_KEY_ID": "semsearch",
            "AWS_SECRET_ACCESS_KEY": secrets.token_hex(24),
            "SEMSEARCH_S3_ALLOW_HTTP": "true",  # plain HTTP on the compose file's internal network only
            "SEMSEARCH_ROLE": "writer",
        }
    # Quoted for both readers of the file: Compose and `set -a; . ./.env` take single quotes literally.
    body = "# Written by `semsearch env-file`; keep it out of git (it holds secrets).\n" + "".join(
        f"{key}={shlex.quote(value)}\n" for key, value in values.items()
    )
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise click.UsageError(f"{path} exists and is left as it is; move it aside, or name another file") from None
    with os.fdopen(fd, "w") as out:
        out.write(body)
    click.echo(f"wrote {path} (mode 0600)")
    click.echo("Next: docker compose up -d; for the host CLI: set -a; . ./.env; set +a", err=True)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the REST answer as JSON.")
def status(as_json: bool) -> None:
    """What runs where; exits 0 only when the API and the embedder are ready (else 2)."""
    config = settings()
    try:
        with ApiClient(config) as api:
            st = api.status()
    except ApiError as exc:
        raise Failure(str(exc)) from exc
    ready = st.embedder.ready
    if as_json:
        print_json(st.dump())
    else:
        click.echo(f"API       {config.api_url}  (semsearch {st.version})")
        if ready:
            click.echo(f"embedder  {st.embedder.address}  {st.embedder.model_id}  dim {st.embedder.dimension}")
            if st.embedder.cpu:
                click.echo(f"cpu       {st.embedder.cpu}")
        else:
            click.echo(f"embedder  {st.embedder.address}  NOT READY: {st.embedder.error}")
        if st.data_dir is not None and st.index_bytes is not None:  # shown to tokens that cover every folder
            click.echo(f"data      {st.data_dir}  ({st.index_bytes / 1e6:.1f} MB index)")
        click.echo(f"folders   {len(st.folders)}  files {st.files:,}  chunks {st.chunks:,}")
        full_text = "BM25 index" if st.full_text_index else "no BM25 index yet (run `semsearch index`)"
        held = f"; in memory: {st.in_memory:,} chunks" if st.in_memory is not None else ""
        held += f" ({st.in_memory_bytes / 1e6:.1f} MB)" if held and st.in_memory_bytes is not None else ""
        click.echo(f"indexes   vectors: {st.vector_index}, {full_text}{held}")
        if st.local_copy is not None:
            click.echo(f"copy      {_local_copy_line(st.local_copy)}")
        if st.role != "query":
            workers = ", ".join(st.workers) or "none (requested runs wait: `semsearch worker` or `semsearch serve`)"
            click.echo(f"workers   {workers}")
        if st.snapshot:
            origin = st.snapshot
            click.echo(
                f"snapshot  {', '.join(origin.folders)} imported {origin.imported_at:%Y-%m-%d %H:%M} UTC from "
                f"{origin.digest} (made {origin.created_at:%Y-%m-%d %H:%M} UTC by semsearch {origin.semsearch_version})"
            )
        if st.model_switch:
            click.echo(f"switch    {_switch_line(st.model_switch)}")
        if st.notice:
            click.echo(f"notice    {st.notice}")
        for f in st.folders:
            click.echo(f"  {f.name:<20} {f.files:>7,} files {f.chunks:>8,} chunks  {f.path}{_waiting(f)}")
    sys.exit(FOUND if ready else FAILED)


# Shown under each verb's --help and in the CLI reference; every verb has some (tests/test_cli.py).
EXAMPLES: dict[str, list[str]] = {
    "search": [
        'semsearch search "retry with backoff"',
        'semsearch search "how are tokens checked" --folder api --glob "src/**/*.py" -k 5',
        'semsearch search "release notes" --since 2026-01-01 --json | jq ".hits[0].filePath"',
        'semsearch search "PreparedRequest" --files   # one line per file',
    ],
    "gather": ['semsearch gather "how does the cache expire" --max-tokens 4000 > context.md'],
    "grep": ["semsearch grep TODO --glob '*.py'", "semsearch grep -E 'def (get|put)_\\w+' --folder api -k 20"],
    "symbols": ["semsearch symbols Session.request", "semsearch symbols retry --kind function,method"],
    "outline": ["semsearch outline src/app/models.py"],
    "cat": ["semsearch cat src/app/models.py --start 40 --end 80"],
    "explain": ["semsearch explain node_modules/left-pad/index.js   # which rule skipped it"],
    "add": ["semsearch add ~/code/api ~/notes", "semsearch add ~/code/api --name api"],
    "list": ["semsearch list", "semsearch list | cut -f1,4   # names and chunk counts, tab-separated"],
    "folders": ["semsearch folders --json"],
    "remove": ["semsearch remove api", "semsearch remove ~/notes --keep-index --yes"],
    "index": [
        "semsearch index",
        "semsearch index ~/code/api/docs --dry-run",
        "semsearch index --rebuild --yes   # after changing the model or the chunker",
    ],
    "index-status": ["semsearch index-status --wait 30"],
    "status": ["semsearch status", "semsearch status --json | jq .workers"],
    "mcp": ["semsearch mcp", "semsearch mcp --standalone ~/code/api", "semsearch mcp --http --port 8767"],
    "scaffold": ["semsearch scaffold . --agent claude", "semsearch scaffold ~/code/api --agent cursor --no-index"],
    "hook": ["semsearch scaffold . --agent claude --hook   # installs it; Claude Code runs `semsearch hook`"],
    "token": ["semsearch token create ci --scope read --folder api"],
    "token create": ["semsearch token create ci --scope read --folder api --folder docs"],
    "token generate": ['kubectl create secret generic semsearch --from-literal=token="$(semsearch token generate)"'],
    "token list": ["semsearch token list"],
    "token revoke": ["semsearch token revoke ci"],
    "snapshot": ["semsearch snapshot export api.tar --folder api"],
    "snapshot export": ["semsearch snapshot export api.tar --folder api"],
    "snapshot import": ["semsearch snapshot import api.tar"],
    "snapshot show": ["semsearch snapshot show api.tar"],
    "config": ["semsearch config", "semsearch config --json | jq '.settings[] | select(.source == \"env\")'"],
    "env-file": ["semsearch env-file && docker compose up -d", "semsearch env-file --lan search.lan --object-storage"],
    "completion": ['eval "$(semsearch completion bash)"'],
    "serve": ["semsearch serve", "semsearch serve --watch --port 9000"],
    "api": ["semsearch api --host 0.0.0.0 --role query"],
    "embedder": ["semsearch embedder --port 8766", "semsearch embedder --model ~/models/bge-small --port 8767"],
    "model": ["semsearch model switch 127.0.0.1:8767"],
    "model switch": [
        "SEMSEARCH_MODEL=~/models/bge-small semsearch embedder --port 8767 &   # the new model, beside the old",
        "semsearch model switch 127.0.0.1:8767",
    ],
    "model status": ["semsearch model status --json | jq .embedded"],
    "model cancel": ["semsearch model cancel"],
    "worker": ["semsearch worker --watch"],
    "indexer": ["semsearch indexer   # one pass, exit 0/1 (cron, CI)"],
    "eval": [
        'semsearch eval questions.jsonl   # {"question": "…", "answers": ["docs/auth.md", "src/retry.py:40-72"]}',
        "semsearch eval queries.jsonl --qrels qrels.tsv --mode hybrid --run-file run.trec",
        "semsearch eval questions.jsonl --compare 'no-boosts={\"pathBoosts\": {}}'",
    ],
}


def _attach_examples(group: click.Group, parents: str = "") -> None:
    for name, command in group.commands.items():
        key = f"{parents}{name}"
        lines = EXAMPLES.get(key, [])
        if lines:
            # `\b`: click keeps these lines as they are instead of rewrapping them.
            command.epilog = "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)
        if isinstance(command, click.Group):
            _attach_examples(command, f"{key} ")


_attach_examples(main)


if __name__ == "__main__":
    main()
