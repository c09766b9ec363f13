"""The Claude Code edit hook (`semsearch scaffold DIR --hook`), invoked as Claude Code invokes
it: the command from `.claude/settings.local.json`, the `PostToolUse` event as JSON on stdin."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

from tests.conftest import SEMSEARCH, Stack
from tests.polling import until
from tests.processes import clean_env, free_port


def post_tool_use(project: Path, path: Path, tool: str = "Write") -> dict[str, Any]:
    """What Claude Code sends after its Write tool saved a file."""
    return {
        "session_id": "3f1c0e3a-hook-test",
        "transcript_path": str(project / ".claude" / "transcript.jsonl"),
        "cwd": str(project),
        "hook_event_name": "PostToolUse",
        "tool_name": tool,
        "tool_input": {"file_path": str(path), "content": path.read_text()},
        "tool_response": {"filePath": str(path), "success": True},
    }


def installed_command(project: Path) -> list[str]:
    settings = json.loads((project / ".claude" / "settings.local.json").read_text())
    (entry,) = [e for e in settings["hooks"]["PostToolUse"] if "semsearch" in e["hooks"][0]["command"]]
    assert entry["matcher"] == "Write|Edit|MultiEdit|NotebookEdit"
    return shlex.split(entry["hooks"][0]["command"])


def fire(command: list[str], event: dict[str, Any], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, input=json.dumps(event), env=env, capture_output=True, text=True, timeout=60,
                          check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr  # a hook never fails the agent's edit
    return done


def hook_runs(stack: Stack, folder: str) -> list[dict[str, Any]]:
    with stack.http() as http:
        return [r for r in http.get("/v1/runs").json() if r["request"]["folder"] == folder]


def found(stack: Stack, query: str) -> list[str]:
    with stack.http() as http:
        hits = http.post("/v1/search", json={"query": query, "k": 5, "minScore": -1}).json()["hits"]
    return [h["relPath"] for h in hits]


def test_scaffold_installs_the_hook_and_keeps_the_users_settings(stack: Stack, tmp_path: Path) -> None:
    project = tmp_path / "ropes"
    (project / ".claude").mkdir(parents=True)
    theirs = {"matcher": "Edit", "hooks": [{"type": "command", "command": "make fmt"}]}
    mine = {"permissions": {"allow": ["Bash(make test)"]}, "hooks": {"PostToolUse": [theirs]}}
    (project / ".claude" / "settings.local.json").write_text(json.dumps(mine))
    for _ in range(2):  # a second run changes nothing and duplicates nothing
        stack.cli("scaffold", str(project), "--hook", "--yes")
    settings = json.loads((project / ".claude" / "settings.local.json").read_text())
    assert settings["permissions"] == mine["permissions"]
    commands = [e["hooks"][0]["command"] for e in settings["hooks"]["PostToolUse"]]
    assert commands[0] == "make fmt" and len(commands) == 2 and commands[1].endswith("semsearch hook")
    assert Path(installed_command(project)[0]).is_file()  # this installation's semsearch, by absolute path
    ignored = (project / ".gitignore").read_text().splitlines()
    assert {".claude/settings.local.json", ".claude/semsearch-hook.log", ".semsearch.local.json"} <= set(ignored)
    assert ignored.count(".claude/settings.local.json") == 1


def test_edits_are_indexed_with_at_most_one_run_per_window_and_none_lost(stack: Stack, tmp_path: Path) -> None:
    project = tmp_path / "knots"
    project.mkdir()
    stack.cli("scaffold", str(project), "--hook", "--yes", "--no-index")  # the hook's runs alone are counted
    command = installed_command(project)
    env = {**stack.env, "SEMSEARCH_HOOK_COALESCE_S": "10", "CLAUDE_PROJECT_DIR": str(project)}
    notes = {
        "bowline.md": "# Bowline\n\nThe bowline makes a fixed loop at the end of a mooring line.\n",
        "sheet-bend.md": "# Sheet bend\n\nA sheet bend joins two ropes of different thickness.\n",
        "clove-hitch.md": "# Clove hitch\n\nThe clove hitch ties a fender to a rail in seconds.\n",
    }
    paths = []
    for name, text in notes.items():  # an agent saving three files in a burst
        path = project / name
        path.write_text(text)
        paths.append(path)
        assert fire(command, post_tool_use(project, path), env).stdout == ""
    assert len(hook_runs(stack, "knots")) == 1  # the first edit asked at once; the others wait for the window
    until(lambda: len(runs := hook_runs(stack, "knots")) == 2 and all(r["state"] == "done" for r in runs), 60, 0.2,
          what="both hook runs done")  # fmt: skip
    assert "sheet-bend.md" in found(stack, "joining two ropes of unequal thickness")
    assert "clove-hitch.md" in found(stack, "tie a fender to the rail")
    log = (project / ".claude" / "semsearch-hook.log").read_text()
    assert log.count("requested run") == 2 and "one follow-up is due" in log


def test_the_hook_warns_once_per_outage_and_keeps_the_edits(tmp_path: Path) -> None:
    project = tmp_path / "sails"
    project.mkdir()
    env = clean_env(SEMSEARCH_URL=f"http://127.0.0.1:{free_port()}", CLAUDE_PROJECT_DIR=str(project))
    outputs = []
    for name in ("jib.md", "main.md"):
        (project / name).write_text(f"# {name}\n")
        outputs.append(fire([SEMSEARCH, "hook"], post_tool_use(project, project / name, "Edit"), env).stdout)
    warning = json.loads(outputs[0])["systemMessage"]
    assert "not being re-indexed" in warning and "semsearch serve" in warning and "semsearch-hook.log" in warning
    assert outputs[1] == ""  # not once per save
    log = (project / ".claude" / "semsearch-hook.log").read_text()
    assert log.count("could not request an index run") == 2
    state = json.loads((project / ".claude" / "semsearch-hook.json").read_text())
    assert [Path(p).name for p in state["pending"]] == ["jib.md", "main.md"]  # asked for when it answers again


def test_the_hook_ignores_what_it_cannot_read(tmp_path: Path) -> None:
    env = clean_env(SEMSEARCH_URL=f"http://127.0.0.1:{free_port()}", CLAUDE_PROJECT_DIR=str(tmp_path))
    for stdin in ("not json", "[]", json.dumps({"hook_event_name": "PostToolUse", "tool_input": {}})):
        done = subprocess.run([SEMSEARCH, "hook"], input=stdin, env=env, capture_output=True, text=True, timeout=60,
                              check=False)  # fmt: skip
        assert done.returncode == 0 and done.stdout == "" and done.stderr == "", stdin
    assert not (tmp_path / ".claude").exists()
