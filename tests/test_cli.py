"""The CLI as a person uses it: `serve` runs and stops cleanly (processes); errors are one
readable line (through click's runner, in this process)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import click
import httpx
import pytest
from click.testing import CliRunner

from tests.conftest import SEMSEARCH, base_env, free_port
from tests.inprocess import run_cli
from tests.polling import until


def test_unreachable_api_is_one_line_naming_the_fix(tmp_path: Path) -> None:
    env = base_env(tmp_path, free_port(), "127.0.0.1:1")
    for args in (["list"], ["search", "anything"], ["status"], ["add", str(tmp_path)]):
        result = run_cli(args, env)
        assert result.returncode == 2, args  # 2: could not ask (1 is "nothing found")
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert "not reachable" in lines[0] and "semsearch serve" in lines[0]


def test_index_without_api_prints_json_summary_and_fails(tmp_path: Path) -> None:
    env = base_env(tmp_path, free_port(), "127.0.0.1:1")
    result = run_cli(["index"], env)
    assert result.returncode == 2
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["filesProcessed"] == 0 and summary["errors"]


@pytest.mark.e2e  # starts processes
def test_serve_starts_both_services_and_stops_on_sigint(tmp_path: Path) -> None:
    api_port, embedder_port = free_port(), free_port()
    env = base_env(tmp_path, api_port, f"127.0.0.1:{embedder_port}")
    env.pop("SEMSEARCH_EMBEDDER_ADDR")
    proc = subprocess.Popen(
        [SEMSEARCH, "serve", "--port", str(api_port), "--embedder-port", str(embedder_port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90
        status = None
        while time.monotonic() < deadline:
            status = subprocess.run([SEMSEARCH, "status"], env=env, capture_output=True, text=True, timeout=30)
            if status.returncode == 0:
                break
            time.sleep(0.5)
        assert status is not None and status.returncode == 0, status.stderr if status else "no status"
        assert "all-MiniLM-L6-v2-onnx-int8+int8-matmul" in status.stdout
        assert "indexes   vectors: flat, no BM25 index yet" in status.stdout  # nothing indexed yet
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    # Both children are gone: nothing answers on either port.
    for port in (api_port, embedder_port):
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
            raise AssertionError(f"something still listens on {port}")
        except httpx.TransportError:
            pass


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["gather", "x", "--max-tokens", "10"], "--max-tokens"),
        (["grep", "x", "-k", "5000"], "--limit"),
        (["search", "x", "-k", "0"], "--limit"),
        (["search", "x", "--since", "last tuesday"], "--since"),
        (["add", "/tmp", "--name", "two words"], "name"),
        (["search", "x", "--boost", "tests"], "GLOB=FACTOR"),
        (["search", "x", "--boost", "**/tests/**=0"], "--boost"),
    ],
)
def test_invalid_arguments_are_one_line_naming_the_problem(tmp_path: Path, args: list[str], named: str) -> None:
    env = base_env(tmp_path, free_port(), "127.0.0.1:1")
    result = run_cli(args, env)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and named in lines[0] and "Traceback" not in result.stderr, result.stderr


# --- conventions (clig.dev): the same flags, exit codes and output rules on every verb ---------------


def test_every_verb_sits_under_one_heading_and_shows_examples() -> None:
    from semsearch.cli import SECTIONS, main

    placed = [name for names in SECTIONS.values() for name in names]
    assert sorted(placed) == sorted(main.commands) and len(placed) == len(set(placed))
    top = CliRunner().invoke(main, ["--help"]).output
    assert all(f"\n{title}:\n" in top for title in SECTIONS)
    for path in _verbs(main):
        if path == ["indexer"]:  # its --help is the indexer's own (it takes the indexer's options)
            continue
        shown = CliRunner().invoke(main, [*path, "--help"]).output
        examples = shown.split("Examples:\n", 1)[-1].splitlines()
        assert "Examples:" in shown and examples and examples[0].strip(), (path, shown)


def _verbs(group: click.Group, parents: tuple[str, ...] = ()) -> list[list[str]]:
    found = []
    for name, command in group.commands.items():
        found.append([*parents, name])
        if isinstance(command, click.Group):
            found += _verbs(command, (*parents, name))
    return found


def test_the_listing_verbs_share_one_count_folder_and_glob_flag() -> None:
    from semsearch.cli import main

    for verb in ("search", "gather", "grep", "symbols"):
        options = {p.name: p for p in main.commands[verb].params if isinstance(p, click.Option)}
        assert options["limit"].opts == ["-k", "--limit"], verb
        assert options["folders"].opts == ["--folder"] and options["folders"].multiple, verb
        if verb != "symbols":
            assert options["globs"].opts == ["--glob"] and options["globs"].multiple, verb
    grep = {o for p in main.commands["grep"].params for o in p.opts}
    assert "-E" in grep and not {"-e", "-s", "-m", "-n"} & grep  # grep(1)'s -e and -s mean something else


def test_destructive_verbs_ask_and_a_script_must_say_yes(tmp_path: Path) -> None:
    """Not at a terminal (click's runner gives no tty) and without --yes, nothing is asked of the
    API at all: the API here is unreachable, and the refusal comes first."""
    env = base_env(tmp_path, free_port(), "127.0.0.1:1")
    for args in (["remove", "notes"], ["index", "--rebuild"]):
        refused = run_cli(args, env)
        assert refused.returncode == 2 and "pass --yes" in refused.stderr, refused.stderr
        assert "not reachable" not in refused.stderr
    dry = run_cli(["index", "--rebuild", "--dry-run", "--yes"], env)
    assert dry.returncode == 2 and "cannot be a --dry-run" in dry.stderr
    kept = run_cli(["remove", "notes", "--keep-index"], env)  # nothing is purged: no question
    assert kept.returncode == 2 and "not reachable" in kept.stderr


def test_rebuild_with_no_worker_drops_nothing(api_factory: Any, tmp_path: Path) -> None:
    """`index --rebuild` once dropped the index and then cancelled the run nobody took."""
    stack = api_factory(SEMSEARCH_RUN_CLAIM_WAIT_S="1")
    folder = tmp_path / "kept"
    folder.mkdir()
    (folder / "a.md").write_text("# Lighthouse\nThe keeper winds the clockwork at dusk.\n")
    stack.cli("add", str(folder))
    assert stack.index()["filesProcessed"] == 1

    def status() -> dict[str, Any]:
        with stack.http() as http:
            return http.get("/v1/status").json()  # type: ignore[no-any-return]

    assert status()["workers"]
    worker = stack.threads.pop()  # the worker goes away; the API stays
    worker.signal()
    worker.stop()
    until(lambda: not status()["workers"], 30, 0.2, what="the stopped worker gone from the list")
    before = status()["chunks"]
    refused = stack.cli("index", "--rebuild", "--yes", check=False)
    assert refused.returncode == 2 and "nothing was dropped" in refused.stderr, refused.stderr
    assert status()["chunks"] == before > 0
    with stack.http() as http:
        assert len(http.get("/v1/runs").json()) == 1  # the first run; the rebuild asked for none


def test_piped_output_is_tab_separated_and_nothing_found_exits_1(api_factory: Any, tmp_path: Path) -> None:
    stack = api_factory()
    folder = tmp_path / "harbour"
    folder.mkdir()
    (folder / "tides.md").write_text("# Tides\nThe harbour master posts the tide table every morning.\n")
    (folder / "boats.py").write_text("def moor_boat(boat, berth):\n    return berth.assign(boat)\n")
    stack.cli("add", str(folder))
    stack.index()

    found = stack.cli("search", "when is the tide table posted", "-k", "1")  # click's runner: not a tty
    path, start, end, cosine, why, preview = found.stdout.rstrip("\n").split("\t")
    assert path == str(folder / "tides.md") and int(start) <= int(end) and -1 <= float(cosine) <= 1
    assert why.startswith("[") and "harbour master" in preview and "─" not in found.stdout
    listed = stack.cli("list").stdout.splitlines()
    assert listed[0].split("\t") == ["name", "path", "files", "chunks", "last indexed"]
    assert listed[1].split("\t")[:3] == ["harbour", str(folder), "2"]
    grep = stack.cli("grep", "moor_boat").stdout.splitlines()
    assert grep == [f"{folder / 'boats.py'}\t1\tdef moor_boat(boat, berth):"]

    nothing = stack.cli("search", "when is the tide table posted", "--min-score", "0.999", check=False)
    assert nothing.returncode == 1 and nothing.stdout == "" and nothing.stderr
    as_json = stack.cli("search", "when is the tide table posted", "--min-score", "0.999", "--json", check=False)
    assert as_json.returncode == 1 and json.loads(as_json.stdout)["hits"] == []
    assert stack.cli("grep", "no_such_text_here", check=False).returncode == 1
    assert stack.cli("symbols", "no_such_symbol_here", check=False).returncode == 1
