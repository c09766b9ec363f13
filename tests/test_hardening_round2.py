"""Issue 27, the second adversarial review: each numbered reproduction as a regression test.

Most run in this process on the real parts (the API app over ASGI with a real LanceDB and the
real model behind an in-process gRPC embedder; the real hook, runs, limits, snapshot reader,
screening and lease code); the child-process cases start real processes.
"""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
import tarfile
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import lancedb
import pyarrow as pa
import pytest
from fastapi import HTTPException
from fastapi.testclient import TestClient

from semsearch.api.app import create_app
from semsearch.api.audit import Audit
from semsearch.api.auth import Limits, Principal
from semsearch.config import Settings
from semsearch.corpus.extract import Unindexable, extract
from semsearch.corpus.folders import FolderRegistry
from semsearch.engine import snapshots
from semsearch.engine.gather import with_context
from semsearch.engine.location import IndexLocation
from semsearch.engine.runs import QueueFull, RunCancelled, Runs
from semsearch.engine.store import ServingGate
from semsearch.engine.writer import PREFIX, LeaseHeld, WriterLease
from semsearch.hook import LOG_FILE, STATE_FILE, Hook, spawn_follow_up
from semsearch.indexer.chunker import ChunkSizes, FrontMatterRefused, chunk_text, parse_frontmatter
from semsearch.limits import MAX_QUEUED_PER_TOKEN
from semsearch.schemas import Hit, RunProgress, RunRequest
from semsearch.spawn import python_module

ADMIN = "round2-admin-secret"
MARKER_MODULE = """import os, sys
open(os.environ["MARKER"], "a").write(f"{__name__}.py ran in pid {os.getpid()}: {' '.join(sys.argv)}\\n")
"""


@pytest.fixture
def guarded(tmp_path: Path, embedder_address: str) -> Iterator[tuple[TestClient, dict[str, str], Path]]:
    """An API with an admin token, folders alpha and beta, and tokens limited to alpha."""
    settings = Settings(data_dir=tmp_path / "data", embedder_addr=embedder_address, corpus_root=tmp_path,
                        token=ADMIN)  # fmt: skip
    (tmp_path / "alpha").mkdir()
    (tmp_path / "alpha" / "notes.md").write_text("# Notes\n\nThe harbour opens at dawn.\n")
    (tmp_path / "beta").mkdir()
    (tmp_path / "beta" / "secret-plan.md").write_text("# Plan\n\nBETA-ONLY: the merger closes in May.\n")
    with TestClient(create_app(settings), base_url="http://127.0.0.1:8765") as http:
        admin = {"Authorization": f"Bearer {ADMIN}"}
        for name in ("alpha", "beta"):
            assert http.post("/v1/folders", json={"path": str(tmp_path / name)}, headers=admin).status_code == 201
        secrets = {"admin": ADMIN}
        for name, scope in (("ra", "read"), ("wa", "write")):
            made = http.post("/v1/tokens", json={"name": name, "scope": scope, "folders": ["alpha"]}, headers=admin)
            assert made.status_code == 201, made.text
            secrets[name] = made.json()["secret"]
        yield http, secrets, tmp_path


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


# --- 1. child processes never import from the caller's directory ----------------------------


@pytest.mark.e2e  # starts processes
def test_the_hook_follow_up_never_imports_the_projects_own_modules(tmp_path: Path) -> None:
    project, marker = tmp_path / "repo", tmp_path / "marker.txt"
    project.mkdir()
    for name in ("json", "typing", "queue", "pathlib"):
        (project / f"{name}.py").write_text(MARKER_MODULE)
    os.environ["MARKER"] = str(marker)
    try:
        child = spawn_follow_up(project)
        assert child.wait(timeout=60) == 0
    finally:
        del os.environ["MARKER"]
    assert not marker.exists(), marker.read_text()


