"""The indexer end to end: what is indexed and why, extraction, freshness — through the real services."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fpdf import FPDF

from tests.conftest import SEMSEARCH, Stack, wait_until_free
from tests.inprocess import call_mcp
from tests.polling import until
from tests.processes import clean_env


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, env=env)


def make_pdf(pages: list[str]) -> bytes:
    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 8, text)
    return bytes(pdf.output())


def make_docx(blocks: list[tuple[str, str]]) -> bytes:
    """A minimal real DOCX: ('h1'|'p', text) paragraphs and ('table', 'a|b;c|d') tables, in order."""
    w = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    body = []
    for kind, text in blocks:
        if kind == "table":
            rows = "".join(
                "<w:tr>"
                + "".join(f"<w:tc><w:p><w:r><w:t>{c}</w:t></w:r></w:p></w:tc>" for c in row.split("|"))
                + "</w:tr>"
                for row in text.split(";")
            )
            body.append(f"<w:tbl>{rows}</w:tbl>")
        else:
            style = '<w:pPr><w:pStyle w:val="Heading1"/></w:pPr>' if kind == "h1" else ""
            body.append(f"<w:p>{style}<w:r><w:t>{text}</w:t></w:r></w:p>")
    document = f'<?xml version="1.0"?><w:document {w}><w:body>{"".join(body)}</w:body></w:document>'
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types/>')
        archive.writestr("word/document.xml", document)
    return buffer.getvalue()


GUIDE = """---
title: Deployment guide
status: active
tags: [ops]
---
# Deployment

How we ship the station software.

## Rolling back a release

Redeploy the previous container tag and run the database down-migration.
"""


@pytest.fixture(scope="module")
def gitconfig(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The user's global git config, written by `repo`: the worker and the API, which list and
    explain the files, see it as well as the CLI (as they would, running as the same user)."""
    return tmp_path_factory.mktemp("git-home") / "gitconfig"


@pytest.fixture(scope="module")
def stack(api_factory: Any, gitconfig: Path) -> Stack:
    return api_factory(GIT_CONFIG_GLOBAL=str(gitconfig))  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory, stack: Stack, gitconfig: Path) -> Path:
    base = tmp_path_factory.mktemp("indexer")
    root = base / "workspace"
    (root / "src").mkdir(parents=True)
    (root / "docs" / "drafts").mkdir(parents=True)
    (root / "build").mkdir()
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("a file outside the folder that must never be indexed")

    files: dict[str, str | bytes] = {
        ".gitignore": "build/\n*.log\n!important.log\n",
        "src/.gitignore": "*.tmp\n!keep.tmp\n",
        "src/app.py": "def launch_balloon():\n    return 'helium filled'\n",
        "src/cache.tmp": "nested gitignore excludes this",
        "src/keep.tmp": "negation re-includes this zeppelin note",
        "build/out.js": "console.log('build output')",
        "debug.log": "ignored log",
        "important.log": "important log about the gyroscope calibration",
        "local-notes.txt": "excluded through .git/info/exclude",
        "machine.globalignored": "excluded by the global excludes file",
        ".indexignore": "docs/drafts/\n",
        "docs/.indexignore": "# drafts are not ready\n*.draft.md\n",
        "docs/drafts/wip.md": "work in progress",
        "docs/intro.draft.md": "a draft intro",
        "docs/guide.md": GUIDE,
        "notes.secretdoc": "excluded by the global indexignore",
        "logo.png": b"\x89PNG\r\n\x1a\n" + bytes(200),
        "data.txt": b"text with a NUL\x00 byte inside",
        "big.txt": "x" * 600_000,
        ".env": "API_KEY=hunter2",
        "report.pdf": make_pdf(
            ["Page one talks about the launch checklist.", "Page two explains the parachute deployment altitude."]
        ),
        "bad.pdf": b"%PDF-1.4\n this is not really a pdf",
        "memo.docx": make_docx(
            [
                ("h1", "Quarterly memo"),
                ("p", "The ground station moved to Lisbon."),
                ("table", "Item|Cost;Antenna|400 EUR"),
            ]
        ),
        "latin1.txt": "caf\xe9 au lait with a br\xfbl\xe9e".encode("latin-1"),
        "bundle.min.js": "var a=0;" + ";".join(f"function fn{i}(q){{return q+{i}}}" for i in range(1_500)),
    }
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    (root / "link-outside").symlink_to(outside / "secret.txt")

    (base / "global-ignore").write_text("*.globalignored\n")
    gitconfig.write_text(
        f"[core]\n\texcludesFile = {base / 'global-ignore'}\n[user]\n\tname = t\n\temail = t@example.com\n"
    )
    env = dict(os.environ, GIT_CONFIG_GLOBAL=str(gitconfig))
    stack.env["GIT_CONFIG_GLOBAL"] = str(gitconfig)
    git(root, "init", "-q", env=env)
    (root / ".git" / "info" / "exclude").write_text("local-notes.txt\n")
    git(root, "add", "-A", env=env)
    git(root, "commit", "-qm", "fixture", env=env)
    (root / "untracked.md").write_text("# Untracked\nAn untracked but not ignored note about barometers.\n")
    (stack.data_dir / "indexignore").write_text("*.secretdoc\n")
    stack.cli("add", str(root))
    return root


