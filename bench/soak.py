"""`make soak`: concurrent searches while an indexing run writes, on loopback, bounded in time.

Reports failed requests (the goal is zero), p99 idle vs under indexing, and the RSS of
every service at start and end. The test suite runs a short version (tests/test_soak.py).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from tests.processes import start_api, start_embedder


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def hammer(url: str, queries: list[str], clients: int, seconds: float) -> dict[str, Any]:
    """`clients` threads searching in a loop for `seconds`: latencies and failures."""
    latencies: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def client(offset: int) -> None:
        with httpx.Client(base_url=url, timeout=60) as http:
            i = offset
            while time.monotonic() < stop:
                started = time.perf_counter()
                try:
                    response = http.post("/v1/search", json={"query": queries[i % len(queries)], "k": 10})
                    ok = response.status_code == 200
                    detail = f"{response.status_code} {response.text[:200]}"
                except httpx.HTTPError as exc:
                    ok, detail = False, repr(exc)
                with lock:
                    latencies.append(time.perf_counter() - started)
                    if not ok:
                        failures.append(detail)
                i += clients

    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(client, range(clients)))
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1000 if ordered else 0.0
    return {"requests": len(latencies), "failed": len(failures), "p99_ms": round(p99, 1), "failures": failures[:5]}


def make_corpus(root: Path, files: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        (root / f"doc{i:04}.md").write_text(
            f"# Document {i}\n\n" + f"Paragraph about topic {i % 37}, the reactor, and valve {i}. " * 30
        )
    return root


def soak(work: Path, seconds: float, clients: int, files: int) -> dict[str, Any]:
    embedder, address = start_embedder(work / "embedder.log")
    api, env = start_api(work / "data", address)
    try:
        seed = make_corpus(work / "seed", 20)
        httpx.post(f"{env['SEMSEARCH_URL']}/v1/folders", json={"path": str(seed)}).raise_for_status()
        subprocess.run([sys.executable, "-m", "semsearch.indexer"], env=env, check=True, capture_output=True)
        queries = [f"reactor valve {i}" for i in range(50)] + [f"topic {i} paragraph" for i in range(37)]
        start_rss = {"embedder": rss_mb(embedder.pid), "api": rss_mb(api.pid)}
        idle = hammer(env["SEMSEARCH_URL"], queries, clients, min(seconds / 3, 20))
        corpus = make_corpus(work / "corpus", files)
        httpx.post(f"{env['SEMSEARCH_URL']}/v1/folders", json={"path": str(corpus)}).raise_for_status()
        indexer = subprocess.Popen(
            [sys.executable, "-m", "semsearch.indexer"], env=env, stdout=subprocess.PIPE, text=True
        )
        busy = hammer(env["SEMSEARCH_URL"], queries, clients, seconds)
        out, _ = indexer.communicate(timeout=3600)
        end_rss = {"embedder": rss_mb(embedder.pid), "api": rss_mb(api.pid)}
        return {
            "seconds": seconds,
            "clients": clients,
            "idle": idle,
            "duringIndexing": busy,
            "p99RatioToIdle": round(busy["p99_ms"] / max(idle["p99_ms"], 0.1), 2),
            "indexRun": json.loads(out.strip().splitlines()[-1]),
            "rssStartMb": start_rss,
            "rssEndMb": end_rss,
        }
    finally:
        api.stop()
        embedder.stop()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.soak")
    parser.add_argument("--seconds", type=float, default=180)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--files", type=int, default=400)
    parser.add_argument("--work", type=Path, default=Path.home() / ".cache" / "semsearch-soak")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("soak.json"))
    args = parser.parse_args()
    import shutil

    shutil.rmtree(args.work, ignore_errors=True)
    result = soak(args.work, args.seconds, args.clients, args.files)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    sys.exit(0 if result["idle"]["failed"] == result["duringIndexing"]["failed"] == 0 else 1)


if __name__ == "__main__":
    main()
