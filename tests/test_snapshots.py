"""Snapshots through the real services: an index exported on one stack, imported on another
under a different root, searched alike; an incremental run afterwards embeds only what changed;
damaged, foreign or mismatched archives are refused and change nothing; a killed import leaves
the old index or the new one."""

from __future__ import annotations

import hashlib
import io
import json
import random
import shutil
import signal
import subprocess
import tarfile
import time
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest

from tests.conftest import SEMSEARCH, Stack, free_port
from tests.corpus import write_tree
from tests.processes import Service, api_env

DOCS = {
    "lighthouse.md": "# Lighthouse\n\nThe keeper trims the wick at dusk and winds the clockwork every four hours.\n",
    "tides.md": "# Tides\n\nSpring tides come twice a month, with the new and the full moon.\n",
    "guide/pilots.md": "# Pilots\n\nA pilot boards incoming ships at the outer buoy and guides them to the berth.\n",
    "src/berth.py": "def assign_berth(ship):\n    # long enough for the ship\n    return ship.length < 200\n",
    "notes/private.md": "# Private\n\nThe harbour master's rota for the winter months.\n",
}
QUERY = "who guides ships into the harbour"


def search(stack: Stack, query: str = QUERY, **body: Any) -> list[tuple[str, int, int, float]]:
    """Hits with their cosine: the same vectors give the same cosine to the last digit, where the
    fused score also depends on the rest of the index (BM25's statistics)."""
    with stack.http() as http:
        response = http.post("/v1/search", json={"query": query, "k": 10, "minScore": -1, **body})
    assert response.status_code == 200, response.text
    hits = response.json()["hits"]
    return [(h["relPath"], h["startLine"], h["endLine"], round(h["cosine"], 5)) for h in hits]


def status(stack: Stack) -> dict[str, Any]:
    with stack.http() as http:
        return http.get("/v1/status").json()  # type: ignore[no-any-return]


def copy_tree(source: Path, dest: Path) -> Path:
    """A copy as `git clone` or `cp` would make it: the same bytes, new mtimes."""
    shutil.copytree(source, dest, copy_function=shutil.copyfile)
    return dest


@pytest.fixture(scope="module")
def exported(api_factory: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Stack, Path, Path]:
    """A stack that indexed `harbour/`, and its snapshot exported with the CLI."""
    stack = api_factory()
    root = write_tree(tmp_path_factory.mktemp("origin") / "harbour", DOCS)
    stack.cli("add", str(root))
    stack.index()
    archive = tmp_path_factory.mktemp("snapshots") / "harbour.tar"
    stack.cli("snapshot", "export", str(archive))
    return stack, root, archive


def test_round_trip_to_another_root_searches_alike_and_reembeds_only_the_edited_file(
    exported: tuple[Stack, Path, Path], api_factory: Any, tmp_path: Path
) -> None:
    origin, root, archive = exported
    moved = copy_tree(root, tmp_path / "elsewhere" / "harbour")
    stack = api_factory()
    other = write_tree(tmp_path / "logbook", {"log.md": "# Log\n\nFog at noon; the foghorn sounded for an hour.\n"})
    stack.cli("add", str(other))
    stack.index()

    out = stack.cli("snapshot", "import", str(archive), "--root", str(moved.parent)).stdout
    assert f"harbour              {moved}" in out and "kept: logbook" in out and "semsearch index" in out

    harbour: dict[str, Any] = {"folder": ["harbour"]}
    assert search(stack, **harbour) == search(origin, **harbour) != []  # the same hits, lines and cosines
    st = status(stack)
    shown = json.loads(stack.cli("snapshot", "show", str(archive), "--json").stdout)
    assert st["snapshot"]["digest"] == shown["digest"] and st["snapshot"]["folders"] == ["harbour"]
    assert {f["name"]: f["path"] for f in st["folders"]} == {"logbook": str(other), "harbour": str(moved)}
    assert search(stack, "the foghorn sounded in fog")[0][0] == "log.md"  # the folder kept works as before
    assert "snapshot  harbour imported " in stack.cli("status").stdout

    # An agent reads the imported hits at their new place.
    found, read = stack.mcp(
        ("search", {"query": QUERY, "k": 3}), ("cat_file", {"filePath": str(moved / "guide/pilots.md")})
    )
    assert not found.is_error and str(moved / "guide/pilots.md") in found.content[0].text
    assert not read.is_error and "outer buoy" in read.content[0].text

    # Every copied file has a new mtime, one has new content: only that one is embedded again.
    (moved / "tides.md").write_text("# Tides\n\nNeap tides fall between the spring tides, at the half moons.\n")
    summary = stack.index()
    assert summary["filesProcessed"] == 1, summary
    assert search(stack, "neap tides at the half moon")[0][0] == "tides.md"