@pytest.fixture(scope="module")
def first_run(stack: Stack, repo: Path) -> dict:
    return stack.index("--verbose")


INCLUDED = {
    ".gitignore", "src/.gitignore", ".indexignore", "docs/.indexignore", "src/app.py", "src/keep.tmp",
    "important.log", "docs/guide.md", "report.pdf", "memo.docx", "latin1.txt", "bundle.min.js", "untracked.md",
}  # fmt: skip


def manifest(stack: Stack, folder: str = "workspace") -> dict[str, dict]:
    with stack.http() as http:
        return {f["path"]: f for f in http.get(f"/v1/folders/{folder}/manifest").json()["files"]}


def search(stack: Stack, query: str, k: int = 5) -> list[dict]:
    with stack.http() as http:
        return http.post("/v1/search", json={"query": query, "k": k}).json()["hits"]  # type: ignore[no-any-return]


def explain(stack: Stack, path: Path) -> dict:
    return json.loads(stack.cli("explain", str(path), "--json").stdout)  # type: ignore[no-any-return]


def test_exactly_the_right_files_are_indexed(stack: Stack, repo: Path, first_run: dict) -> None:
    assert set(manifest(stack)) == INCLUDED
    assert first_run["filesProcessed"] == len(INCLUDED)
    skipped = first_run["skippedBy"]
    assert skipped["binary"] == 2  # logo.png by extension, data.txt by content
    assert skipped["indexignore"] == 3 and skipped["secret"] == 1 and skipped["symlink"] == 1
    assert skipped["too-large"] == 1 and skipped["corrupt"] == 1
    assert [u["path"] for u in first_run["unindexable"]] == ["bad.pdf"]


@pytest.mark.parametrize(
    ("rel", "rule", "detail"),
    [
        ("build/out.js", "git-ignored", ".gitignore:1:build/"),
        ("debug.log", "git-ignored", ".gitignore:2:*.log"),
        ("src/cache.tmp", "git-ignored", "src/.gitignore:1:*.tmp"),
        ("local-notes.txt", "git-ignored", "info/exclude:1:local-notes.txt"),
        ("machine.globalignored", "git-ignored", "global-ignore:1:*.globalignored"),
        ("docs/drafts/wip.md", "indexignore", ".indexignore:1: docs/drafts/"),
        ("docs/intro.draft.md", "indexignore", "docs/.indexignore:2: *.draft.md"),
        ("notes.secretdoc", "indexignore", "indexignore:1: *.secretdoc"),
        ("logo.png", "binary", "extension"),
        ("data.txt", "binary", "NUL"),
        ("big.txt", "too-large", "600,000 bytes"),
        ("link-outside", "symlink", "never followed"),
        (".env", "secret", "credentials"),
        ("bad.pdf", "corrupt", "not a readable PDF"),
        ("src/keep.tmp", "included", "git lists it"),
        ("untracked.md", "included", "git lists it"),
    ],
)
def test_explain_names_the_deciding_rule(
    stack: Stack, repo: Path, first_run: dict, rel: str, rule: str, detail: str
) -> None:
    verdict = explain(stack, repo / rel)
    assert verdict["rule"] == rule, verdict
    assert detail in verdict["detail"], verdict
    assert verdict["indexed"] is (rule == "included")