@pytest.mark.e2e  # starts processes
def test_python_children_ignore_the_working_directory(tmp_path: Path) -> None:
    """The argv every service start uses (`serve`, the test harness, model preparation)."""
    (tmp_path / "json.py").write_text(MARKER_MODULE)
    marker = tmp_path / "marker.txt"
    env = dict(os.environ, MARKER=str(marker))
    done = subprocess.run(python_module("semsearch.cli", "--version"), cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0 and "semsearch" in done.stdout, done.stderr
    assert not marker.exists()
    # What the old argv did, so the test shows it can fail: the cwd's json.py ran.
    subprocess.run([sys.executable, "-m", "semsearch.cli", "--version"], cwd=tmp_path, env=env,
                   capture_output=True, timeout=60, check=False)  # fmt: skip
    assert marker.exists()


# --- 2. paths are relative and reads stay in the caller's folders ---------------------------


def test_a_batch_cannot_name_a_file_outside_its_folder(guarded: tuple[TestClient, dict[str, str], Path]) -> None:
    http, secrets, _ = guarded
    vectors = base64.b64encode(b"\0" * 4 * 384).decode()
    for bad in ("../beta/secret-plan.md", "/etc/passwd", "a/../../beta/x.md", "a\x00b", "", "./x.md", "a//b"):
        upsert = {"path": bad, "mtimeNs": 1, "size": 1, "sha256": "0" * 64,
                  "chunks": [{"startLine": 1, "endLine": 1, "text": "x"}], "vectors": vectors}  # fmt: skip
        body = {"modelId": "m", "dimension": 384, "upserts": [upsert]}
        answer = http.post("/v1/folders/alpha/batches", json=body, headers=bearer(secrets["wa"]))
        assert answer.status_code == 422, (bad, answer.text)
        assert "relative to the folder" in answer.text or bad == "" or "\x00" in bad
        deletes = http.post("/v1/folders/alpha/batches", json={"modelId": "m", "dimension": 384, "deletes": [bad]},
                            headers=bearer(secrets["wa"]))  # fmt: skip
        assert deletes.status_code == 422, (bad, deletes.text)


def test_gathers_context_lines_only_from_the_hits_own_file(tmp_path: Path) -> None:
    """A row that claims folder alpha but resolves into beta (as one written before paths were
    checked could) gets its own chunk text, never beta's file — through alpha's view or any."""
    for name in ("alpha", "beta"):
        (tmp_path / name).mkdir()
    (tmp_path / "beta" / "secret-plan.md").write_text("BETA-ONLY line\n" * 5)
    settings = Settings(data_dir=tmp_path / "data", corpus_root=tmp_path)
    registry = FolderRegistry(tmp_path / "folders.json", tmp_path, [settings.data_dir])
    registry.add(str(tmp_path / "alpha"))
    registry.add(str(tmp_path / "beta"))
    hit = Hit.model_validate({"id": "x", "score": 0.5, "cosine": 0.5, "label": "vector", "folder": "alpha",
                              "relPath": "../beta/secret-plan.md",
                              "filePath": str(tmp_path / "alpha" / ".." / "beta" / "secret-plan.md"),
                              "startLine": 2, "endLine": 2, "text": "the chunk as indexed"})  # fmt: skip
    for view in (registry, registry.only(frozenset({"alpha"}))):
        text, _ = with_context(hit, 3, view, settings)
        assert "BETA-ONLY" not in text and text == "the chunk as indexed"


# --- 3. an empty folder list never means every folder ---------------------------------------


def test_an_empty_folder_list_is_refused(guarded: tuple[TestClient, dict[str, str], Path], tmp_path: Path) -> None:
    http, secrets, _ = guarded
    answer = http.post("/v1/tokens", json={"name": "empty", "scope": "read", "folders": []},
                       headers=bearer(secrets["admin"]))  # fmt: skip
    assert answer.status_code == 422 and "at least 1" in answer.text
    assert Principal("x", "read", frozenset()).sees("alpha") is False
    with pytest.raises(HTTPException) as refused:
        Principal("x", "read", frozenset()).limit(None)
    assert refused.value.status_code == 403


def test_an_empty_folder_list_in_the_tokens_file_is_an_error(tmp_path: Path, embedder_address: str) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tokens": [{"name": "empty", "hash": "sha256:" + "0" * 64, "scope": "read",
                                              "folders": []}]}))  # fmt: skip
    settings = Settings(data_dir=tmp_path / "data", embedder_addr=embedder_address, tokens_file=tokens)
    with TestClient(create_app(settings), base_url="http://127.0.0.1:8765") as http:
        answer = http.post("/v1/search", json={"query": "x"}, headers=bearer("anything"))
    assert answer.status_code == 503 and "empty folder list" in answer.json()["detail"]


# --- 4 and 5. one file never stalls a run -----------------------------------------------------