def test_export_leaves_out_files_the_rules_now_exclude(api_factory: Any, tmp_path: Path) -> None:
    stack = api_factory()
    root = write_tree(tmp_path / "harbour", DOCS)
    stack.cli("add", str(root))
    stack.index()
    (root / ".indexignore").write_text("notes/\n")  # after indexing: the index still holds it
    archive = tmp_path / "harbour.tar"
    out = stack.cli("snapshot", "export", str(archive), "--folder", "harbour").stdout
    assert "left out, as the indexer's rules now exclude them: 1 indexignore" in out
    with tarfile.open(archive) as tar:
        manifest = json.loads(tar.extractfile("snapshot.json").read())  # type: ignore[union-attr]
        names = [m.name for m in tar.getmembers()]
        paths = set()
        for member in ("chunks.arrow", "files.arrow", "symbols.arrow"):
            data = tar.extractfile(member).read()  # type: ignore[union-attr]
            paths |= set(pa.ipc.open_stream(io.BytesIO(data)).read_all()["path"].to_pylist())
    assert names == ["snapshot.json", "chunks.arrow", "symbols.arrow", "files.arrow"]
    assert manifest["excluded"] == {"indexignore": 1} and manifest["files"] == len(DOCS) - 1
    assert "notes/private.md" not in paths and "guide/pilots.md" in paths


