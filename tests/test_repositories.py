"""Repositories added by URL: a shallow clone in the data directory, fetched before each index
run, removed with its folder; a URL with a password refused and never stored; an unreachable
one refused at `add` with nothing left behind, and an unreachable remote later indexed from its
last fetch. The remote is a real git server, `git daemon` on loopback, serving a repository of
other people's documents (NumPy's masked-array guide, asciidoc-py's code-filter README)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asciidoc
import numpy
import pytest

from tests.processes import free_port

GUIDE = Path(numpy.__file__).parent / "ma" / "README.rst"
CODE_FILTER = Path(asciidoc.__file__).parent / "resources" / "filters" / "code" / "code-filter-readme.txt"
GUIDE_SENTENCE = "some attributes of the new subclass were lost during processing"
FILTER_QUERY = "where is the code filter installed in the distribution"
PASSWORD = "hunter2-not-for-logs"
GIT = ["git", "-c", "user.name=Test", "-c", "user.email=test@example.com", "-c", "init.defaultBranch=main"]


@dataclass
class Remote:
    url: str
    work: Path  # where new commits are made and pushed from
    bare: Path  # what the server serves

    def commit(self, message: str) -> str:
        subprocess.run([*GIT, "add", "-A"], cwd=self.work, check=True)
        subprocess.run([*GIT, "commit", "-q", "-m", message], cwd=self.work, check=True)
        subprocess.run([*GIT, "push", "-q", str(self.bare), "main"], cwd=self.work, check=True)
        return subprocess.run([*GIT, "rev-parse", "HEAD"], cwd=self.work, check=True, capture_output=True,
                              text=True).stdout.strip()  # fmt: skip


def wait_for_port(port: int, deadline_s: float = 20.0) -> None:
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise AssertionError(f"git daemon did not listen on {port} within {deadline_s} s") from None
            time.sleep(0.05)


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Remote]:
    base = tmp_path_factory.mktemp("remote")
    work, served = base / "work", base / "served"
    work.mkdir()
    served.mkdir()
    (work / "docs").mkdir()
    (work / "docs" / "masked-arrays.rst").write_text(GUIDE.read_text())
    subprocess.run([*GIT, "init", "-q"], cwd=work, check=True)
    bare = served / "guide.git"
    subprocess.run([*GIT, "init", "-q", "--bare", str(bare)], check=True)
    remote = Remote("", work, bare)
    remote.commit("the masked-array guide")
    port = free_port()
    daemon = subprocess.Popen(
        [
            "git",
            "daemon",
            "--reuseaddr",
            "--export-all",
            f"--base-path={served}",
            "--listen=127.0.0.1",
            f"--port={port}",
            "--informative-errors",
            str(served),
        ],  # fmt: skip
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port)
        remote.url = f"git://127.0.0.1:{port}/guide.git"
        yield remote
    finally:
        daemon.terminate()
        daemon.wait(timeout=10)


def hits(stack: Any, query: str, **extra: Any) -> list[dict[str, Any]]:
    with stack.http() as http:
        answer = http.post("/v1/search", json={"query": query, "k": 3, "minScore": -1, **extra})
    assert answer.status_code == 200, answer.text
    return answer.json()["hits"]  # type: ignore[no-any-return]


def test_a_repository_by_url_is_searchable_follows_new_commits_and_goes_with_its_folder(
    api_factory: Any, remote: Remote
) -> None:
    stack = api_factory()
    added = stack.cli("add", remote.url, "--branch", "main").stdout
    assert added.startswith(f"added guide  {remote.url}"), added
    clone = stack.data_dir / "repos" / "guide"
    assert (clone / "docs" / "masked-arrays.rst").is_file()
    (folder,) = json.loads(stack.cli("list", "--json").stdout)
    assert (folder["name"], folder["url"], folder["branch"], folder["path"]) == (
        "guide",
        remote.url,
        "main",
        str(clone),
    )
    assert stack.index()["filesProcessed"] == 1
    (hit, *_) = hits(stack, "attributes of the subclass got lost while processing", folder=["guide"])
    assert hit["relPath"] == "docs/masked-arrays.rst" and hit["filePath"].startswith(str(clone))
    assert GUIDE_SENTENCE in " ".join(stack.cli("cat", hit["filePath"]).stdout.split())  # confined like any folder

    # A new commit upstream: a file added, one removed. The next run fetches it first.
    (remote.work / "docs" / "masked-arrays.rst").unlink()
    (remote.work / "code-filter.adoc").write_text(CODE_FILTER.read_text())
    head = remote.commit("the code filter's README instead")
    run = stack.cli("index").stdout
    assert "fetched" in run and head[:12] in run, run
    (found, *_) = hits(stack, FILTER_QUERY, folder=["guide"])
    assert found["relPath"] == "code-filter.adoc"
    assert all(h["relPath"] != "docs/masked-arrays.rst" for h in hits(stack, GUIDE_SENTENCE, mode="lexical"))
    assert "up to date" in stack.cli("index").stdout

    stack.cli("remove", "guide", "--yes")
    assert not clone.exists() and json.loads(stack.cli("list", "--json").stdout) == []


def test_a_url_with_a_password_is_refused_and_never_stored(api_factory: Any) -> None:
    stack = api_factory()
    url = f"https://reader:{PASSWORD}@git.example.com/team/notes.git"
    refused = stack.cli("add", url, check=False)
    assert refused.returncode == 2 and "credentials" in refused.stderr and PASSWORD not in refused.stderr
    assert "https://git.example.com/team/notes.git" in refused.stderr  # what to add instead
    with stack.http() as http:
        answer = http.post("/v1/folders", json={"url": url})
        assert answer.status_code == 400 and PASSWORD not in answer.text, answer.text
        assert "credential helper" in answer.json()["detail"]
        for command in ("ext::sh -c touch% /tmp/owned", "ext::touch%/tmp/owned", "--upload-pack=touch"):
            answer = http.post("/v1/folders", json={"url": command})  # git's `ext::` runs a command: never
            assert answer.status_code == 400, answer.text
        both = http.post("/v1/folders", json={"url": "file:///x", "path": "/x"})
        assert both.status_code == 422 and "either `path`" in both.text
    stored = stack.data_dir / "folders.json"
    assert not stored.exists() or PASSWORD not in stored.read_text()


def test_an_unreachable_repository_is_refused_at_add_and_leaves_nothing(api_factory: Any) -> None:
    stack = api_factory()
    url = f"git://127.0.0.1:{free_port()}/nothing-here.git"  # nothing listens there
    refused = stack.cli("add", url, check=False)
    assert refused.returncode == 2 and f"cloning {url} failed" in refused.stderr, refused.stderr
    assert json.loads(stack.cli("list", "--json").stdout) == []
    repos = stack.data_dir / "repos"
    assert not repos.exists() or list(repos.iterdir()) == []  # no half-made clone


def test_a_remote_gone_away_is_indexed_from_its_last_fetch(api_factory: Any, remote: Remote, tmp_path: Path) -> None:
    stack = api_factory()
    mirror = tmp_path / "mirror.git"
    shutil.copytree(remote.bare, mirror)
    stack.cli("add", f"file://{mirror}", "--name", "mirror")
    assert stack.index()["filesProcessed"] >= 1
    shutil.rmtree(mirror)
    run = stack.cli("index")
    assert "indexing the copy from the last fetch" in run.stdout and run.returncode == 0, run.stdout
    assert hits(stack, FILTER_QUERY, folder=["mirror"]) or hits(stack, GUIDE_SENTENCE, folder=["mirror"])
