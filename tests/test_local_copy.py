"""A query replica's local copy of an index on object storage (engine/local_copy.py), against a
real store (SeaweedFS on loopback) and real LanceDB tables written to it: the copy opens as a
LanceDB directory after every sync, even while a writer commits; it ends equal to the store;
it drops what the store dropped only after its grace period; it steps aside over its bound; a
restarted copy fetches nothing it has. The replica end to end is in test_object_store.py."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import lancedb
import numpy as np
import pyarrow as pa
import pytest
from lancedb.index import FTS

from semsearch.engine.local_copy import LocalCopy, safe
from semsearch.engine.location import IndexLocation, StoredFile
from tests.object_store import ObjectStore, start_object_store

pytestmark = pytest.mark.e2e

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("text", pa.string()),
                    pa.field("vector", pa.list_(pa.float32(), 8))])  # fmt: skip


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ObjectStore]:
    started = start_object_store(tmp_path_factory.mktemp("seaweedfs"))
    yield started
    started.stop()


@pytest.fixture
def remote(store: ObjectStore, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> IndexLocation:
    """A fresh prefix, reachable as the engine reaches it: the standard variables."""
    for name, value in store.env().items():
        monkeypatch.setenv(name, value)
    return IndexLocation(f"s3://{store.bucket}/{request.node.name}", {"allow_http": "true"})


def writer_db(store: ObjectStore, location: IndexLocation) -> lancedb.DBConnection:
    return lancedb.connect(location.uri, storage_options={
        "aws_endpoint": store.endpoint, "aws_access_key_id": store.access_key,
        "aws_secret_access_key": store.secret_key, "aws_region": "us-east-1", "allow_http": "true",
    })  # fmt: skip


def rows(start: int, n: int) -> pa.Table:
    rng = np.random.default_rng(start)
    vectors = rng.standard_normal((n, 8)).astype(np.float32)
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()),
                     "text": [f"row {i} about lighthouse keeper {i % 7}" for i in range(start, start + n)],
                     "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 8)},
                    schema=SCHEMA)  # fmt: skip


def local_ids(copy: LocalCopy, table: str = "chunks") -> list[int]:
    opened = lancedb.connect(str(copy.tables_dir)).open_table(table)
    return sorted(opened.to_arrow()["id"].to_pylist())


def stored_paths(location: IndexLocation) -> set[str]:
    return {f.path for f in location.listing("", recursive=True) if ".lance/" in f.path}


def copied_paths(copy: LocalCopy) -> set[str]:
    return {p.relative_to(copy.tables_dir).as_posix() for p in copy.tables_dir.rglob("*") if p.is_file()}


def new_copy(location: IndexLocation, root: Path, max_bytes: int = 1 << 30, grace_s: float = 0.0) -> LocalCopy:
    copy = LocalCopy(location, root, max_bytes, period_s=3600, grace_s=grace_s)
    copy.prepare()  # the tests sync by hand, as the replica's loop does every half interval
    assert copy.sync() is True  # the first sync: it serves from now on
    return copy


def test_the_copy_opens_after_every_sync_while_a_writer_commits_and_ends_equal_to_the_store(
    store: ObjectStore, remote: IndexLocation, tmp_path: Path
) -> None:
    db = writer_db(store, remote)
    table = db.create_table("chunks", data=rows(0, 50), schema=SCHEMA)
    copy = new_copy(remote, tmp_path / "copy")
    done = threading.Event()

    def write() -> None:  # appends, an index built mid-way, deletes, compactions: every kind of file
        try:
            for i in range(1, 25):
                table.add(rows(i * 50, 50))
                if i == 8:
                    table.create_index("text", config=FTS())
                if i % 6 == 0:
                    table.delete(f"id < {i * 10}")
                if i % 10 == 0:
                    table.optimize()  # as the writer's housekeeping: old versions kept for a while
        finally:
            done.set()

    failures: list[BaseException] = []
    reads = 0

    def read() -> None:  # a replica's searches, at any instant of a sync: the copy always opens and reads
        nonlocal reads
        while not done.is_set():
            try:
                ids = local_ids(copy)
                assert len(set(ids)) == len(ids)
                reads += 1
            except BaseException as exc:
                failures.append(exc)
                return

    writer, reader = threading.Thread(target=write), threading.Thread(target=read)
    writer.start()
    reader.start()
    seen = 0
    while not done.is_set():  # syncs fall anywhere between the writer's commits
        copy.sync()
        assert copy.serving
        seen += 1
    writer.join()
    reader.join()
    assert not failures, failures[0]
    assert reads >= 2, "the writer finished before the copy was read while it wrote"
    copy.sync()
    assert seen >= 2, "the writer finished before the copy synced while it wrote"
    assert local_ids(copy) == sorted(table.to_arrow()["id"].to_pylist())
    local = lancedb.connect(str(copy.tables_dir)).open_table("chunks")
    query = "lighthouse keeper 3"  # many rows tie on it: their order is LanceDB's own, so the scores are compared
    found, stored = (t.search(query, query_type="fts").limit(20).to_arrow() for t in (local, table))
    assert found.num_rows == 20 and found["_score"].to_pylist() == stored["_score"].to_pylist()
    table.optimize(cleanup_older_than=timedelta(0))
    copy.sync()  # the grace period is 0 here: what the cleanup dropped is gone at the first sync
    assert copied_paths(copy) == stored_paths(remote)
    assert local_ids(copy) == sorted(table.to_arrow()["id"].to_pylist())


def test_files_the_store_dropped_stay_for_the_grace_period(
    store: ObjectStore, remote: IndexLocation, tmp_path: Path
) -> None:
    db = writer_db(store, remote)
    table = db.create_table("chunks", data=rows(0, 20), schema=SCHEMA)
    for i in range(1, 4):
        table.add(rows(i * 20, 20))
    patient = new_copy(remote, tmp_path / "patient", grace_s=3600)
    prompt = new_copy(remote, tmp_path / "prompt", grace_s=0)
    before = copied_paths(patient)
    table.optimize(cleanup_older_than=timedelta(0))
    dropped = before - stored_paths(remote)
    assert dropped, "the compaction dropped no file; nothing to test"
    for copy in (patient, prompt):
        copy.sync()  # the first sync that sees them gone
        copy.sync()
    assert dropped <= copied_paths(patient)  # a search still on an older version finds its files
    assert copied_paths(prompt) == stored_paths(remote)
    assert local_ids(patient) == local_ids(prompt) == list(range(80))


def test_over_its_bound_the_copy_steps_aside_and_then_empties(
    store: ObjectStore, remote: IndexLocation, tmp_path: Path
) -> None:
    db = writer_db(store, remote)
    table = db.create_table("chunks", data=rows(0, 200), schema=SCHEMA)
    size = sum(f.size for f in remote.listing())
    copy = new_copy(remote, tmp_path / "copy", max_bytes=size + 1024)
    assert copy.serving and copy.state().files > 0
    table.add(rows(200, 200))  # the index outgrows the bound
    assert copy.sync() is True  # what it serves changed: the store re-opens on the store
    state = copy.state()
    assert not state.serving and state.store_bytes is not None and state.store_bytes > size + 1024
    assert copy.sync() is False  # and the next sync empties it
    assert copy.state().files == 0


class Counting(IndexLocation):
    """The real location, counting the objects it reads."""

    fetched: list[str]
    listed: list[str]

    def download(self, rel: str, dest: Path) -> None:
        self.fetched.append(rel)
        super().download(rel, dest)

    def listing(self, sub: str = "", recursive: bool = True) -> list[StoredFile]:
        self.listed.append(sub)
        return super().listing(sub, recursive)


def test_a_restarted_copy_fetches_only_what_it_does_not_have(
    store: ObjectStore, remote: IndexLocation, tmp_path: Path
) -> None:
    db = writer_db(store, remote)
    table = db.create_table("chunks", data=rows(0, 30), schema=SCHEMA)
    had = copied_paths(new_copy(remote, tmp_path / "copy"))
    table.add(rows(30, 30))  # while the replica is down
    again = Counting(remote.uri, remote.storage_options)
    again.fetched, again.listed = [], []
    second = new_copy(again, tmp_path / "copy")
    assert local_ids(second) == list(range(60))
    assert again.fetched and sorted(again.fetched) == sorted(stored_paths(remote) - had)
    again.fetched, again.listed = [], []
    assert second.sync() is False  # nothing committed since: the manifests say so, nothing more is read
    assert again.fetched == [] and again.listed == ["", "chunks.lance/_versions"]
    table.add(rows(60, 10))
    assert second.sync() is True and local_ids(second) == list(range(70))


@pytest.mark.parametrize(
    ("path", "kept"),
    [("chunks.lance/data/a.lance", True), ("chunks.lance/../../etc/passwd", False), ("/etc/passwd", False),
     ("chunks.lance/_versions/..", False), ("", False)],
)  # fmt: skip
def test_an_object_whose_name_leaves_the_copy_is_refused(path: str, kept: bool) -> None:
    assert safe(path) is kept
