"""Faults with the real services: a dying embedder, a killed API or indexer, a full disk,
an unusable data directory, an old index layout, thousands of small writes, secrets.

Fault injectors are plain process kills and a small tmpfs; nothing is mocked.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import SEMSEARCH, wait_until_free
from tests.oneshot import INDEXER, chunk_shas, index, manifest, write_corpus
from tests.polling import until
from tests.processes import Service, api_env, free_port, start_api, start_embedder

pytestmark = pytest.mark.e2e  # starts services as processes

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def reference(api_factory, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    corpus = write_corpus(tmp_path_factory.mktemp("reliability") / "corpus")
    stack = api_factory()
    stack.cli("add", str(corpus))
    stack.index()
    return corpus, manifest(stack.env, "corpus")


def test_embedder_dying_mid_run_is_retried_to_the_same_index(reference, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    corpus, expected = reference
    port = free_port()
    embedder, address = start_embedder(tmp_path / "e1.log", port=port)
    api, env = start_api(tmp_path / "data", address)
    try:
        env = env | {"SEMSEARCH_WRITE_BATCH_FILES": "2", "SEMSEARCH_EMBEDDER_RETRY_S": "120"}
        subprocess.run([SEMSEARCH, "add", str(corpus)], env=env, check=True, capture_output=True)
        run = subprocess.Popen(INDEXER, env=env, stdout=subprocess.PIPE, text=True)
        until(lambda: len(manifest(env, "corpus")) >= 4, 120, what="four files written before the fault")
        assert embedder.proc is not None
        embedder.proc.send_signal(signal.SIGKILL)  # fault injector: the embedder dies
        embedder.proc.wait()
        assert len(manifest(env, "corpus")) < len(expected)
        time.sleep(2)  # the fault: the embedder stays down this long
        embedder, _ = start_embedder(tmp_path / "e2.log", port=port)  # …and comes back
        out, _ = run.communicate(timeout=300)
        assert run.returncode == 0
        assert json.loads(out.strip().splitlines()[-1])["errors"] == []
        assert manifest(env, "corpus") == expected
    finally:
        api.stop()
        embedder.stop()


def test_embedder_that_never_returns_fails_the_run_cleanly(reference, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    corpus, expected = reference
    embedder, address = start_embedder(tmp_path / "e.log")
    api, env = start_api(tmp_path / "data", address)
    try:
        env = env | {"SEMSEARCH_WRITE_BATCH_FILES": "2", "SEMSEARCH_EMBEDDER_RETRY_S": "2"}
        subprocess.run([SEMSEARCH, "add", str(corpus)], env=env, check=True, capture_output=True)
        run = subprocess.Popen(INDEXER, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        while len(manifest(env, "corpus")) < 4:
            time.sleep(0.05)
        embedder.stop()
        out, err = run.communicate(timeout=300)
        assert run.returncode == 1
        assert f"embedder at {address} is not reachable" in err and "after retrying for 2 s" in err
        # Nothing half-written: every file in the index has exactly the chunks of one version.
        written = manifest(env, "corpus")
        shas = chunk_shas(tmp_path / "data")
        assert set(shas) == set(written)
        for path, (sha, _) in written.items():
            assert shas[path] == {sha} and written[path] == expected[path]
    finally:
        api.stop()


def test_an_embedder_that_stops_answering_is_called_stuck_not_unreachable(tmp_path: Path) -> None:
    """An embedder that takes calls and never answers (stopped with SIGSTOP, the fault injector) is
    reported as up but stuck, with the setting to raise — not as one to start — by the API's search
    and by a run; once it answers again, so does search."""
    corpus = write_corpus(tmp_path / "corpus", files=2)
    embedder, address = start_embedder(tmp_path / "e.log")
    api, env = start_api(tmp_path / "data", address, SEMSEARCH_EMBEDDER_TIMEOUT_S="1")
    assert embedder.proc is not None
    try:
        subprocess.run([SEMSEARCH, "add", str(corpus)], env=env, check=True, capture_output=True)
        index(env)
        embedder.proc.send_signal(signal.SIGSTOP)
        stuck = f"embedder at {address} did not answer within 1 s"
        answer = httpx.post(f"{env['SEMSEARCH_URL']}/v1/search", json={"query": "subject 11"}, timeout=30)
        assert answer.status_code == 503 and stuck in answer.json()["detail"], answer.text
        assert "SEMSEARCH_EMBEDDER_TIMEOUT_S" in answer.json()["detail"]
        run = subprocess.run(INDEXER, env=env | {"SEMSEARCH_EMBEDDER_RETRY_S": "1"}, capture_output=True, text=True,
                             timeout=120)  # fmt: skip
        assert run.returncode == 1 and stuck in run.stderr and "after retrying for 1 s" in run.stderr, run.stderr
        assert "not reachable" not in run.stderr
        embedder.proc.send_signal(signal.SIGCONT)
        again = httpx.post(f"{env['SEMSEARCH_URL']}/v1/search", json={"query": "subject 11"}, timeout=30)
        assert again.status_code == 200 and again.json()["hits"][0]["relPath"] == "part01.md", again.text
    finally:
        embedder.proc.send_signal(signal.SIGCONT)
        api.stop()
        embedder.stop()


def test_api_killed_during_writes_keeps_old_or_new_per_file(reference, tmp_path: Path, embedder_addr: str) -> None:  # type: ignore[no-untyped-def]
    corpus, expected = reference
    work = tmp_path / "corpus"
    write_corpus(work, files=12)
    api, env = start_api(tmp_path / "data", embedder_addr)
    subprocess.run([SEMSEARCH, "add", str(work)], env=env, check=True, capture_output=True)
    index(env)
    before = manifest(env, "corpus")
    for path in sorted(work.iterdir()):
        path.write_text(path.read_text() + "\nAn appended paragraph about lighthouses.\n")
    run = subprocess.Popen(
        INDEXER, env=env | {"SEMSEARCH_WRITE_BATCH_FILES": "1"}, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    while sum(1 for p, v in manifest(env, "corpus").items() if v != before[p]) < 3:
        time.sleep(0.02)
    assert api.proc is not None
    api.proc.send_signal(signal.SIGKILL)  # fault injector: the API dies mid-write
    api.proc.wait()
    run.wait(timeout=300)
    shas = chunk_shas(tmp_path / "data")  # the table opens…
    assert all(len(v) == 1 for v in shas.values())  # …and every file has its old or its new chunks
    port = int(env["SEMSEARCH_PORT"])
    api = Service("semsearch.api", api_env(tmp_path / "data", port, embedder_addr), tmp_path / "api2.log").start()
    api.wait_http(f"http://127.0.0.1:{port}/readyz")
    try:
        index(env)  # the next incremental run repairs the rest
        reference_after = {p: manifest_entry for p, manifest_entry in manifest(env, "corpus").items()}
        fresh, fresh_env = start_api(tmp_path / "fresh", embedder_addr)
        subprocess.run([SEMSEARCH, "add", str(work)], env=fresh_env, check=True, capture_output=True)
        index(fresh_env)
        assert reference_after == manifest(fresh_env, "corpus")
        fresh.stop()
    finally:
        api.stop()
    assert expected  # the module corpus was indexed too


def test_indexer_killed_at_random_points_converges(tmp_path: Path, embedder_addr: str) -> None:
    work = write_corpus(tmp_path / "corpus", files=12)
    api, env = start_api(tmp_path / "data", embedder_addr, SEMSEARCH_LEASE_TTL_S="1")
    # Six kills a run, at points drawn afresh each time (the seed is in any failure's message): runs
    # over time cover more of the indexer than one fixed dozen did, at half the cost.
    seed = random.randrange(1 << 30)
    try:
        subprocess.run([SEMSEARCH, "add", str(work)], env=env, check=True, capture_output=True)
        fast = env | {"SEMSEARCH_WRITE_BATCH_FILES": "1"}
        rng = random.Random(seed)
        for round_ in range(6):
            victim = work / f"part{rng.randrange(12):02}.md"
            victim.write_text(victim.read_text() + f"\nRound {round_} adds a note on glaciers.\n")
            run = subprocess.Popen(INDEXER, env=fast, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(0.2, 2.0))
            run.send_signal(signal.SIGKILL)  # fault injector: the indexer dies at a random point
            run.wait()
            shas = chunk_shas(tmp_path / "data")
            assert all(len(v) == 1 for v in shas.values()), (seed, round_)
        wait_until_free(env["SEMSEARCH_URL"], "corpus")  # the dead runs' leases lapse (SEMSEARCH_LEASE_TTL_S)
        index(env)
        fresh, fresh_env = start_api(tmp_path / "fresh", embedder_addr)
        subprocess.run([SEMSEARCH, "add", str(work)], env=fresh_env, check=True, capture_output=True)
        index(fresh_env)
        assert manifest(env, "corpus") == manifest(fresh_env, "corpus"), seed
        fresh.stop()
    finally:
        api.stop()


@pytest.fixture
def small_disk(tmp_path: Path):  # type: ignore[no-untyped-def]
    mount = tmp_path / "small-disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({made.stderr.decode().strip()}); run as root with mount rights")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_full_disk_fails_in_plain_words_and_recovers(small_disk: Path, tmp_path: Path, embedder_addr: str) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "first.md").write_text("# First\nA note about the rings of Saturn.\n")
    api, env = start_api(small_disk / "data", embedder_addr, SEMSEARCH_LEASE_TTL_S="1")
    try:
        subprocess.run([SEMSEARCH, "add", str(corpus)], env=env, check=True, capture_output=True)
        index(env)
        ballast = small_disk / "ballast"
        free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
        ballast.write_bytes(b"\0" * max(0, free - 4096))  # fault injector: the volume fills up
        for i in range(40):
            (corpus / f"more{i}.md").write_text(f"# More {i}\n" + "Jupiter's moons and their orbits. " * 40)
        failed = index(env, check=False)
        assert failed.returncode == 1 and "disk full" in failed.stderr
        hits = httpx.post(f"{env['SEMSEARCH_URL']}/v1/search", json={"query": "rings of Saturn"}).json()["hits"]
        assert hits and hits[0]["relPath"] == "first.md"  # what was committed still answers
        ballast.unlink()
        wait_until_free(env["SEMSEARCH_URL"], "corpus")
        assert json.loads(index(env).stdout.strip().splitlines()[-1])["filesProcessed"] == 40
    finally:
        api.stop()


def test_unusable_data_directory_is_a_clear_startup_error(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "data"
    not_a_dir.write_text("a file where the data directory should be")
    env = api_env(not_a_dir, free_port(), "127.0.0.1:1")
    result = subprocess.run(
        [sys.executable, "-m", "semsearch.api"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0
    assert "cannot create the data directory" in result.stderr and "Traceback" not in result.stderr


def test_read_only_data_directory_is_a_clear_startup_error(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "index").mkdir(parents=True)
    bound = subprocess.run(["mount", "--bind", str(data), str(data)], capture_output=True)
    if bound.returncode != 0:
        pytest.skip("cannot bind-mount here; root ignores file modes, so a read-only mount is the only way")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(data)], check=True, capture_output=True)
        env = api_env(data, free_port(), "127.0.0.1:1")
        result = subprocess.run(
            [sys.executable, "-m", "semsearch.api"], env=env, capture_output=True, text=True, timeout=60
        )
        assert result.returncode != 0
        assert "is not writable" in result.stderr and "Traceback" not in result.stderr
    finally:
        subprocess.run(["umount", "-l", str(data)], check=False)


def test_an_index_of_another_schema_is_set_aside_with_a_notice(tmp_path: Path, embedder_addr: str) -> None:
    index_dir = tmp_path / "data" / "index"
    index_dir.mkdir(parents=True)
    (index_dir / "meta.json").write_text(json.dumps({"schema_version": 0, "model_id": "old", "dimension": 384}))
    api, env = start_api(tmp_path / "data", embedder_addr)
    try:
        status = httpx.get(f"{env['SEMSEARCH_URL']}/v1/status").json()
        assert "schema v0" in status["notice"] and "semsearch index" in status["notice"]
        assert status["chunks"] == 0
        assert list(tmp_path.joinpath("data").glob("index.schema-v0.*"))
    finally:
        api.stop()


def test_secrets_are_redacted_everywhere(stack, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "secretive"
    folder.mkdir()
    key = "AKIA" + "ABCDEFGHIJKLMNOP"
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\nabc\n-----END RSA PRIVATE KEY-----"
    (folder / "deploy.py").write_text(f"AWS_KEY = '{key}'\n{pem}\nprint('deploy to the cluster')\n")
    stack.cli("add", str(folder))
    try:
        stack.index(str(folder))
        with stack.http() as http:
            hits = http.post(
                "/v1/search", json={"query": "deploy cluster aws key", "folder": "secretive", "minScore": -1}
            ).json()
            cat = http.get("/v1/files", params={"path": str(folder / "deploy.py")}).json()
            grep = http.post("/v1/grep", json={"pattern": "AKIA", "folder": "secretive"}).json()
        everything = json.dumps(hits) + json.dumps(cat) + json.dumps(grep)
        assert key not in everything and "MIIEowIBAAKCAQEA7" not in everything
        assert "[REDACTED:aws-access-key]" in cat["text"] and "[REDACTED:private-key]" in cat["text"]
        assert cat["text"].splitlines()[-1] == "print('deploy to the cluster')"  # line numbers kept
        assert cat["totalLines"] == 6
        verdict = json.loads(stack.cli("explain", str(folder / "deploy.py"), "--json").stdout)
        assert verdict["secretsRedacted"] == 2
    finally:
        stack.cli("remove", "secretive", "--yes")


def test_no_shell_anywhere_in_the_code() -> None:
    # Spelled in pieces so this test does not match itself (nor the before-stop hook's grep).
    needles = ("shell" + "=True", "os." + "system(", "os." + "popen(")
    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True)
    sources = [ROOT / name for name in tracked.stdout.splitlines() if not name.startswith("tests/")]
    assert any(path.name == "cli.py" for path in sources)  # the code is there to be read
    offenders = [str(path.relative_to(ROOT)) for path in sources if any(n in path.read_text() for n in needles)]
    assert offenders == []