def nested_docx(depth: int) -> bytes:
    w = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    inner = "<w:p><w:r><w:t>deep text</w:t></w:r></w:p>"
    body = "<w:sdt><w:sdtContent>" * depth + inner + "</w:sdtContent></w:sdt>" * depth
    xml = f'<?xml version="1.0"?><w:document xmlns:w="{w}"><w:body>{body}</w:body></w:document>'
    out = io.BytesIO()
    import zipfile

    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("word/document.xml", xml)
    return out.getvalue()


def test_deeply_nested_docx_is_read_without_recursion(tmp_path: Path) -> None:
    path = tmp_path / "nested.docx"
    path.write_bytes(nested_docx(5000))
    assert "deep text" in extract(path, 10_000_000).segments[0].text


def test_a_line_without_spaces_is_sliced_into_bounded_chunks() -> None:
    """The tokenizer reads a 300 KB hex word as one [UNK]; chunks must still be bounded."""
    from tokenizers import Tokenizer

    from semsearch.embedder.model import model_files

    counter = Tokenizer.from_file(str(model_files(None).tokenizer))
    counter.no_truncation()
    count = lambda texts: [len(e.ids) for e in counter.encode_batch(texts, add_special_tokens=False)]  # noqa: E731
    chunks = chunk_text("ab12" * 75_000, count, ChunkSizes(256, 32, 256))
    assert len(chunks) > 50 and max(len(c.text) for c in chunks) <= 5_000


def test_alias_bombs_in_front_matter_are_refused_not_expanded() -> None:
    levels = ["a: &a ['lol','lol','lol','lol','lol','lol','lol','lol','lol']"]
    for i in range(1, 9):
        prev = chr(ord("a") + i - 1)
        levels.append(f"{chr(ord('a') + i)}: &{chr(ord('a') + i)} [{','.join(['*' + prev] * 9)}]")
    text = "---\n" + "\n".join(levels) + "\ntitle: *i\n---\n# Body\n"
    with pytest.raises(FrontMatterRefused) as refused:
        parse_frontmatter(text)
    assert isinstance(refused.value, Unindexable) and refused.value.reason == "front-matter"
    deep = "---\ntitle: " + "[" * 5000 + "]" * 5000 + "\n---\n"
    with pytest.raises(FrontMatterRefused):
        parse_frontmatter(deep)
    meta, lines = parse_frontmatter("---\ntitle: Ordinary\ntags: [a, b]\n---\nbody\n")
    assert meta.title == "Ordinary" and lines == 4


class Clock:
    def __init__(self) -> None:
        self.at = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.at


def test_a_run_whose_worker_went_silent_fails_and_cancel_always_completes() -> None:
    clock = Clock()
    runs = Runs(clock, silence=timedelta(minutes=10))
    first = runs.request(RunRequest(folder="alpha"))
    assert runs.try_claim("worker pid 1") is not None
    clock.at += timedelta(minutes=9)
    runs.progress(first.id, RunProgress())  # a live worker reports; the run stays running
    clock.at += timedelta(minutes=11)
    ended = runs.get(first.id)
    assert ended.state == "failed" and "stopped reporting" in (ended.error or "")
    with pytest.raises(RunCancelled):  # a worker that wakes up is told to stop
        runs.progress(first.id, RunProgress())
    second = runs.request(RunRequest(folder="beta"))
    runs.try_claim("worker pid 2")
    assert runs.cancel(second.id).state == "running"  # its worker may still stop it
    clock.at += timedelta(seconds=31)
    assert runs.get(second.id).state == "cancelled"  # it did not: cancelled all the same


# --- 6 and 11. no caller takes every thread, session or queue slot --------------------------


def test_heavy_reads_are_capped_per_caller_and_in_all() -> None:
    limits = Limits(heavy_per_caller=2, heavy_total=3)
    one, two = Principal("one", "read"), Principal("two", "read")
    with limits.heavy(one), limits.heavy(one):
        with pytest.raises(HTTPException) as mine, limits.heavy(one):
            pass
        assert mine.value.status_code == 429 and "'one'" in mine.value.detail
        with limits.heavy(two):
            with pytest.raises(HTTPException) as everyone, limits.heavy(Principal("three", "read")):
                pass
            assert "for all callers" in everyone.value.detail
    with limits.heavy(one):  # released on the way out
        pass


def test_one_token_cannot_fill_the_run_queue() -> None:
    runs = Runs()
    for i in range(MAX_QUEUED_PER_TOKEN):
        runs.request(RunRequest(folder=f"f{i}"), "loop")
    with pytest.raises(QueueFull, match="'loop' already has"):
        runs.request(RunRequest(folder="one-more"), "loop")
    assert runs.request(RunRequest(folder="admin-run"), "admin").state == "queued"