def damaged(archive: Path, tmp_path: Path) -> dict[str, Path]:
    data = archive.read_bytes()
    with tarfile.open(archive) as tar:
        body = json.loads(tar.extractfile("snapshot.json").read())  # type: ignore[union-attr]
        chunks = tar.getmember("chunks.arrow")
    flipped = bytearray(data)
    flipped[chunks.offset_data + chunks.size // 2] ^= 0xFF  # one byte in the middle of the chunks
    body["chunks"] += 1  # edited by hand, digest left as it was
    forged = tmp_path / "forged.tar"
    with tarfile.open(archive) as source, tarfile.open(forged, "w") as tar:
        for member in source.getmembers():
            content = source.extractfile(member).read()  # type: ignore[union-attr]
            if member.name == "snapshot.json":
                content = json.dumps(body).encode()
                member.size = len(content)
            tar.addfile(member, io.BytesIO(content))
    cases = {"truncated": data[: len(data) // 2], "flipped": bytes(flipped), "not-a-tar": b"PK\x03\x04" + data[:500]}
    out = {}
    for name, content in cases.items():
        out[name] = tmp_path / f"{name}.tar"
        out[name].write_bytes(content)
    out["forged"] = forged
    return out


def test_damaged_archives_are_refused_and_change_nothing(
    exported: tuple[Stack, Path, Path], api_factory: Any, tmp_path: Path
) -> None:
    _, root, archive = exported
    stack = api_factory()
    other = write_tree(tmp_path / "logbook", {"log.md": "# Log\n\nFog at noon; the foghorn sounded for an hour.\n"})
    stack.cli("add", str(other))
    stack.index()
    before = (status(stack)["folders"], search(stack))
    for name, bad in damaged(archive, tmp_path).items():
        with stack.http() as http:
            response = http.put("/v1/snapshot", content=bad.read_bytes(), params={"root": str(root.parent)})
        assert response.status_code == 400, (name, response.text)
        assert response.json()["title"] == "Snapshot refused" and "nothing was changed" in response.json()["detail"]
        cli = stack.cli("snapshot", "import", str(bad), check=False)
        assert cli.returncode == 2 and "nothing was changed" in cli.stderr, (name, cli.stderr)
        assert (status(stack)["folders"], search(stack)) == before, name
    assert sorted(p.name for p in stack.data_dir.iterdir() if p.name.startswith("snapshot-")) == []


def test_an_archive_from_another_model_or_chunker_is_refused_with_the_way_out(
    exported: tuple[Stack, Path, Path], api_factory: Any, tmp_path: Path
) -> None:
    _, root, archive = exported
    paragraph = api_factory(SEMSEARCH_CODE_CHUNKER="paragraph")
    refused = paragraph.cli("snapshot", "import", str(archive), check=False)
    assert refused.returncode == 2 and "409" in refused.stderr and "SEMSEARCH_CODE_CHUNKER" in refused.stderr

    # The digest proves integrity, not origin: a manifest rewritten with its digest recomputed
    # reaches the identity check, which compares it with the model the embedder serves.
    with tarfile.open(archive) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]
    body = json.loads(members["snapshot.json"])
    body.pop("digest")
    body["modelId"] = "intfloat/e5-small-v2"
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    body["digest"] = "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
    members["snapshot.json"] = json.dumps(body).encode()
    other = tmp_path / "other-model.tar"
    with tarfile.open(other, "w") as tar:
        for name, content in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    stack = api_factory()
    with stack.http() as http:
        response = http.put("/v1/snapshot", content=other.read_bytes(), params={"root": str(root.parent)})
    assert response.status_code == 409, response.text
    assert "intfloat/e5-small-v2" in response.json()["detail"] and "semsearch index" in response.json()["detail"]
    assert status(stack)["folders"] == []


def test_snapshot_endpoints_need_the_token(exported: tuple[Stack, Path, Path], api_factory: Any) -> None:
    _, _, archive = exported
    stack = api_factory(token="harbour-secret")
    with httpx.Client(base_url=stack.url, timeout=60) as http:
        assert http.get("/v1/snapshot").status_code == 401
        assert http.put("/v1/snapshot", content=archive.read_bytes()).status_code == 401
    assert status(stack)["folders"] == []


@pytest.mark.e2e  # starts processes
def test_an_import_killed_at_random_points_leaves_the_old_index_or_the_new(
    api_factory: Any, embedder_addr: str, tmp_path: Path
) -> None:
    origin = api_factory()
    root = write_tree(tmp_path / "v1" / "harbour", DOCS)
    origin.cli("add", str(root))
    origin.index()
    first = tmp_path / "first.tar"
    origin.cli("snapshot", "export", str(first))
    (root / "tides.md").write_text("# Tides\n\nNeap tides fall between the spring tides, at the half moons.\n")
    origin.index()
    second = tmp_path / "second.tar"
    origin.cli("snapshot", "export", str(second))
    roots = {first: copy_tree(root.parent, tmp_path / "here-1"), second: copy_tree(root.parent, tmp_path / "here-2")}
    digests = {json.loads(origin.cli("snapshot", "show", str(a), "--json").stdout)["digest"]: a for a in roots}

    data = tmp_path / "data"
    port = free_port()
    env = api_env(data, port, embedder_addr)
    api = Service("semsearch.api", env, data / "api.log").start()
    api.wait_http(f"http://127.0.0.1:{port}/readyz")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([SEMSEARCH, *args], env=env, capture_output=True, text=True, timeout=300, check=False)

    def current() -> Path:
        """Which snapshot the index holds, checked three ways that must agree."""
        st = json.loads(cli("status", "--json").stdout)
        held = digests[st["snapshot"]["digest"]]
        assert [f["path"] for f in st["folders"]] == [str(roots[held] / "harbour")]
        tides = search_env(env, "neap tides at the half moon")["tides.md"]
        assert ("Neap tides" in tides) == (held == second)
        return held

    try:
        started = time.monotonic()
        assert cli("snapshot", "import", str(first), "--root", str(roots[first])).returncode == 0
        took = time.monotonic() - started
        held = current()
        rng = random.Random(18)
        outcomes = []
        for _ in range(3):
            target = second if held == first else first
            run = subprocess.Popen(
                [SEMSEARCH, "snapshot", "import", str(target), "--root", str(roots[target])],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            time.sleep(rng.uniform(0.2, 1.1) * took)  # a random point in the import, not a wait
            assert api.proc is not None
            api.proc.send_signal(signal.SIGKILL)  # fault injector: the API dies mid-import
            api.proc.wait()
            run.wait(timeout=60)
            api = Service("semsearch.api", env, data / "api.log").start()
            api.wait_http(f"http://127.0.0.1:{port}/readyz")
            now = current()
            outcomes.append("new" if now == target else "old")
            held = now
        print("kill outcomes:", outcomes)
        assert not [p for p in data.iterdir() if p.name.startswith(("snapshot-", "index.importing", "index.previous"))]
        target = second if held == first else first  # and the next import, undisturbed, lands
        assert cli("snapshot", "import", str(target), "--root", str(roots[target])).returncode == 0
        assert current() == target, outcomes
    finally:
        api.stop()


def search_env(env: dict[str, str], query: str) -> dict[str, str]:
    """Each hit's text by file."""
    response = httpx.post(f"{env['SEMSEARCH_URL']}/v1/search", json={"query": query, "minScore": -1}, timeout=60)
    assert response.status_code == 200, response.text
    return {h["relPath"]: h["text"] for h in response.json()["hits"]}


@pytest.mark.e2e  # starts processes
def test_a_swap_cut_between_its_steps_is_undone_or_completed_at_start(
    exported: tuple[Stack, Path, Path], api_factory: Any, tmp_path: Path
) -> None:
    """The two instants a random kill rarely hits, made by hand from two real data dirs: the old
    index moved aside with the new one staged (undone), then the new one in place with the folder
    list not yet written (completed)."""
    _, root, archive = exported
    old, new = api_factory(), api_factory(worker=False)
    logbook = write_tree(tmp_path / "logbook", {"log.md": "# Log\n\nFog at noon; the foghorn sounded.\n"})
    old.cli("add", str(logbook))
    old.index()
    new.cli("snapshot", "import", str(archive), "--root", str(root.parent))
    imported = status(new)
    old.stop()
    new.stop()
    data = old.data_dir
    for cut in ("staged", "in place"):
        (data / "index").rename(data / "index.previous")
        shutil.copytree(new.data_dir / "index", data / ("index.importing" if cut == "staged" else "index"))
        (data / "snapshot-import.json").write_text((new.data_dir / "folders.json").read_text())
        api = Service("semsearch.api", old.env, data / f"api-{cut}.log").start()
        try:
            api.wait_http(f"{old.url}/readyz")
            st = status(old)
            if cut == "staged":
                assert [f["name"] for f in st["folders"]] == ["logbook"] and st["snapshot"] is None
                assert "foghorn" in search_env(old.env, "the foghorn sounded in fog")["log.md"]
            else:
                assert st["folders"] == imported["folders"] and st["snapshot"] == imported["snapshot"]
            left = {"index.previous", "index.importing", "snapshot-import.json"} & {p.name for p in data.iterdir()}
            assert left == set(), cut
            assert "interrupted snapshot import was" in (data / f"api-{cut}.log").read_text()
        finally:
            api.stop()
