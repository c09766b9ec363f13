"""The index on S3-compatible object storage (SeaweedFS, a real store on loopback): the store is
checked first for the conditional PUT LanceDB's commits rely on; then an API whose index lives in
a bucket indexes, searches, and answers the same after a restart with nothing of the index on
local disk; a writer and two query replicas share one bucket; a store that cannot be used is one
line at start that names what failed."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import botocore.session
import httpx
import pytest
from botocore.exceptions import ClientError
from playwright.sync_api import expect, sync_playwright

from tests.conftest import SEMSEARCH, free_port
from tests.object_store import ObjectStore, start_object_store
from tests.oneshot import INDEXER, index, manifest, write_corpus
from tests.processes import Service, api_env, on_a_free_port, start_api, start_embedder
from tests.test_web_ui import CHROMIUM, FLAGS

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ObjectStore]:
    started = start_object_store(tmp_path_factory.mktemp("seaweedfs"))
    yield started
    started.stop()


def s3(store: ObjectStore) -> object:
    return botocore.session.get_session().create_client(
        "s3", endpoint_url=store.endpoint, aws_access_key_id=store.access_key,
        aws_secret_access_key=store.secret_key, region_name="us-east-1",
    )  # fmt: skip


def test_the_store_lets_exactly_one_of_16_conditional_puts_win(store: ObjectStore) -> None:
    """LanceDB commits a version by creating its manifest only if absent (`If-None-Match: *`);
    a store that ignores the condition lets two writers both commit. Checked before relying on it."""
    client = s3(store)

    def put(i: int) -> str:
        try:
            client.put_object(Bucket=store.bucket, Key="probe/manifest", Body=f"writer {i}".encode(), IfNoneMatch="*")  # type: ignore[attr-defined]
            return "won"
        except ClientError as exc:
            return str(exc.response["Error"]["Code"])

    with ThreadPoolExecutor(16) as pool:
        outcomes = list(pool.map(put, range(16)))
    assert outcomes.count("won") == 1, outcomes
    assert set(outcomes) - {"won"} <= {"PreconditionFailed", "ConditionalRequestConflict"}, outcomes


def start(
    data: Path, store: ObjectStore, uri: str, embedder_addr: str, port: int, **extra: str
) -> tuple[Service, dict[str, str]]:
    """An API over the store on `port` (another, if something else took that one first)."""

    def on(chosen: int) -> tuple[Service, dict[str, str]]:
        env = api_env(data, chosen, embedder_addr, SEMSEARCH_INDEX_URI=uri, **store.env(), **extra)
        api = Service("semsearch.api", env, data / f"api-{chosen}.log").start()
        token = extra.get("SEMSEARCH_TOKEN")
        api.wait_http(f"http://127.0.0.1:{chosen}/readyz", {"Authorization": f"Bearer {token}"} if token else None)
        return api, env

    return on_a_free_port(on, port)


def test_an_index_in_a_bucket_searches_alike_after_a_restart_with_nothing_on_local_disk(
    store: ObjectStore, embedder_addr: str, tmp_path: Path
) -> None:
    corpus = write_corpus(tmp_path / "corpus", files=6)
    uri = f"s3://{store.bucket}/team-index"
    data, port = tmp_path / "data", free_port()
    api, env = start(data, store, uri, embedder_addr, port)
    try:
        subprocess.run([SEMSEARCH, "add", str(corpus)], env=env, check=True, capture_output=True)
        index(env)
        query = {"query": "subject 33", "k": 3, "minScore": -1}
        before = httpx.post(f"{env['SEMSEARCH_URL']}/v1/search", json=query, timeout=60).json()["hits"]
        assert before and before[0]["relPath"] == "part03.md"
        status = json.loads(subprocess.run([SEMSEARCH, "status", "--json"], env=env, capture_output=True,
                                           text=True, check=False).stdout)  # fmt: skip
        assert status["indexBytes"] > 0 and status["files"] == 6
    finally:
        api.stop()
    assert not (data / "index").exists() or not any((data / "index").iterdir())  # the index is in the bucket
    listed = s3(store).list_objects_v2(Bucket=store.bucket, Prefix="team-index/")  # type: ignore[attr-defined]
    names = {o["Key"] for o in listed.get("Contents", [])}
    assert "team-index/meta.json" in names and any(n.startswith("team-index/chunks.lance/") for n in names)
    api, env = start(data, store, uri, embedder_addr, port)  # a new process on the same store
    try:
        after = httpx.post(f"{env['SEMSEARCH_URL']}/v1/search", json=query, timeout=60).json()["hits"]
        assert [(h["relPath"], h["startLine"], round(h["cosine"], 5)) for h in after] == [
            (h["relPath"], h["startLine"], round(h["cosine"], 5)) for h in before
        ]
        assert index(env).returncode == 0  # and an incremental run finds nothing to do
    finally:
        api.stop()


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("no store at the endpoint", "nothing answers at the endpoint"),
        ("wrong secret key", "secret key is wrong"),
        ("no such bucket", "bucket does not exist"),
    ],
)
def test_a_store_that_cannot_be_used_is_one_line_at_start(
    case: str, expected: str, store: ObjectStore, embedder_addr: str, tmp_path: Path
) -> None:
    env = api_env(tmp_path / "data", free_port(), embedder_addr, **store.env())
    env["SEMSEARCH_INDEX_URI"] = f"s3://{store.bucket}/index"
    if case == "no store at the endpoint":
        env["AWS_ENDPOINT_URL"] = f"http://127.0.0.1:{free_port()}"
    elif case == "wrong secret key":
        env["AWS_SECRET_ACCESS_KEY"] = "not-the-secret-9d8e7f"
    else:
        env["SEMSEARCH_INDEX_URI"] = "s3://no-such-bucket-here/index"
    started = subprocess.run([sys.executable, "-m", "semsearch.api"], env=env, capture_output=True, text=True,
                             timeout=120, check=False)  # fmt: skip
    lines = started.stderr.strip().splitlines()
    assert started.returncode != 0 and len(lines) == 1, started.stderr[-2000:]
    assert lines[0].startswith("semsearch api: the index at s3://") and expected in lines[0], lines[0]
    assert env["AWS_SECRET_ACCESS_KEY"] not in started.stderr


CLUSTER_FILES = 24


def test_a_writer_and_two_query_replicas_share_one_bucket_and_a_pool_of_two_embedders(
    store: ObjectStore, tmp_path: Path
) -> None:
    """The one-machine cluster: SeaweedFS, two embedders, one writer, two query replicas, a worker."""
    embedders = [start_embedder(tmp_path / f"embedder-{i}.log") for i in range(2)]
    pool = ",".join(address for _, address in embedders)
    uri = f"s3://{store.bucket}/shared-index"
    writer, wenv = start(tmp_path / "writer", store, uri, pool, free_port(), SEMSEARCH_ROLE="writer",
                         SEMSEARCH_EMBEDDER_RETRY_S="60")  # fmt: skip
    replicas = [
        start(
            tmp_path / f"query-{i}",
            store,
            uri,
            pool,
            free_port(),
            SEMSEARCH_ROLE="query",
            SEMSEARCH_READ_CONSISTENCY_S="1",
            SEMSEARCH_WRITER_URL=wenv["SEMSEARCH_URL"],
            # One reads the store directly, one answers from its copy on local disk: every answer
            # below is asked of both and must be the same.
            SEMSEARCH_LOCAL_COPY_MB=str(0 if i == 0 else 512),
        )  # fmt: skip
        for i in range(2)
    ]
    urls = [env["SEMSEARCH_URL"] for _, env in replicas]

    def poll(check: Any, what: str, timeout: float = 60) -> float:
        """Seconds until `check()` holds on every replica (polled, never a guessed sleep)."""
        began = time.monotonic()
        while not all(check(url) for url in urls):
            assert time.monotonic() - began < timeout, f"replicas never {what}"
            time.sleep(0.1)
        return time.monotonic() - began

    def follow(url: str, run_id: str, wait: float = 5) -> dict[str, Any]:
        """The run as an API sees it (not there yet: a state of its own, so `poll` asks again)."""
        answer = httpx.get(f"{url}/v1/runs/{run_id}", params={"wait": wait}, timeout=30)
        return answer.json() if answer.status_code == 200 else {"state": f"HTTP {answer.status_code}"}

    def hits(url: str, query: str) -> list[tuple[str, int, float]]:
        found = httpx.post(f"{url}/v1/search", json={"query": query, "k": 3, "minScore": -1}, timeout=60).json()
        return [(h["relPath"], h["startLine"], round(h["cosine"], 5)) for h in found["hits"]]

    try:
        corpus = write_corpus(tmp_path / "corpus", files=CLUSTER_FILES)
        subprocess.run([SEMSEARCH, "add", str(corpus)], env=wenv, check=True, capture_output=True)
        poll(lambda url: [f["name"] for f in httpx.get(f"{url}/v1/folders", timeout=30).json()] == ["corpus"],
             "listed the folder added through the writer")  # fmt: skip
        index(wenv)
        poll(lambda url: bool(hits(url, "subject 77")), "saw the indexed chunks")
        # Each replica follows the writer's commits on its own clock (one reads the store, one its
        # copy), so they may be a version apart for a moment; at the run's last version they agree.
        began = time.monotonic()
        while (first := hits(urls[0], "subject 77")) != hits(urls[1], "subject 77"):
            assert time.monotonic() - began < 60, "the replicas never gave the same answer"
            time.sleep(0.1)
        assert first[0][0] == "part07.md"

        undisturbed = manifest(wenv, "corpus")

        # The run queue is shared too: a forced run asked of the writer and executed by a worker is
        # followed to its end on either replica, with the summary the writer holds — and one of the
        # two embedders is killed in the middle of it.
        worker = Service("semsearch.indexer", wenv | {"SEMSEARCH_WRITE_BATCH_FILES": "1"},
                         tmp_path / "worker.log").start("--worker")  # fmt: skip
        try:
            requested = httpx.post(f"{wenv['SEMSEARCH_URL']}/v1/runs", json={"folder": "corpus", "force": True},
                                   timeout=30)  # fmt: skip
            run_id = requested.json()["id"]
            deadline = time.monotonic() + 120
            while (seen := follow(wenv["SEMSEARCH_URL"], run_id, wait=0))["progress"]["filesDone"] < 5:
                assert seen["state"] in ("queued", "running") and time.monotonic() < deadline, seen
                time.sleep(0.05)
            killed = embedders[0][0]
            assert killed.proc is not None
            killed.proc.send_signal(signal.SIGKILL)  # fault injector: one embedder dies mid-run
            killed.proc.wait()
            poll(lambda url: follow(url, run_id)["state"] == "done", "followed the run to its end", timeout=180)
        finally:
            worker.stop()
        done = httpx.get(f"{wenv['SEMSEARCH_URL']}/v1/runs/{run_id}", timeout=30).json()
        assert done["state"] == "done" and done["summary"]["filesProcessed"] == CLUSTER_FILES, done
        assert manifest(wenv, "corpus") == undisturbed  # the run that lost an embedder built the same index
        for url in urls:
            assert follow(url, run_id)["summary"] == done["summary"]
            assert [r["id"] for r in httpx.get(f"{url}/v1/runs", timeout=30).json()] == [run_id]

        (corpus / "part01.md").write_text("# Part 1\nThe lighthouse keeper winds the clockwork at dusk.\n")
        index(wenv)
        lag = poll(lambda url: hits(url, "who winds the lighthouse clockwork")[0][0] == "part01.md", "saw the edit")
        print(f"replica lag after the writer's run: {lag:.2f} s (consistency interval 1 s)")

        # Housekeeping on the writer (compaction, cleanup of old versions) while replicas answer.
        with ThreadPoolExecutor(2) as searches:
            asked = [searches.submit(hits, url, f"subject {i * 11}") for i in range(10) for url in urls]
            for _ in range(3):
                optimized = httpx.post(f"{wenv['SEMSEARCH_URL']}/v1/index/optimize", timeout=120)
                assert optimized.status_code == 200, optimized.text
            assert all(answer.result() for answer in asked)

        refused = httpx.post(f"{urls[0]}/v1/folders", json={"path": str(corpus)}, timeout=30)
        assert refused.status_code == 421 and wenv["SEMSEARCH_URL"] in refused.json()["detail"]
        ran = subprocess.run([SEMSEARCH, "index"], env=replicas[0][1], capture_output=True, text=True, timeout=120)
        assert ran.returncode == 2 and "query replica" in ran.stderr
        status = httpx.get(f"{urls[1]}/v1/status", timeout=30).json()
        assert status["role"] == "query" and status["files"] == CLUSTER_FILES
        copy = status["localCopy"]
        assert copy["answering"] and copy["files"] > 0 and copy["error"] is None, copy
        assert httpx.get(f"{urls[0]}/v1/status", timeout=30).json()["localCopy"] is None
        shown = subprocess.run([SEMSEARCH, "status"], env=replicas[1][1], capture_output=True, text=True, timeout=60)
        assert re.search(r"^copy +[\d,]+ files, [\d.]+ MB on local disk, answering; synced", shown.stdout, re.M), (
            shown.stdout
        )
        with sync_playwright() as playwright:  # and the web UI's status page, in Chromium
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
            try:
                page = chromium.new_page()
                page.goto(f"{urls[1]}/#status")
                facts = re.compile(r"Local copy\s*[\d,]+ files, [\d.]+ [KMG]?B on local disk, answering; synced")
                expect(page.locator("#facts")).to_contain_text(facts)
            finally:
                chromium.close()
    finally:
        for service in [writer, *(r for r, _ in replicas), *(e for e, _ in embedders)]:
            service.stop()


def test_a_token_created_through_the_writer_is_accepted_and_revoked_on_a_query_replica(
    store: ObjectStore, embedder_addr: str, tmp_path: Path
) -> None:
    """Scoped tokens live beside the index in the bucket: no pod's local disk holds them, so a
    token made through the writer works on every replica, and a revoked one stops working there."""
    admin = "operator-" + "7" * 24
    uri = f"s3://{store.bucket}/token-index"
    writer, wenv = start(tmp_path / "writer", store, uri, embedder_addr, free_port(), SEMSEARCH_ROLE="writer",
                         SEMSEARCH_TOKEN=admin)  # fmt: skip
    replica, renv = start(tmp_path / "query", store, uri, embedder_addr, free_port(), SEMSEARCH_ROLE="query",
                          SEMSEARCH_TOKEN=admin, SEMSEARCH_READ_CONSISTENCY_S="1",
                          SEMSEARCH_WRITER_URL=wenv["SEMSEARCH_URL"])  # fmt: skip
    try:
        made = subprocess.run([SEMSEARCH, "token", "create", "reader", "--scope", "read"], env=wenv,
                              capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
        secret = made.stdout.strip().splitlines()[-1]
        assert admin not in made.stdout + made.stderr

        def status_with(token: str) -> int:
            return httpx.get(f"{renv['SEMSEARCH_URL']}/v1/folders", headers={"Authorization": f"Bearer {token}"},
                             timeout=30).status_code  # fmt: skip

        deadline = time.monotonic() + 30
        while status_with(secret) != 200:
            assert time.monotonic() < deadline, "the replica never accepted the writer's new token"
            time.sleep(0.1)
        assert not (tmp_path / "writer" / "tokens.json").exists()  # beside the index, not on the pod's disk
        listed = s3(store).list_objects_v2(Bucket=store.bucket, Prefix="token-index/tokens.json")  # type: ignore[attr-defined]
        assert listed.get("KeyCount") == 1
        # An admin request to the replica is sent to the writer, which alone writes the tokens.
        refused = httpx.post(f"{renv['SEMSEARCH_URL']}/v1/tokens", json={"name": "x", "scope": "read"},
                             headers={"Authorization": f"Bearer {admin}"}, timeout=30)  # fmt: skip
        assert refused.status_code == 421 and wenv["SEMSEARCH_URL"] in refused.json()["detail"]

        subprocess.run([SEMSEARCH, "token", "revoke", "reader"], env=wenv, capture_output=True, check=True, timeout=60)
        deadline = time.monotonic() + 30
        while status_with(secret) != 401:
            assert time.monotonic() < deadline, "the replica still accepts a revoked token"
            time.sleep(0.1)
        assert status_with(admin) == 200
    finally:
        writer.stop()
        replica.stop()


def test_one_writer_at_a_time_and_a_dead_writers_lease_lapses(
    store: ObjectStore, embedder_addr: str, tmp_path: Path
) -> None:
    uri = f"s3://{store.bucket}/lease-index"
    lease = {"SEMSEARCH_ROLE": "writer", "SEMSEARCH_WRITER_LEASE_S": "3"}
    corpus = write_corpus(tmp_path / "corpus", files=16)
    first, env = start(tmp_path / "first", store, uri, embedder_addr, free_port(), **lease)
    fresh: Service | None = None
    try:
        contender = api_env(tmp_path / "second", free_port(), embedder_addr, SEMSEARCH_INDEX_URI=uri, **store.env())
        second = subprocess.run(
            [sys.executable, "-m", "semsearch.api"], env=contender | lease, capture_output=True, text=True,
            timeout=120, check=False,
        )  # fmt: skip
        lines = second.stderr.strip().splitlines()
        assert second.returncode != 0 and len(lines) == 1, second.stderr[-2000:]
        assert "another writer holds the index" in lines[0] and f"pid {first.pid}" in lines[0] and "until" in lines[0]

        subprocess.run([SEMSEARCH, "add", str(corpus)], env=env, check=True, capture_output=True)
        run = subprocess.Popen(
            INDEXER, env=env | {"SEMSEARCH_WRITE_BATCH_FILES": "1"}, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while len(httpx.get(f"{env['SEMSEARCH_URL']}/v1/folders/corpus/manifest", timeout=30).json()["files"]) < 5:
            assert time.monotonic() < deadline and run.poll() is None
            time.sleep(0.05)
        # A run asked for while no worker is there: the writer that takes over carries it on.
        queued = httpx.post(f"{env['SEMSEARCH_URL']}/v1/runs", json={"folder": "corpus"}, timeout=30).json()
        assert first.proc is not None
        first.proc.send_signal(signal.SIGKILL)  # fault injector: the writer dies mid-write
        first.proc.wait()
        run.wait(timeout=120)

        died = time.monotonic()
        while fresh is None:  # refused while the dead writer's lease lasts, then it takes over
            try:
                fresh, env = start(tmp_path / "third", store, uri, embedder_addr, free_port(), **lease)
            except RuntimeError:
                assert time.monotonic() - died < 60, "the lease never lapsed"
        print(f"takeover {time.monotonic() - died:.1f} s after the writer died (lease 3 s)")
        carried = httpx.get(f"{env['SEMSEARCH_URL']}/v1/runs/{queued['id']}", timeout=30).json()
        assert carried.get("state") == "queued" and carried["request"] == queued["request"], carried
        worker = Service("semsearch.indexer", env, tmp_path / "worker.log").start("--worker")
        try:  # the queued run, executed for the new writer, converges: the index an undisturbed run builds
            ran = httpx.get(f"{env['SEMSEARCH_URL']}/v1/runs/{queued['id']}", params={"wait": 60}, timeout=90).json()
        finally:
            worker.stop()
        assert ran["state"] == "done", ran
        reference, reference_env = start_api(tmp_path / "reference", embedder_addr)
        try:
            subprocess.run([SEMSEARCH, "add", str(corpus)], env=reference_env, check=True, capture_output=True)
            index(reference_env)
            assert manifest(env, "corpus") == manifest(reference_env, "corpus")
        finally:
            reference.stop()
    finally:
        for service in (first, fresh):
            if service is not None:
                service.stop()


def test_a_writer_that_cannot_renew_its_lease_stops_writing_until_it_renews(
    store: ObjectStore, embedder_addr: str, tmp_path: Path
) -> None:
    """Past its lease without renewing, a writer cannot know that no other writer took over: it
    refuses writes by its own clock (a write that needs no store shows it while the store is
    frozen), and writes again once it has renewed."""
    uri = f"s3://{store.bucket}/fenced-index"
    writer, env = start(tmp_path / "writer", store, uri, embedder_addr, free_port(), SEMSEARCH_ROLE="writer",
                        SEMSEARCH_WRITER_LEASE_S="3")  # fmt: skip
    url = f"{env['SEMSEARCH_URL']}/v1/runs/no-such-run"  # a write route answered from memory

    def until(status: int, what: str) -> httpx.Response:
        deadline = time.monotonic() + 60
        while (answer := httpx.delete(url, timeout=30)).status_code != status:
            assert time.monotonic() < deadline, f"never {what}: {answer.status_code} {answer.text}"
            time.sleep(0.1)
        return answer

    try:
        assert httpx.delete(url, timeout=30).status_code == 404
        store.process.send_signal(signal.SIGSTOP)  # fault injector: the store stops answering
        try:
            refused = until(503, "refused writes after the lease ran out")
            assert "could not renew its lease" in refused.json()["detail"], refused.text
            search = httpx.get(f"{env['SEMSEARCH_URL']}/v1/folders", timeout=30)
            assert search.status_code == 200  # reads go on
        finally:
            store.process.send_signal(signal.SIGCONT)
        until(404, "wrote again after renewing")
    finally:
        writer.stop()