def test_explain_reports_chunks_and_outsiders(stack: Stack, repo: Path, first_run: dict, tmp_path: Path) -> None:
    guide = explain(stack, repo / "docs/guide.md")
    assert guide["indexed"] and guide["chunks"] >= 2 and guide["stale"] is False
    outside = explain(stack, tmp_path)
    assert outside["rule"] == "outside" and "semsearch add" in outside["detail"]
    human = stack.cli("explain", str(repo / "build/out.js")).stdout
    assert "not indexed: git-ignored" in human and ".gitignore:1:build/" in human


def test_pdf_pages_docx_order_and_markdown_headings_reach_search(stack: Stack, repo: Path, first_run: dict) -> None:
    pdf = search(stack, "parachute deployment altitude", 3)[0]
    assert pdf["relPath"] == "report.pdf" and pdf["page"] == 2
    docx = search(stack, "where did the ground station move", 3)[0]
    assert docx["relPath"] == "memo.docx" and docx["heading"] == "Quarterly memo"
    text = docx["text"]
    assert text.index("Lisbon") < text.index("Antenna | 400 EUR")  # paragraphs and table rows in document order
    guide = search(stack, "how to roll back a bad release", 3)[0]
    assert guide["relPath"] == "docs/guide.md" and guide["heading"] == "Deployment > Rolling back a release"
    assert "title: Deployment guide" not in guide["text"]
    latin = search(stack, "coffee with milk", 5)
    assert any(h["relPath"] == "latin1.txt" and "\ufffd" in h["text"] for h in latin)


def test_minified_one_line_file_is_chunked_within_the_window(stack: Stack, repo: Path, first_run: dict) -> None:
    verdict = explain(stack, repo / "bundle.min.js")
    assert verdict["indexed"] and verdict["chunks"] > 10
    hit = search(stack, "function fn1499(q){return q+1499}", 20)
    assert any(h["relPath"] == "bundle.min.js" for h in hit)


def test_a_400_kb_one_line_file_is_listed_and_chunked(stack: Stack, tmp_path: Path) -> None:
    # Checked with --dry-run (real tokenizer, no embedding): embedding ~1,400 chunks would
    # cost the suite a minute; the chunk limit itself is proven in test_chunker.py.
    folder = tmp_path / "minified"
    folder.mkdir()
    line = "var a=0;" + ";".join(f"function fn{i}(q){{return q+{i}}}" for i in range(14_000))
    assert 350_000 < len(line) < 500_000
    (folder / "bundle.min.js").write_text(line)
    stack.cli("add", str(folder))
    try:
        plan = json.loads(stack.cli("index", str(folder), "--dry-run").stdout.strip().splitlines()[-1])
        assert plan["filesToIndex"] == 1 and plan["chunks"] > 1_000
    finally:
        stack.cli("remove", "minified", "--yes")


def test_secrets_outside_the_folder_never_leak(stack: Stack, repo: Path, first_run: dict) -> None:
    hits = search(stack, "a file outside the folder that must never be indexed", 20)
    assert all("outside" not in h["filePath"] for h in hits)
    assert all(h["relPath"] != ".env" for h in search(stack, "API_KEY hunter2", 20))


def test_dry_run_estimates_without_embedding(stack: Stack, tmp_path: Path) -> None:
    fresh = tmp_path / "dry"
    fresh.mkdir()
    for i in range(5):
        (fresh / f"doc{i}.md").write_text(f"# Doc {i}\n" + "Lorem ipsum dolor sit amet. " * 60)
    warm = tmp_path / "warm"  # the estimate is at the embedder's measured throughput: give it one
    warm.mkdir()
    (warm / "note.md").write_text("# Warm\n\nA note the embedder measures its throughput on.\n")
    stack.cli("add", str(warm))
    stack.cli("add", str(fresh))
    try:
        stack.index(str(warm))
        result = stack.cli("index", str(fresh), "--dry-run")
        plan = json.loads(result.stdout.strip().splitlines()[-1])
        assert plan["dryRun"] is True and plan["files"] == 5 and plan["filesToIndex"] == 5
        assert plan["chunks"] >= 5 and plan["chunksPerSecond"] > 0 and plan["embedSeconds"] > 0
        assert plan["diskBytes"] > plan["chunks"] * 1536
        assert "would index  doc0.md" in result.stdout
        assert manifest(stack, "dry") == {}  # nothing was embedded or written
    finally:
        stack.cli("remove", "dry", "--yes")
        stack.cli("remove", "warm", "--yes")