def test_mcp_sessions_are_counted_per_token() -> None:
    import anyio
    import httpx

    from semsearch.mcp_bridge.main import BearerToken

    opened: list[str] = []

    async def stand_in(scope: Any, receive: Any, send: Any) -> None:
        """A stand-in for the SDK's session manager: it opens a session per request without one."""
        sid = f"s{len(opened)}"
        opened.append(sid)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"mcp-session-id", sid.encode())]})
        await send({"type": "http.response.body", "body": b"{}"})

    guard = BearerToken(stand_in, "bridge-secret", "http://127.0.0.1:9", sessions_per_token=2)

    async def run() -> list[int]:
        transport = httpx.ASGITransport(app=guard)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            headers = {"Authorization": "Bearer bridge-secret"}
            codes = [(await http.post("/mcp", json={}, headers=headers)).status_code for _ in range(3)]
            await http.delete("/mcp", headers={**headers, "mcp-session-id": "s0"})
            codes.append((await http.post("/mcp", json={}, headers=headers)).status_code)
            return codes

    assert anyio.run(run) == [200, 200, 429, 200]


# --- 7. the hook never follows a symlink in .claude -----------------------------------------


def test_the_hook_never_writes_through_symlinks(tmp_path: Path) -> None:
    project, victim = tmp_path / "repo", tmp_path / "authorized_keys"
    (project / ".claude").mkdir(parents=True)
    victim.write_text("ssh-ed25519 AAAA keep-me\n")
    (project / STATE_FILE).symlink_to(victim)
    (project / LOG_FILE).symlink_to(victim)
    hook = Hook(project, Settings(url="http://127.0.0.1:9"), spawn=lambda p: None)
    with pytest.raises(OSError):
        hook.on_edit(project / "README.md")
    hook.log("a line")
    assert victim.read_text() == "ssh-ed25519 AAAA keep-me\n"
    other = tmp_path / "other"
    other.mkdir()
    (tmp_path / "repo2").mkdir()
    (tmp_path / "repo2" / ".claude").symlink_to(other)
    with pytest.raises(OSError):
        Hook(tmp_path / "repo2", Settings(url="http://127.0.0.1:9"), spawn=lambda p: None).on_edit(tmp_path / "x")
    assert list(other.iterdir()) == []


def test_an_edited_path_is_logged_on_one_escaped_line(tmp_path: Path) -> None:
    hook = Hook(tmp_path, Settings(url="http://127.0.0.1:9"), spawn=lambda p: None)
    hook.log(f"edit of {tmp_path / 'a'}\n$(touch /tmp/pwned)\nb.md")
    log = (tmp_path / LOG_FILE).read_text()
    assert log.count("\n") == 1 and "\\n$(touch" in log


# --- 8, 10. snapshot manifests and members ---------------------------------------------------


def manifest_bytes(**overrides: Any) -> bytes:
    body: dict[str, Any] = {"format": "semsearch-snapshot", "formatVersion": 1, "semsearchVersion": "0.1.0",
                            "createdAt": "2026-01-01T00:00:00Z", "schemaVersion": 2, "modelId": "m", "dimension": 384,
                            "root": "/srv", "folders": [{"name": "ok", "path": "ok"}], "files": 0, "chunks": 0,
                            "symbols": 0, "members": {}}  # fmt: skip
    body.update(overrides)
    body["digest"] = snapshots._digest({k: v for k, v in body.items() if k != "digest"})
    return json.dumps(body).encode()


@pytest.mark.parametrize("name", ["a/b", "..", "", "x" * 5000, "new\nline", 'quo"te', "<b>html</b>"])
def test_snapshot_folder_names_are_validated(name: str) -> None:
    data = manifest_bytes(folders=[{"name": name, "path": "x"}])
    with pytest.raises(snapshots.SnapshotRefused, match="does not describe a snapshot"):
        snapshots._verified_manifest(data)


def test_a_deeply_nested_manifest_is_a_refusal_not_a_500() -> None:
    with pytest.raises(snapshots.SnapshotRefused):
        snapshots._verified_manifest(b"[" * 200_000)


