"""The one decider of what is indexable, as plain functions on generated trees.

`FileList.files()` is the included set of the verdicts, and `explain(path)` looks the verdict
up, so the two can never disagree: for every path on disk, `explain` says included exactly
when `files()` lists it. Trees mix what made them disagree before: nested repositories
that are not submodules, submodules, ignored directories with re-includes, symlinks,
`.indexignore` at several depths, secrets, binaries and version-control internals.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from semsearch.config import Settings
from semsearch.corpus.discovery import FileList

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_GLOBAL": "/dev/null"}  # fmt: skip


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "protocol.file.allow=always", *args], cwd=cwd, env=GIT_ENV, check=True,
                   capture_output=True)  # fmt: skip


def listing(root: Path) -> FileList:
    return FileList.from_settings(root, Settings())


def all_paths(root: Path) -> list[str]:
    """Every file and link under root, .git internals included, without following links."""
    out = []
    for directory, dirs, names in os.walk(root):
        for name in names + [d for d in dirs if (Path(directory) / d).is_symlink()]:
            out.append(os.path.relpath(os.path.join(directory, name), root).replace(os.sep, "/"))
    return sorted(out)


def assert_one_decider(root: Path) -> None:
    files = listing(root)
    listed = set(files.files())
    explained = {p for p in all_paths(root) if listing(root).explain(p).included}
    assert listed == explained, (sorted(listed - explained), sorted(explained - listed))
    assert not any(".git/" in p or p.endswith(".git") for p in listed)


def test_nested_repository_that_is_not_a_submodule(tmp_path: Path) -> None:
    """The regression: files() skipped inner/b.txt while explain() said "included — git lists it"."""
    outer = tmp_path / "outer"
    (outer / "inner").mkdir(parents=True)
    (outer / "a.txt").write_text("a\n")
    (outer / "inner" / "b.txt").write_text("b\n")
    (outer / "inner" / "skip.log").write_text("log\n")
    (outer / "inner" / ".gitignore").write_text("*.log\n")
    git(outer, "init", "-q")
    git(outer / "inner", "init", "-q")
    files = sorted(listing(outer).files())
    assert files == ["a.txt", "inner/.gitignore", "inner/b.txt"]
    assert listing(outer).explain("inner/b.txt").included
    assert not listing(outer).explain("inner/skip.log").included
    assert listing(outer).explain("inner/.git/config").rule == "vcs-internal"
    assert_one_decider(outer)


def test_submodule_files_follow_their_own_rules(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "lib.py").write_text("x = 1\n")
    (lib / ".gitignore").write_text("out/\n")
    git(lib, "init", "-q")
    git(lib, "add", "-A")
    git(lib, "commit", "-qm", "lib")
    app = tmp_path / "app"
    app.mkdir()
    (app / "main.py").write_text("import lib\n")
    git(app, "init", "-q")
    git(app, "submodule", "add", "-q", str(lib), "vendor/lib")
    (app / "vendor" / "lib" / "out").mkdir()
    (app / "vendor" / "lib" / "out" / "gen.py").write_text("generated\n")
    files = set(listing(app).files())
    assert {"main.py", "vendor/lib/lib.py"} <= files and "vendor/lib/out/gen.py" not in files
    assert_one_decider(app)


NAMES = st.sampled_from(["a.py", "b.md", "notes.txt", ".env", "id_rsa", "logo.png", "x.log", "keep.log", "c.pdf"])
DIRS = st.sampled_from(["", "src", "src/deep", "build", "docs", "node_modules", "private"])
IGNORE_LINES = st.sampled_from(["*.log", "!keep.log", "build/", "private/", "docs/*.md", "!docs/b.md", "deep/"])


@st.composite
def trees(draw: st.DrawFn) -> dict[str, object]:
    return {
        "files": draw(st.lists(st.tuples(DIRS, NAMES), min_size=1, max_size=12, unique=True)),
        "gitignore": draw(st.lists(IGNORE_LINES, max_size=3)),
        "indexignore": draw(st.lists(st.tuples(DIRS, IGNORE_LINES), max_size=3)),
        "git": draw(st.booleans()),
        "nested": draw(st.sampled_from([None, "src", "docs"])),
        "link": draw(st.booleans()),
    }


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=trees())
def test_files_and_explain_agree_on_generated_trees(tree: dict[str, object]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        for directory, name in tree["files"]:  # type: ignore[attr-defined]
            path = root / directory / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"\x89PNG\x00" if name.endswith(".png") else f"{name}\n".encode())
        if tree["gitignore"]:
            (root / ".gitignore").write_text("\n".join(tree["gitignore"]) + "\n")  # type: ignore[arg-type]
        for directory, line in tree["indexignore"]:  # type: ignore[attr-defined]
            (root / directory).mkdir(parents=True, exist_ok=True)
            with (root / directory / ".indexignore").open("a") as f:
                f.write(line + "\n")
        if tree["link"]:
            (root / "link").symlink_to(root / "src" if (root / "src").exists() else root)
            (root / "file-link.md").symlink_to("/etc/hostname")
        if tree["git"]:
            git(root, "init", "-q")
            if tree["nested"] and (root / str(tree["nested"])).is_dir():
                git(root / str(tree["nested"]), "init", "-q")
        elif tree["nested"] and (root / str(tree["nested"])).is_dir():
            git(root / str(tree["nested"]), "init", "-q")
        assert_one_decider(root)