def test_max_files_truncates_and_never_prunes(stack: Stack, tmp_path: Path) -> None:
    folder = tmp_path / "many"
    folder.mkdir()
    for i in range(6):
        (folder / f"f{i}.txt").write_text(f"note number {i} about owls")
    stack.cli("add", str(folder))
    try:
        first = stack.index(str(folder), "--max-files", "4")
        assert first["filesProcessed"] == 4 and first["truncated"] is True
        rest = stack.index(str(folder))
        assert rest["filesProcessed"] == 2 and rest["truncated"] is False
    finally:
        stack.cli("remove", "many", "--yes")


def test_a_second_writer_is_refused_while_the_first_holds_the_folder(stack: Stack, repo: Path, first_run: dict) -> None:
    with stack.http() as http:
        lease = http.post("/v1/folders/workspace/lease", json={"holder": "another indexer"}).json()
        try:
            result = stack.cli("index", str(repo), check=False)
            assert result.returncode == 2
            assert "being indexed by another indexer" in result.stderr
        finally:
            http.delete(f"/v1/folders/workspace/lease/{lease['id']}")
    assert stack.index(str(repo))["filesProcessed"] == 0


def test_requested_runs_are_picked_up_by_a_worker(stack: Stack, tmp_path: Path) -> None:
    folder = tmp_path / "requested"
    folder.mkdir()
    (folder / "a.md").write_text("# Requested\nIndexed because a script asked over REST.\n")
    stack.cli("add", str(folder))
    worker = subprocess.Popen([sys.executable, "-m", "semsearch.indexer", "--worker"], env=stack.env)
    try:
        with stack.http() as http:
            run = http.post("/v1/runs", json={"folder": "requested"}).json()
            assert run["state"] in ("queued", "running")  # the stack's own worker thread may take it at once
            done = http.get(f"/v1/runs/{run['id']}", params={"wait": 60}).json()
            assert done["state"] == "done", done
            assert done["summary"]["filesProcessed"] == 1
            assert done["progress"]["filesDone"] == done["progress"]["filesTotal"] == 1
            unknown = http.post("/v1/runs", json={"folder": "nope"})
            assert unknown.status_code == 404
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        stack.cli("remove", "requested", "--yes")