def test_sparse_members_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    archive = tmp_path / "sparse.tar"
    with tarfile.open(archive, "w", format=tarfile.GNU_FORMAT) as tar:
        info = tarfile.TarInfo(snapshots.SNAPSHOT_MANIFEST)
        data = manifest_bytes(members={m: {"sha256": "0", "bytes": 10} for m in snapshots.MEMBERS.values()})
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        sparse = tarfile.TarInfo("chunks.arrow")
        sparse.type = tarfile.GNUTYPE_SPARSE
        tar.addfile(sparse)
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(snapshots.SnapshotRefused, match="unexpected member"):
        snapshots._unpack(archive, work)
    assert list(work.iterdir()) == []


def test_a_compression_bomb_member_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from semsearch.engine.store import FILE_SCHEMA, SYMBOL_SCHEMA, chunk_schema

    monkeypatch.setattr(snapshots, "MIN_DECODED_CAP", 1_000_000)  # the same rule, at a size a test can afford
    rows = 5_000
    table = pa.table({"folder": ["ok"] * rows, "path": ["p" * 4_000] * rows, "mtime_ns": [0] * rows,
                      "size": [0] * rows, "sha256": ["0"] * rows, "chunks": pa.array([0] * rows, pa.int32()),
                      "indexed_at": pa.array([0] * rows, pa.timestamp("us", tz="UTC")),
                      "embedded": [True] * rows}).cast(FILE_SCHEMA)  # fmt: skip
    options = pa.ipc.IpcWriteOptions(compression="zstd")
    schemas = {"chunks.arrow": chunk_schema(384), "symbols.arrow": SYMBOL_SCHEMA, "files.arrow": FILE_SCHEMA}
    for member, schema in schemas.items():
        with pa.OSFile(str(tmp_path / member), "wb") as sink, pa.ipc.new_stream(sink, schema, options=options) as w:
            if member == "files.arrow":
                w.write_table(table)
    assert (tmp_path / "files.arrow").stat().st_size * snapshots.DECODED_RATIO < rows * 4_000  # it packs that well
    manifest = snapshots._verified_manifest(manifest_bytes(files=rows))
    with pytest.raises(snapshots.SnapshotRefused, match="unpacks to more than"):
        snapshots._check_rows(manifest, tmp_path)


# --- 9. searches keep answering while an import swaps the index -----------------------------


def test_readers_wait_out_a_swap_instead_of_failing() -> None:
    gate, events = ServingGate(), []
    reading, release = threading.Event(), threading.Event()

    def reader() -> None:
        with gate.reading():
            reading.set()
            release.wait(10)
            with gate.reading():  # a read inside a read never waits on the gate
                events.append("nested read")

    def swapper() -> None:
        with gate.exclusive():
            events.append("swap")

    first = threading.Thread(target=reader)
    first.start()
    assert reading.wait(10)
    swap = threading.Thread(target=swapper)
    swap.start()
    swap.join(0.2)
    assert swap.is_alive()  # the swap waits for the read in flight
    release.set()
    first.join(10)
    swap.join(10)
    assert events == ["nested read", "swap"]


