"""Topologies beyond one box: every service started by its CLI verb (as containers and pods do),
and a pool of embedders (`SEMSEARCH_EMBEDDER_ADDR=host1:port,host2:port`) whose calls are spread
over the replicas, where a run survives one being killed in the middle — its batches retried on
the other — with the same index an undisturbed run builds."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from semsearch.config import Settings
from semsearch.embedder.client import EmbedderClient, EmbedderError, calls_in_flight, grpc_target
from tests.conftest import SEMSEARCH
from tests.oneshot import INDEXER, index, manifest, write_corpus
from tests.processes import Service, api_env, free_port, start_api, start_embedder

pytestmark = pytest.mark.e2e


def cpu_ticks(service: Service) -> int:
    """User + system CPU time of a process, in clock ticks (/proc): how much work it did."""
    assert service.proc is not None
    fields = Path(f"/proc/{service.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def test_a_comma_list_is_dialled_as_a_static_pool_of_resolved_addresses() -> None:
    assert grpc_target("127.0.0.1:8766") == "127.0.0.1:8766"
    assert grpc_target("dns:///embedder:8766") == "dns:///embedder:8766"
    assert grpc_target("localhost:1,127.0.0.1:2") == "ipv4:127.0.0.1:1,127.0.0.1:2"
    with pytest.raises(EmbedderError, match="not host:port"):
        grpc_target("127.0.0.1:1,nohost")


def test_a_run_keeps_a_call_in_flight_per_replica_of_its_pool() -> None:
    """Each embedder runs its calls one after another: one call at a time would leave all but one
    replica idle (`make bench-scale` measures the two-replica speed-up this buys)."""
    assert calls_in_flight("127.0.0.1:8766") == 1
    assert calls_in_flight("a:8766, b:8766,c:8766,") == 3
    assert calls_in_flight("dns:///embedder:8766") == 4
    assert calls_in_flight("a:8766,b:8766", Settings(embed_in_flight=6).embed_in_flight) == 6


def test_a_run_survives_a_replica_killed_mid_run_with_the_index_of_an_undisturbed_run(
    tmp_path: Path, embedder_addr: str
) -> None:
    corpus = write_corpus(tmp_path / "corpus", files=20)
    first, one = start_embedder(tmp_path / "embedder-1.log")
    second, two = start_embedder(tmp_path / "embedder-2.log")
    api, env = start_api(tmp_path / "data", f"{one},{two}", SEMSEARCH_EMBEDDER_RETRY_S="60")
    reference, reference_env = start_api(tmp_path / "reference", embedder_addr)
    try:
        pool = EmbedderClient(f"{one},{two}")
        before = [cpu_ticks(first), cpu_ticks(second)]
        for _ in range(30):
            pool.embed(["the pilot boards incoming ships at the outer buoy"] * 16)
        spent = [cpu_ticks(first) - before[0], cpu_ticks(second) - before[1]]
        assert min(spent) > 0.25 * sum(spent), spent  # round robin: both replicas did the work
        subprocess.run([SEMSEARCH, "add", str(corpus)], env=env, check=True, capture_output=True)
        run = subprocess.Popen(
            INDEXER, env=env | {"SEMSEARCH_WRITE_BATCH_FILES": "1"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while len(manifest(env, "corpus")) < 5:  # the run is under way
            assert run.poll() is None and time.monotonic() < deadline, run.communicate()
            time.sleep(0.05)
        assert first.proc is not None
        first.proc.send_signal(signal.SIGKILL)  # fault injector: one replica dies mid-run
        first.proc.wait()
        out, err = run.communicate(timeout=300)
        assert run.returncode == 0, err
        assert pool.count_tokens(["still answered"]) == [2]
        hits = httpx.post(f"{env['SEMSEARCH_URL']}/v1/search", json={"query": "subject 33"}, timeout=60)
        assert hits.status_code == 200 and hits.json()["hits"], hits.text

        subprocess.run([SEMSEARCH, "add", str(corpus)], env=reference_env, check=True, capture_output=True)
        index(reference_env)
        assert manifest(env, "corpus") == manifest(reference_env, "corpus")
        pool.close()
    finally:
        for service in (api, reference, first, second):
            service.stop()


def test_every_service_starts_by_its_cli_verb(tmp_path: Path) -> None:
    embedder_port, api_port = free_port(), free_port()
    env = api_env(tmp_path / "data", api_port, f"127.0.0.1:{embedder_port}")
    logs = tmp_path / "logs"
    logs.mkdir()
    started = [
        subprocess.Popen(
            [SEMSEARCH, *verb], env=env, stdout=(logs / f"{verb[0]}.log").open("wb"), stderr=subprocess.STDOUT
        )
        for verb in (["embedder", "--port", str(embedder_port)], ["api", "--port", str(api_port)], ["worker"])
    ]
    try:
        deadline = time.monotonic() + 120
        while True:  # ready: the API answers and the embedder behind it too
            assert all(p.poll() is None for p in started), [f.read_text()[-2000:] for f in logs.iterdir()]
            try:
                if httpx.get(f"{env['SEMSEARCH_URL']}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, [f.read_text()[-2000:] for f in logs.iterdir()]
            time.sleep(0.2)
        corpus = write_corpus(tmp_path / "corpus", files=3)
        subprocess.run([SEMSEARCH, "add", str(corpus)], env=env, check=True, capture_output=True)
        ran = subprocess.run([SEMSEARCH, "index"], env=env, capture_output=True, text=True, timeout=300)
        assert ran.returncode == 0, ran.stderr  # executed by the `semsearch worker` process
        hits = httpx.post(f"{env['SEMSEARCH_URL']}/v1/search", json={"query": "subject 22"}, timeout=60).json()
        assert hits["hits"][0]["relPath"] == "part02.md"
    finally:
        for process in started:
            process.terminate()
        for process in started:
            process.wait(timeout=30)
