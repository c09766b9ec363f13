"""A switch to another embedding model (`switch_model`, `POST /v1/model/switch`, `semsearch model
switch`): the new model's vectors are built beside the old, which keep answering, then swapped in at
once. The new model is the shipped int8 MiniLM laid out as a user's folder with CLS pooling and
e5-style prompts (tests/test_model_folder.py), so its identity and its vectors differ from the
default's. What the switch leaves must be what a rebuild with that model gives; killed at any point,
the old index must stay whole and the switch resume."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import lancedb
import numpy as np
import pytest

import semsearch
from semsearch.config import Settings
from semsearch.embedder.client import EmbedderClient
from semsearch.engine.store import ModelMismatch
from semsearch.schemas import ModelSwitch
from tests.corpus import FILES, RETRY_REPO, write_tree
from tests.polling import until
from tests.test_model_folder import E5, layout

QUERIES = ["retry with backoff", "how long do we wait between attempts", "token refresh"]


def corpus(root: Path) -> Path:
    return write_tree(
        root / "my-api", {**RETRY_REPO, **{f"docs/{k}": v for k, v in FILES.items() if k.endswith(".md")}}
    )


def poll(db: semsearch.Database, deadline_s: float = 300) -> ModelSwitch:
    return until(db.model_switch, deadline_s, what="the switch's end", accept=lambda state: state.state != "building")


def ranked(db: semsearch.Database) -> list[list[tuple[str, int, float]]]:
    return [
        [(h.rel_path, h.start_line, round(h.score, 4)) for h in db.search(q, k=8, mode="vector", min_score=-1)]
        for q in QUERIES
    ]


def test_searches_never_fail_during_a_switch_and_it_ends_where_a_rebuild_would(tmp_path: Path) -> None:
    repo = corpus(tmp_path)
    model = layout(tmp_path / "e5-style", pooling="cls", prompts=E5)
    answered: list[str] = []
    failures: list[BaseException] = []
    stop = threading.Event()
    with semsearch.connect(tmp_path / "data", corpus_root=tmp_path) as db:
        db.add(repo)
        db.index()
        old, chunks = db.status().embedder.model_id, db.status().chunks

        def keep_searching() -> None:
            while not stop.is_set():
                try:
                    response = db.query("retry with backoff", k=3)
                    assert response.hits, "a search during the switch found nothing"
                    answered.append(response.model_id)
                except BaseException as exc:  # noqa: BLE001 — every failure is the finding
                    failures.append(exc)

        searcher = threading.Thread(target=keep_searching)
        searcher.start()
        try:
            started = db.switch_model(model=model, wait=False)
            assert started.state == "building" and started.from_model == old
            # An edit indexed while the switch builds: written with the old model, it must end up
            # in the new table with the new model's vector.
            (repo / "docs" / "harbour.md").write_text("# Harbour\n\nThe pilot boards ships at the outer buoy.\n")
            db.index()
            state = poll(db)
            time.sleep(0)  # let the searcher run at least once on the new pair before it stops
            deadline = time.monotonic() + 30
            while answered[-1:] != [state.to_model] and time.monotonic() < deadline:
                time.sleep(0.02)
        finally:
            stop.set()
            searcher.join()
        assert state.state == "done", state.error
        assert not failures, failures[:3]
        assert answered[0] == old and answered[-1] == state.to_model != old
        assert set(answered) == {old, state.to_model}  # never a third thing, never a mix
        status = db.status()
        assert status.embedder.model_id == state.to_model and status.chunks == chunks + 1
        assert state.embedded == state.total == status.chunks and state.truncated == 0
        assert db.search("where does the pilot board ships", k=1)[0].rel_path == "docs/harbour.md"
        switched = ranked(db)
    # The same folder indexed from scratch with the new model: the same chunks, the same scores.
    with semsearch.connect(tmp_path / "fresh", corpus_root=tmp_path, model=model) as fresh:
        fresh.add(repo)
        fresh.index()
        assert ranked(fresh) == switched
    # Reopened with the old model configured it says why it cannot answer; with the new one it
    # answers, and switches back to the shipped model as a fresh default index would be.
    with (
        semsearch.connect(tmp_path / "data", corpus_root=tmp_path) as db,
        pytest.raises(ModelMismatch, match="built with"),
    ):
        db.search("retry with backoff", k=1)
    with semsearch.connect(tmp_path / "data", corpus_root=tmp_path, model=model) as db:
        assert db.search("retry with backoff", k=1)
        back = db.switch_model(packaged=True)
        assert back.state == "done" and back.to_model == old, back.error
        returned = ranked(db)
    with semsearch.connect(tmp_path / "default", corpus_root=tmp_path) as fresh:
        fresh.add(repo)
        fresh.index()
        assert ranked(fresh) == returned


CHILD = """
import sys, semsearch
db = semsearch.connect(sys.argv[1], corpus_root=sys.argv[2])
print(db.switch_model(model=sys.argv[3]).state, flush=True)
"""


def test_a_switch_killed_at_random_points_leaves_the_old_index_whole_and_resumes(tmp_path: Path) -> None:
    repo = write_tree(
        tmp_path / "many", {f"doc{i:03d}.md": f"# Note {i}\n\n{FILES['README.md']}\n\nItem {i}.\n" for i in range(150)}
    )
    model = layout(tmp_path / "e5-style", pooling="cls", prompts=E5)
    data = tmp_path / "data"
    with semsearch.connect(data, corpus_root=tmp_path) as db:
        db.add(repo)
        db.index()
        old, chunks, before = db.status().embedder.model_id, db.status().chunks, ranked(db)
    meta = Settings(data_dir=data).index_dir / "meta.json"
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    argv = [sys.executable, "-c", CHILD, str(data), str(tmp_path), str(model)]
    kills = 0
    for _ in range(3):
        child = subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while '"switch"' not in (meta.read_text() if meta.exists() else "") and child.poll() is None:
            assert time.monotonic() < deadline, "the switch never started"
            time.sleep(0.02)
        time.sleep(rng.uniform(0, 1.5))  # a random point of the build (seed in the failure message)
        if child.poll() is None:
            child.kill()
            kills += 1
        child.wait()
        with semsearch.connect(data, corpus_root=tmp_path) as db:
            state = db.model_switch()
            if state.state == "none":  # the child finished before the kill: nothing left to check here
                break
            assert state.state == "paused" and state.to_model != old, (seed, state)
            status = db.status()
            assert (status.chunks, status.embedder.model_id) == (chunks, old), seed
            assert ranked(db) == before, f"seed {seed}: the old index changed"
    assert kills, f"seed {seed}: no kill landed"
    with semsearch.connect(data, corpus_root=tmp_path) as db:
        if db.model_switch().state == "paused":
            done = db.switch_model(model=model)
            assert done.state == "done" and done.embedded == chunks, (seed, done)
    with semsearch.connect(data, corpus_root=tmp_path, model=model) as db:
        switched = ranked(db)
        assert db.status().chunks == chunks and db.model_switch().state == "none"
    with semsearch.connect(tmp_path / "fresh", corpus_root=tmp_path, model=model) as fresh:
        fresh.add(repo)
        fresh.index()
        assert ranked(fresh) == switched, seed


@pytest.fixture
def new_embedder(tmp_path: Path) -> Iterator[str]:
    """A second real gRPC embedder in this process, serving the new model (as
    `semsearch embedder --model FOLDER --port N` would)."""
    from semsearch.embedder.model import Encoder, model_from_dir
    from semsearch.embedder.server import EmbedderService, build_server
    from tests.processes import free_port

    encoder = Encoder(model_from_dir(layout(tmp_path / "e5-style", pooling="cls", prompts=E5)))
    address = f"127.0.0.1:{free_port()}"
    server = build_server(EmbedderService(encoder, 0.0), address)
    server.start()
    yield address
    server.stop(grace=1).wait()


def test_the_cli_switches_a_running_api_and_its_indexers_writes_still_land(
    api_factory, new_embedder: str, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    stack = api_factory()
    repo = corpus(tmp_path)
    stack.cli("add", str(repo))
    stack.index()
    assert "none: no model switch" in stack.cli("model", "status").stdout
    bad = stack.cli("model", "switch", "not an address!", check=False)
    assert bad.returncode == 2 and "not an address: give host:port" in bad.stderr
    dead = stack.cli("model", "switch", "127.0.0.1:9", check=False)
    assert dead.returncode == 2 and "no embedder answered at 127.0.0.1:9" in dead.stderr

    out = stack.cli("model", "switch", new_embedder).stdout
    assert (
        out.startswith("done: all-MiniLM")
        and "-> e5-style@" in out
        and f"SEMSEARCH_EMBEDDER_ADDR at {new_embedder}" in out
    )
    with stack.http() as http:
        status = http.get("/v1/status").json()
        assert status["embedder"]["address"] == new_embedder and status["modelSwitch"]["state"] == "done"
        assert http.post("/v1/search", json={"query": "retry with backoff"}).json()["modelId"].startswith("e5-style@")
        # The worker still embeds with the old model: the API embeds what it sends with the new one.
        (repo / "docs" / "harbour.md").write_text("# Harbour\n\nThe pilot boards ships at the outer buoy.\n")
        (repo / "src" / "tides.py").write_text("def tide_table_for(port):\n    return port\n")
        stack.index()
        hits = http.post("/v1/search", json={"query": "where does the pilot board ships", "k": 1}).json()["hits"]
        assert hits[0]["filePath"].endswith("docs/harbour.md")
        assert "indexers still embed with all-MiniLM" in http.get("/v1/status").json()["notice"]
        refused = http.post("/v1/model/switch", json={"embedder": new_embedder})
        assert refused.status_code == 409 and "already uses e5-style@" in refused.json()["detail"]
    assert "switch    done:" in stack.cli("status").stdout
    # Its definitions too: their vectors in the search list are the new model's, not the worker's.
    meta = json.loads((stack.data_dir / "index" / "meta.json").read_text())
    table = lancedb.connect(str(stack.data_dir / "index")).open_table(meta["chunks_table"])
    (row,) = table.search().where("path = 'src/tides.py'").select(["names", "search_vectors"]).to_arrow().to_pylist()
    expected = EmbedderClient(new_embedder).embed(row["names"])
    assert np.allclose(np.asarray(row["search_vectors"][1:], dtype=np.float32), expected, atol=1e-4)