def test_searches_during_snapshot_imports_all_answer(guarded: tuple[TestClient, dict[str, str], Path]) -> None:
    http, secrets, base = guarded
    admin = bearer(secrets["admin"])
    from semsearch.client import ApiClient
    from semsearch.embedder.client import EmbedderClient
    from semsearch.indexer.progress import Reporter
    from semsearch.indexer.run import Indexer

    app_settings: Settings = http.app.state.settings  # type: ignore[attr-defined]
    http.headers.update(admin)
    api = ApiClient(app_settings, http=http)  # the REST client speaks to the app in this process
    embedder = EmbedderClient(app_settings.embedder_target)
    try:
        Indexer(app_settings, api, embedder, Reporter(interactive=False), 1).run(api.folders())
    finally:
        embedder.close()
    archive = http.get("/v1/snapshot", headers=admin).content
    failures: list[str] = []
    stop = threading.Event()

    def search() -> None:
        while not stop.is_set():
            answer = http.post("/v1/search", json={"query": "when does the harbour open"}, headers=admin)
            if answer.status_code != 200:
                failures.append(f"{answer.status_code} {answer.text[:200]}")

    threads = [threading.Thread(target=search) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for _ in range(3):
            imported = http.put("/v1/snapshot", content=archive, headers=admin)
            assert imported.status_code == 200, imported.text
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert failures == []


# --- 12, 13, 16. what the API records and tells ---------------------------------------------


def test_audit_lines_are_ascii_and_stay_one_record(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    audit = Audit(lambda *a: None, log, "text")  # type: ignore[arg-type, return-value]
    scope = {"method": "POST", "path": "/v1/search", "state": {"query": "a\u2028b\u0085c\u2029d"}}
    audit._record(scope, 200)
    text = log.read_text()
    assert text.isascii() and len(text.splitlines()) == 1 and json.loads(text)["query"] == "a\u2028b\u0085c\u2029d"


def test_cross_site_requests_without_an_origin_are_refused(guarded: tuple[TestClient, dict[str, str], Path]) -> None:
    http, secrets, _ = guarded
    for site in ("cross-site", "same-site"):
        answer = http.get("/v1/status", headers={"Sec-Fetch-Site": site, **bearer(secrets["admin"])})
        assert answer.status_code == 403 and "Cross-site" in answer.json()["title"], site
    assert http.get("/v1/status", headers={"Sec-Fetch-Site": "same-origin", **bearer(secrets["admin"])}).is_success
    assert http.get("/v1/status", headers=bearer(secrets["admin"])).is_success  # scripts send none


def test_a_folder_limited_token_sees_no_global_facts(guarded: tuple[TestClient, dict[str, str], Path]) -> None:
    http, secrets, _ = guarded
    limited = http.get("/v1/status", headers=bearer(secrets["ra"])).json()
    assert limited["dataDir"] is None and limited["indexBytes"] is None
    assert [f["name"] for f in limited["folders"]] == ["alpha"]
    full = http.get("/v1/status", headers=bearer(secrets["admin"])).json()
    assert full["dataDir"] and full["indexBytes"] is not None
    assert "index" not in http.get("/readyz", headers=bearer(secrets["ra"])).json()
    assert "index" in http.get("/readyz", headers=bearer(secrets["admin"])).json()
    optimize = http.post("/v1/index/optimize", headers=bearer(secrets["wa"]))
    assert optimize.status_code == 403 and "every folder" in optimize.json()["detail"]
    assert http.get("/v1/calibration", headers=bearer(secrets["ra"])).status_code == 200


@pytest.mark.e2e  # starts processes
def test_proxy_headers_are_off_unless_configured(tmp_path: Path, embedder_address: str) -> None:
    """The API's own start-up (`python -m semsearch.api`): an X-Forwarded-For from loopback is not
    believed, so the audit log records who connected."""
    from tests.processes import start_api

    audit = tmp_path / "audit.log"
    service, env = start_api(tmp_path / "data", embedder_address, SEMSEARCH_TOKEN=ADMIN,
                             SEMSEARCH_AUDIT_LOG=str(audit))  # fmt: skip
    try:
        import httpx

        headers = {**bearer(ADMIN), "X-Forwarded-For": "203.0.113.9"}
        httpx.post(f"{env['SEMSEARCH_URL']}/v1/folders", json={"path": "/nonexistent"}, headers=headers, timeout=30)
        httpx.get(f"{env['SEMSEARCH_URL']}/v1/status", headers={"Authorization": "Bearer wrong"}, timeout=30)
    finally:
        service.stop()
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    assert lines and all(line["client"] == "127.0.0.1" for line in lines), lines


# --- 15. leases are judged on the store's clock ----------------------------------------------


def test_a_writer_whose_clock_runs_ahead_cannot_take_a_live_lease(tmp_path: Path) -> None:
    location = IndexLocation(str(tmp_path / "index"))
    (tmp_path / "index").mkdir()
    db = lancedb.connect(str(tmp_path / "index"))
    first = WriterLease(location, db, ttl_s=60)
    first.acquire()
    try:
        # What a holder whose clock runs 120 s behind writes (the same skew, seen from the other side):
        # a deadline that a contender's clock reads as lapsed. Renewed just now, on the store's clock.
        held = location.read_json(f"{PREFIX}{first.epoch}.json")
        assert isinstance(held, dict)
        held["deadline"] = (datetime.now(UTC) - timedelta(seconds=60)).isoformat()
        location.write_json(f"{PREFIX}{first.epoch}.json", held)
        with pytest.raises(LeaseHeld, match="store's clock"):
            WriterLease(location, lancedb.connect(str(tmp_path / "index")), ttl_s=60).acquire()
    finally:
        first.release()
    second = WriterLease(location, lancedb.connect(str(tmp_path / "index")), ttl_s=60)
    second.acquire()  # a released lease is free at once
    second.release()
