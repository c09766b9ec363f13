"""The index on S3-compatible object storage (SeaweedFS, a real store on loopback): the store is
checked first for the conditional PUT LanceDB's commits rely on; then an API whose index lives in
a bucket indexes, searches, and answers the same after a restart with nothing of the index on
local disk; a store that cannot be used is one line at start that names what failed."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import botocore.session
import httpx
import pytest
from botocore.exceptions import ClientError

from semsearch.processes import Service, api_env
from tests.conftest import SEMSEARCH, free_port
from tests.object_store import ObjectStore, start_object_store
from tests.test_reliability import index, write_corpus

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


def start(data: Path, store: ObjectStore, uri: str, embedder_addr: str, port: int) -> tuple[Service, dict[str, str]]:
    env = api_env(data, port, embedder_addr, SEMSEARCH_INDEX_URI=uri, **store.env())
    api = Service("semsearch.api", env, data / f"api-{port}.log").start()
    api.wait_http(f"http://127.0.0.1:{port}/readyz")
    return api, env


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