def test_killed_indexer_converges_to_the_uninterrupted_index(api_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    corpus = tmp_path / "kill"
    corpus.mkdir()
    for i in range(40):
        (corpus / f"part{i:02}.md").write_text(f"# Part {i}\n" + f"Section {i} discusses topic {i * 7}. " * 80)
    reference = api_factory()
    reference.cli("add", str(corpus))
    reference.index()
    killed = api_factory(SEMSEARCH_LEASE_TTL_S="2")
    killed.cli("add", str(corpus))
    env = killed.env | {"SEMSEARCH_WRITE_BATCH_FILES": "2"}
    one_shot = [sys.executable, "-m", "semsearch.indexer"]  # the indexer process itself, killed mid-run
    proc = subprocess.Popen(one_shot, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    until(lambda: len(manifest(killed, "kill")) >= 6, 120, what="six files written before the kill")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = manifest(killed, "kill")
    assert 0 < len(partial) < 40
    wait_until_free(killed.url, "kill")  # the dead run's lease expires
    killed.index()
    want = {p: (e["sha256"], e["chunks"]) for p, e in manifest(reference, "kill").items()}
    got = {p: (e["sha256"], e["chunks"]) for p, e in manifest(killed, "kill").items()}
    assert got == want
    with killed.http() as a, reference.http() as b:
        for query in ("topic 133", "Section 7 discusses"):
            hits_a = a.post("/v1/search", json={"query": query, "k": 10}).json()["hits"]
            hits_b = b.post("/v1/search", json={"query": query, "k": 10}).json()["hits"]
            assert [(h["relPath"], h["startLine"]) for h in hits_a] == [(h["relPath"], h["startLine"]) for h in hits_b]


@pytest.fixture
def watcher(stack: Stack, tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "watched"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "old.md").write_text("# Old\nThis file lives in a directory that will be deleted.\n")
    stack.cli("add", str(folder))
    proc = subprocess.Popen([SEMSEARCH, "index", str(folder), "--watch"], env=stack.env, stdout=subprocess.DEVNULL)
    try:
        until(lambda: "sub/old.md" in manifest(stack, "watched"))
        yield folder
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        stack.cli("remove", "watched", "--yes")


def test_watch_mode_follows_create_modify_delete(stack: Stack, watcher: Path) -> None:
    new = watcher / "new.md"
    new.write_text("# New\nFreshly written notes about kestrels.\n")
    until(lambda: "new.md" in manifest(stack, "watched"))
    before = manifest(stack, "watched")["new.md"]["sha256"]
    new.write_text("# New\nRewritten notes about ospreys.\n")
    until(lambda: manifest(stack, "watched")["new.md"]["sha256"] != before)
    assert any(h["relPath"] == "new.md" for h in search(stack, "ospreys", 3))
    new.unlink()
    until(lambda: "new.md" not in manifest(stack, "watched"))
    import shutil

    shutil.rmtree(watcher / "sub")
    until(lambda: "sub/old.md" not in manifest(stack, "watched"))


def _long_folder(stack: Stack, folder: Path) -> None:
    """120 pages, big enough for a run to go lexical first and take seconds to embed; f000 the oldest,
    so the last in the run's newest-first order."""
    folder.mkdir()
    paragraph = " ".join(f"word{i} of the sample text about topic {i % 13}" for i in range(30))
    for i in range(120):
        page = folder / f"f{i:03d}.md"
        page.write_text(f"# Page {i}\n\n{paragraph}\n\n{paragraph.upper()}\n")
        os.utime(page, ns=(1_700_000_000_000_000_000 + i * 10**9,) * 2)
    stack.cli("add", str(folder))


def _edited_file_goes_next(stack: Stack, folder: Path, tell: Callable[[], object]) -> None:
    """Once the run's lexical pass has written every page, f000 is edited and `tell` says so; it
    must be embedded with its new text while most of the folder still waits (the caller then stops
    the run: the rest is what every run does)."""
    name = folder.name
    until(lambda: len(manifest(stack, name)) == 120, 60)  # the lexical pass
    (folder / "f000.md").write_text("# Page 0\n\nRewritten: notes about ospreys nesting on pylons.\n")
    tell()

    def embedded_as_edited() -> dict[str, Any] | None:
        files = manifest(stack, name)
        edited = files["f000.md"]
        return files if edited["embedded"] and edited["size"] == (folder / "f000.md").stat().st_size else None

    files = until(embedded_as_edited, 120, what="the edited file embedded")
    waiting = sum(not f["embedded"] for f in files.values())
    assert waiting >= 40, f"only {waiting} of 120 files were still waiting"  # it did not wait its turn


def test_a_file_edited_during_a_long_run_is_embedded_next(stack: Stack, tmp_path: Path) -> None:
    """Watch mode: the watcher's event for the edited file reaches the run under way."""
    folder = tmp_path / "long"
    _long_folder(stack, folder)
    proc = subprocess.Popen([SEMSEARCH, "index", str(folder), "--watch"], env=stack.env, stdout=subprocess.DEVNULL)
    try:
        _edited_file_goes_next(stack, folder, lambda: None)
        proc.send_signal(signal.SIGINT)  # Ctrl-C ends the run at its next file, not at its end
        assert proc.wait(timeout=60) == 0
        assert any(not f["embedded"] for f in manifest(stack, "long").values())  # the next run's to embed
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)
        stack.cli("remove", "long", "--yes")


def test_a_file_named_in_a_run_request_is_embedded_next(stack: Stack, tmp_path: Path) -> None:
    """A requested run (the API's worker), and an agent's MCP `index` call naming the edited file
    while the first runs (a REST request underneath, as the Claude Code hook sends one)."""
    folder = tmp_path / "asked"
    _long_folder(stack, folder)
    answers: list[Any] = []
    agent = threading.Thread(  # the tool waits for its own (queued) run: up to 30 s
        target=lambda: answers.extend(call_mcp(stack.env, [("index", {"folder": "asked", "paths": ["f000.md"]})]))
    )
    with stack.http() as http:
        first = http.post("/v1/runs", json={"folder": "asked"}).json()
        try:
            _edited_file_goes_next(stack, folder, agent.start)
            (outside,) = call_mcp(stack.env, [("index", {"folder": "asked", "paths": ["../elsewhere.md"]})])
            assert outside.is_error and "invalid arguments: paths.0" in outside.content[0].text, outside.content
        finally:
            for run in http.get("/v1/runs").json():
                if run["request"]["folder"] == "asked" and run["state"] in ("queued", "running"):
                    http.delete(f"/v1/runs/{run['id']}")
            if agent.is_alive():
                agent.join(timeout=60)
            wait_until_free(stack.url, "asked")
            stack.cli("remove", "asked", "--yes")
    (answer,) = answers
    assert not answer.is_error, answer.content
    assert answer.structured_content["id"] != first["id"]  # queued after the run it hurried


def test_index_output_is_plain_lines_without_a_terminal(stack: Stack, repo: Path, first_run: dict) -> None:
    result = stack.cli("index", str(repo))
    lines = result.stdout.strip().splitlines()
    assert lines[0] == f"[1/1] workspace  {repo}"
    assert lines[1].startswith("  0 indexed")
    assert lines[-2].startswith("total  0 indexed")
    assert json.loads(lines[-1])["filesProcessed"] == 0
    assert "\x1b[" not in result.stdout + result.stderr  # no progress-bar escapes in logs


def test_verbose_logs_every_decision(stack: Stack, repo: Path, first_run: dict) -> None:
    result = stack.cli("index", str(repo), "--verbose", "--force")
    assert "↺ indexed" in result.stderr and "src/app.py" in result.stderr
    assert "excluded" in result.stderr and "link-outside" in result.stderr


def test_api_refuses_a_non_directory(stack: Stack, tmp_path: Path) -> None:
    file = tmp_path / "plain.txt"
    file.write_text("x")
    with httpx.Client(base_url=stack.url) as http:
        response = http.post("/v1/folders", json={"path": str(file)})
    assert response.status_code == 400 and "not a directory" in response.json()["detail"]


def test_index_needs_only_the_api_url(api_factory: Any, tmp_path: Path) -> None:
    """One run path: `semsearch index` asks the API for a run that the stack's worker executes, so
    the CLI needs SEMSEARCH_URL alone — as from the host of a compose stack, whose embedder is on an
    internal network (here: an embedder address that answers nothing)."""
    stack = api_factory()
    root = tmp_path / "only-url"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "a.md").write_text("# Tides\n\nThe spring tide comes two days after the full moon.\n")
    (root / "b.py").write_text("def ebb():\n    return 'low water'\n")
    env = clean_env(SEMSEARCH_URL=stack.url, SEMSEARCH_EMBEDDER_ADDR="127.0.0.1:1")
    cli = [SEMSEARCH]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*cli, *args], env=env, capture_output=True, text=True, timeout=300, check=False)

    assert run("add", str(root)).returncode == 0
    plan = run("index", "--dry-run")
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout.strip().splitlines()[-1])["filesToIndex"] == 2
    done = run("index", "--verbose")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith("[1/1] only-url") and any(line.startswith("total  2 indexed") for line in lines)
    assert json.loads(lines[-1])["filesProcessed"] == 2
    assert "↺ indexed  docs/a.md" in done.stderr  # --verbose: the worker's per-file lines, on stderr
    sub = run("index", str(root / "docs"), "--force")
    assert json.loads(sub.stdout.strip().splitlines()[-1])["filesProcessed"] == 1  # only that part
    explained = json.loads(run("explain", str(root / "docs" / "a.md"), "--json").stdout)
    assert explained["indexed"] and explained["chunks"] >= 1 and explained["stale"] is False


def test_index_says_when_no_worker_runs(api_factory: Any, tmp_path: Path) -> None:
    stack = api_factory(worker=False, SEMSEARCH_RUN_CLAIM_WAIT_S="1")
    (tmp_path / "lonely").mkdir()
    (tmp_path / "lonely" / "a.md").write_text("# A\n")
    stack.cli("add", str(tmp_path / "lonely"))
    result = subprocess.run([SEMSEARCH, "index"], env=stack.env | {"SEMSEARCH_RUN_CLAIM_WAIT_S": "1"},
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 2  # it could not be done (1 is a run that finished with failed files)
    assert "no indexer worker took index run" in result.stderr and "semsearch serve" in result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1])["errors"]
    with stack.http() as http:
        assert http.get("/v1/runs").json()[0]["state"] == "cancelled"  # not left to surprise a later worker
