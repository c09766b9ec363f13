"""`make bench-scale`: what scaling out costs and buys, measured on this machine in one run.

1. Indexing throughput with one and two embedder replicas, each pinned to its own core
   (`taskset`), against L1: the model alone in this process on one thread, measured just
   before and after.
2. The index on object storage (SeaweedFS on loopback) against the local disk at 100k chunks:
   build time, ANN recall@10, and query p50/p99 in alternating rounds of an API on local disk,
   a query replica reading the store directly and one answering from its local copy (and how
   long that copy took to make).
3. Freshness: from the end of a writer's run to the moment a query replica over the same
   bucket answers with the change.
4. How the query cost grows with the table: 100k (twice: the spread), 300k and 1M chunks —
   build time and the building API's peak RSS, p50/p99 and RSS of a fresh API serving it, ANN
   recall@10 against exact search, and the recall of other ANN query parameters on the same
   table (the real `Store.vector_search`, given each `AnnQuery` in this process). A table over
   the in-memory copy's default bound is served held in memory too (SEMSEARCH_RESIDENT_ROWS set
   to its size): how long the copy takes to load, p50/p99, eight clients, recall and RSS.

Synthetic tables are built as `make bench` builds its 100k table (bench/run.py): real chunk
texts and vectors of the `rich` sdist, perturbed, written through the API's batch endpoint.
Writes bench/scale.json after every step and prints a table. Nothing here asserts: it measures.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from rich.console import Console
from rich.table import Table

from semsearch.config import Settings
from semsearch.embedder.client import EmbedderClient
from semsearch.embedder.model import load
from semsearch.engine.store import AnnQuery
from tests.object_store import start_object_store
from tests.processes import Service, clean_env, free_port, start_api, start_embedder

from .ann_study import recall_at_10
from .run import (
    Exact,
    add_folder,
    ann_recall,
    corpus,
    corpus_chunks,
    cpu_model,
    in_process_rate,
    median_of,
    query_latency,
    rss_peak_mb,
    run_index,
    stage_line,
    synthetic_row,
    synthetic_table,
    wait_for_copy,
)

HERE = Path(__file__).resolve().parent
# ANN query settings tried on every table besides the configured one.
ALTERNATIVES = [AnnQuery(2, 4, 20), AnnQuery(2, 4, 30), AnnQuery(1, 4, 40), AnnQuery(4, 4, 40), AnnQuery(2, 4, 80)]
console = Console()
results: dict[str, Any] = {}


def bench_queries(root: Path, count_tokens: Callable[[list[str]], list[int]]) -> tuple[list[str], list[str]]:
    """The corpus's chunks shuffled as `make bench` shuffles them, and the 100 queries it asks
    (the first words of chunks)."""
    mix = corpus_chunks(root, count_tokens)
    random.Random(1).shuffle(mix)
    return mix, [" ".join(t.split()[:8]) for t in mix[:200] if len(t.split()) >= 4][:100]


def save(out: Path) -> None:
    out.write_text(json.dumps(results, indent=2) + "\n")


def pinned_embedder(log: Path, core: int) -> tuple[Service, str]:
    """An embedder on one core and one onnxruntime thread, as one small replica of a pool."""
    port = free_port()
    env = clean_env(SEMSEARCH_EMBEDDER_PORT=str(port), SEMSEARCH_THREADS="1")
    log.parent.mkdir(parents=True, exist_ok=True)
    service = Service("semsearch.embedder", env, log)
    service.proc = subprocess.Popen(
        ["taskset", "-c", str(core), sys.executable, "-m", "semsearch.embedder"],
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    address = f"127.0.0.1:{port}"
    service.wait_embedder(address, timeout=180)
    return service, address


def throughput(work: Path, root: Path, mix: list[str]) -> dict[str, Any]:
    encoder = load(None, 256, 1, 1, Settings().model_cache_dir)
    encoder.embed(mix[:8])
    before = median_of(3, lambda: in_process_rate(encoder, mix[:128]))
    replicas = [pinned_embedder(work / f"pinned{core}.log", core) for core in (0, 1)]
    out: dict[str, Any] = {}
    try:
        for count in (1, 2):
            target = ",".join(address for _, address in replicas[:count])
            api, env = start_api(work / f"pool{count}", target)
            try:
                add_folder(env, root, "rich")
                summary, seconds, _ = run_index(env)
            finally:
                api.stop()
            out[f"replicas{count}"] = {"chunks": summary["chunksWritten"], "seconds": round(seconds, 1),
                                       "chunksPerSecond": round(summary["chunksWritten"] / seconds, 2)}  # fmt: skip
    finally:
        for service, _ in replicas:
            service.stop()
    after = median_of(3, lambda: in_process_rate(encoder, mix[:128]))
    l1 = (before + after) / 2
    out["L1"] = round(l1, 2)
    for count in (1, 2):
        out[f"replicas{count}"]["ratioToL1"] = round(out[f"replicas{count}"]["chunksPerSecond"] / l1, 2)
    out["twoOverOne"] = round(out["replicas2"]["chunksPerSecond"] / out["replicas1"]["chunksPerSecond"], 2)
    return out


def alternatives(index: Path, embedder: EmbedderClient, queries: list[str]) -> list[dict[str, Any]]:
    """Recall@10 and p50 of the other ANN query settings on this table, in process."""
    return recall_at_10(index, [embedder.embed([q], query=True)[0] for q in queries], ALTERNATIVES)


def table(work: Path, name: str, rows: int, address: str, source: Path, queries: list[str],
          extra: dict[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    """Build a `rows`-chunk table through a fresh API; measure it there and in a fresh API."""
    extra = extra or {}
    api, env = start_api(work / name, address, SEMSEARCH_VERSION_RETENTION_S="5", **extra)
    started = time.perf_counter()
    try:
        exact = synthetic_table(env, source, rows, work / f"{name}-files")
        build = time.perf_counter() - started
        entry: dict[str, Any] = {"chunks": rows, "buildSeconds": round(build, 1),
                                 "apiBuildPeakRssMb": round(rss_peak_mb(api.pid), 1)}  # fmt: skip
    finally:
        api.stop()
    serving(work / name, address, exact, queries, entry, extra)
    if rows > Settings().resident_rows and not extra:
        entry["inMemory"] = held(work / name, address, exact, queries, rows)
    return entry


def held(data: Path, address: str, exact: Exact, queries: list[str], rows: int) -> dict[str, Any]:
    """The table served from the in-memory copy, its bound raised to hold it (a fresh API)."""
    api, env = start_api(data, address, SEMSEARCH_RESIDENT_ROWS=str(rows))
    try:
        started = time.monotonic()
        wait_for_copy(env["SEMSEARCH_URL"], data, within_s=1800)  # 1M chunks: ~2 min on 2 cores
        entry: dict[str, Any] = {"loadSeconds": round(time.monotonic() - started, 1)}
        entry["sequential"] = query_latency(env["SEMSEARCH_URL"], queries)
        entry["concurrent8"] = query_latency(env["SEMSEARCH_URL"], queries * 2, clients=8)
        entry["annRecallAt10"] = ann_recall(env["SEMSEARCH_URL"], exact, EmbedderClient(address), queries)
        entry["apiServingPeakRssMb"] = round(rss_peak_mb(api.pid), 1)
    finally:
        api.stop()
    return entry


def serving(data: Path, address: str, exact: Exact, queries: list[str], entry: dict[str, Any],
            extra: dict[str, str]) -> dict[str, str]:  # fmt: skip
    """Latency, recall and memory of a fresh API over a built table (no build leftovers)."""
    api, env = start_api(data, address, **extra)
    try:
        entry["sequential"] = query_latency(env["SEMSEARCH_URL"], queries)
        entry["annRecallAt10"] = ann_recall(env["SEMSEARCH_URL"], exact, EmbedderClient(address), queries)
        entry["apiServingPeakRssMb"] = round(rss_peak_mb(api.pid), 1)
    finally:
        api.stop()
    return env


def finish_table(work: Path, name: str, address: str, queries: list[str]) -> dict[str, Any]:
    """Step 4 for a table whose rows are written but whose indices are not (a run cut short while
    building them): build them through the API, then measure it as `table` does."""
    entry: dict[str, Any] = {}
    if not (work / name / "indexed").exists():
        api, env = start_api(work / name, address, SEMSEARCH_VERSION_RETENTION_S="5")
        try:
            started = time.perf_counter()
            httpx.post(f"{env['SEMSEARCH_URL']}/v1/index/optimize", timeout=None).raise_for_status()
            entry |= {"indexBuildSeconds": round(time.perf_counter() - started, 1),
                      "apiBuildPeakRssMb": round(rss_peak_mb(api.pid), 1)}  # fmt: skip
            (work / name / "indexed").write_text(json.dumps(entry))
        finally:
            api.stop()
    entry = json.loads((work / name / "indexed").read_text())
    import lancedb

    rows = lancedb.connect(str(work / name / "index")).open_table("chunks").to_arrow()
    paths, lines = rows["path"].to_pylist(), rows["start_line"].to_pylist()
    order = np.asarray([synthetic_row(p, line) for p, line in zip(paths, lines, strict=True)])
    exact = Exact.from_lists(order, rows["search_vectors"].combine_chunks())  # float32 blocks, not lists per row
    del rows
    entry["chunks"] = len(order)
    serving(work / name, address, exact, queries, entry, {})
    entry["alternatives"] = alternatives(work / name / "index", EmbedderClient(address), queries)
    return entry


def freshness(work: Path, writer_env: dict[str, str], extra: dict[str, str], rounds: int = 5) -> dict[str, Any]:
    """Lag from the end of the writer's run to a replica's answer (replica at the default interval)."""
    folder = work / "fresh"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "note.md").write_text("# Note\n\nNothing yet.\n")
    writer, wenv = start_api(work / "fresh-writer", writer_env["SEMSEARCH_EMBEDDER_ADDR"], **extra)
    replica, renv = start_api(work / "fresh-replica", writer_env["SEMSEARCH_EMBEDDER_ADDR"], SEMSEARCH_ROLE="query",
                              SEMSEARCH_WRITER_URL=wenv["SEMSEARCH_URL"], **extra)  # fmt: skip
    interval = Settings().read_consistency_s
    lags, runs = [], []
    try:
        add_folder(wenv, folder, "fresh")
        for i in range(rounds):
            word = f"zephyrine{i}quokka"
            (folder / "note.md").write_text(f"# Note\n\nThe keeper's code word today is {word}.\n")
            _, seconds, _ = run_index(wenv, "fresh")
            ended = time.monotonic()
            runs.append(seconds)
            ask = {"query": f"the keeper's code word today is {word}", "folder": "fresh", "mode": "vector", "k": 1,
                   "minScore": -1}  # fmt: skip
            while True:  # the replica answers from the index: the chunk's text shows the change
                found = httpx.post(f"{renv['SEMSEARCH_URL']}/v1/search", json=ask, timeout=30)
                if found.status_code == 200 and any(word in h["text"] for h in found.json()["hits"]):
                    break
                if time.monotonic() - ended > 60:
                    raise RuntimeError(f"the replica never saw round {i}: {found.text[:300]}")
                time.sleep(0.05)
            lags.append(time.monotonic() - ended)
    finally:
        replica.stop()
        writer.stop()
    return {"readConsistencyS": interval, "lagsS": [round(x, 2) for x in lags],
            "medianLagS": round(statistics.median(lags), 2), "maxLagS": round(max(lags), 2),
            "medianRunS": round(statistics.median(runs), 2)}  # fmt: skip


def first_copy(url: str, started: float) -> dict[str, Any]:
    """How long a query replica's first copy of the index took to make (from its start)."""
    while True:
        copy = httpx.get(f"{url}/v1/status", timeout=30).json()["localCopy"]
        if copy and copy["answering"]:
            return {"seconds": round(time.monotonic() - started, 1), "bytes": copy["bytes"], "files": copy["files"]}
        if time.monotonic() - started > 1800:
            raise RuntimeError(f"the replica's local copy was not made in 30 minutes: {copy}")
        time.sleep(0.5)


def side_by_side(apis: dict[str, dict[str, str]], queries: list[str], rounds: int = 2) -> dict[str, Any]:
    """The same queries on every API, alternating rounds so all see the same machine; ratios to
    the first (local disk)."""
    samples: dict[str, list[dict[str, Any]]] = {name: [] for name in apis}
    for _ in range(rounds):
        for name, env in apis.items():
            samples[name].append(query_latency(env["SEMSEARCH_URL"], queries))
    out: dict[str, Any] = {
        k: {"p50_ms": statistics.median(r["p50_ms"] for r in v), "p99_ms": statistics.median(r["p99_ms"] for r in v)}
        for k, v in samples.items()
    }
    for key, rounds_of in samples.items():  # the last round's stage medians: where the extra time goes
        out[key]["stagesP50_ms"] = rounds_of[-1].get("stagesP50_ms", {})
    base = next(iter(apis))
    for key in list(apis)[1:]:
        out[key]["p50Ratio"] = round(out[key]["p50_ms"] / out[base]["p50_ms"], 2)
        out[key]["p99Ratio"] = round(out[key]["p99_ms"] / out[base]["p99_ms"], 2)
    return out


def main() -> None:
    import logging

    logging.getLogger("httpx").setLevel(logging.WARNING)
    parser = argparse.ArgumentParser(prog="python -m bench.scale")
    parser.add_argument("--work", type=Path, default=Path.home() / ".cache" / "semsearch-bench")
    parser.add_argument("--base", type=int, default=100_000, help="the table of steps 2 and 4 measured twice")
    parser.add_argument("--sizes", default="100000,300000,1000000", help="table sizes of step 4")
    parser.add_argument("--out", type=Path, default=HERE / "scale.json")
    parser.add_argument("--finish", help="only build and measure the table left in this work dir (by name)")
    parser.add_argument("--growth-only", action="store_true", help="only step 4, over the source a full run left")
    args = parser.parse_args()
    work: Path = args.work / "scale"
    if args.finish:
        resume(args, work)
        return
    if args.growth_only:
        growth_only(args, work)
        return
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    root = corpus(args.work)
    results["machine"] = {"cpus": os.cpu_count(), "cpu": cpu_model()}

    embedder, address = start_embedder(work / "embedder.log")
    client = EmbedderClient(address)
    mix, queries = bench_queries(root, client.count_tokens)
    try:
        console.print("1. indexing throughput: 1 vs 2 pinned embedder replicas")
        results["throughput"] = throughput(work, root, mix)
        save(args.out)

        console.print("   the source of the synthetic rows: the corpus, indexed")
        api, env = start_api(work / "corpus", address)
        add_folder(env, root, "rich")
        run_index(env)
        api.stop()
        source = work / "corpus" / "index"

        console.print("2. 100k chunks on object storage vs the local disk")
        store = start_object_store(work / "seaweedfs")
        remote_extra = {"SEMSEARCH_INDEX_URI": f"s3://{store.bucket}/scale-base", **store.env()}
        try:
            local = table(work, "local-base", args.base, address, source, queries)
            results["growth"] = [local]
            remote = table(work, "s3-base", args.base, address, source, queries, remote_extra)
            api_local, lenv = start_api(work / "local-base", address)
            replica = {**remote_extra, "SEMSEARCH_ROLE": "query"}
            api_direct, denv = start_api(work / "s3-direct", address, SEMSEARCH_LOCAL_COPY_MB="0", **replica)
            started = time.monotonic()
            api_copy, cenv = start_api(work / "s3-copy", address, **replica)
            try:
                copy = first_copy(cenv["SEMSEARCH_URL"], started)
                apis = {"local": lenv, "objectStoreDirect": denv, "objectStore": cenv}
                results["objectStore"] = {"local": local, "objectStore": remote, "firstCopy": copy,
                                          "sideBySide": side_by_side(apis, queries)}  # fmt: skip
            finally:
                for api in (api_local, api_direct, api_copy):
                    api.stop()
            save(args.out)
            console.print("3. freshness: writer's run -> query replica")
            fresh_extra = {"SEMSEARCH_INDEX_URI": f"s3://{store.bucket}/fresh", **store.env()}
            results["freshness"] = freshness(work, {"SEMSEARCH_EMBEDDER_ADDR": address}, fresh_extra)
            save(args.out)
        finally:
            store.stop()

        console.print("4. query cost as the table grows")
        local["alternatives"] = alternatives(work / "local-base" / "index", client, queries)
        grow(work, [int(s) for s in args.sizes.split(",")], client, address, source, queries, args.out)
    finally:
        client.close()
        embedder.stop()
    save(args.out)
    report()
    console.print(f"wrote {args.out}")


def grow(work: Path, sizes: list[int], client: EmbedderClient, address: str, source: Path, queries: list[str],
         out: Path) -> None:  # fmt: skip
    """Step 4 for each size: a table built, measured, then deleted (1M chunks are GBs)."""
    for rows in sizes:
        name = f"local{rows}"
        console.print(f"   {rows:,} chunks")
        entry = table(work, name, rows, address, source, queries)
        entry["alternatives"] = alternatives(work / name / "index", client, queries)
        results.setdefault("growth", []).append(entry)
        save(out)
        shutil.rmtree(work / name, ignore_errors=True)


def growth_only(args: argparse.Namespace, work: Path) -> None:
    """Step 4 alone, over the source table a full run left in the work dir."""
    embedder, address = start_embedder(work / "embedder-growth.log")
    client = EmbedderClient(address)
    try:
        _, queries = bench_queries(corpus(args.work), client.count_tokens)
        results["machine"] = {"cpus": os.cpu_count(), "cpu": cpu_model()}
        sizes = [int(s) for s in args.sizes.split(",")]
        grow(work, sizes, client, address, work / "corpus" / "index", queries, args.out)
    finally:
        client.close()
        embedder.stop()
    report()


def resume(args: argparse.Namespace, work: Path) -> None:
    results.update(json.loads(args.out.read_text()))
    embedder, address = start_embedder(work / "embedder-finish.log")
    client = EmbedderClient(address)
    try:
        _, queries = bench_queries(corpus(args.work), client.count_tokens)
        entry = finish_table(work, args.finish, address, queries)
        entry["buildSeconds"] = None  # the rows were written by the cut run; only the indices here
        results["growth"].append(entry)
        save(args.out)
    finally:
        client.close()
        embedder.stop()
    report()


def report() -> None:
    t = Table(title="make bench-scale")
    t.add_column("measure")
    t.add_column("value")
    tp = results.get("throughput")
    if tp:
        t.add_row("L1: the model alone, one thread", f"{tp['L1']} chunks/s")
        for count in (1, 2):
            r = tp[f"replicas{count}"]
            t.add_row(f"cold index, {count} embedder replica(s) pinned to a core each",
                      f"{r['chunksPerSecond']} chunks/s = {r['ratioToL1']} L1")  # fmt: skip
        t.add_row("2 replicas / 1 replica", f"{tp['twoOverOne']} ×")
    obj = results.get("objectStore")
    if obj:
        s = obj["sideBySide"]
        t.add_row("100k, query p50 / p99: local disk", f"{s['local']['p50_ms']} / {s['local']['p99_ms']} ms")
        for where, what in (("objectStore", "query replica, local copy"), ("objectStoreDirect", "replica, no copy")):
            if where in s:
                t.add_row(f"100k, query p50 / p99: object storage, {what}",
                          f"{s[where]['p50_ms']} / {s[where]['p99_ms']} ms "
                          f"({s[where]['p50Ratio']} × / {s[where]['p99Ratio']} ×)")  # fmt: skip
        for where in ("local", "objectStore", "objectStoreDirect"):
            if s.get(where, {}).get("stagesP50_ms"):
                t.add_row(f"   stages p50 ms, {where}", stage_line(s[where]))
        if first := obj.get("firstCopy"):
            made = f"{first['bytes'] / 1e6:.0f} MB, {first['files']} files, answering after {first['seconds']} s"
            t.add_row("100k, a query replica's first local copy", made)
        t.add_row("100k, build: local / object storage",
                  f"{obj['local']['buildSeconds']} / {obj['objectStore']['buildSeconds']} s")  # fmt: skip
        t.add_row("100k, ANN recall@10: local / object storage",
                  f"{obj['local']['annRecallAt10']} / {obj['objectStore']['annRecallAt10']}")  # fmt: skip
    fr = results.get("freshness")
    if fr:
        t.add_row(f"freshness on a replica (interval {fr['readConsistencyS']} s): median / max",
                  f"{fr['medianLagS']} / {fr['maxLagS']} s after the run")  # fmt: skip
    for entry in results.get("growth", []):
        seq = entry["sequential"]
        built = f"{entry['buildSeconds']} s" if entry.get("buildSeconds") else f"indices {entry['indexBuildSeconds']} s"
        t.add_row(f"{entry['chunks']:,} chunks: build, peak RSS building", f"{built}, {entry['apiBuildPeakRssMb']} MB")
        t.add_row(f"{entry['chunks']:,} chunks: p50 / p99, RSS serving, recall@10",
                  f"{seq['p50_ms']} / {seq['p99_ms']} ms, {entry['apiServingPeakRssMb']} MB, "
                  f"{entry['annRecallAt10']}")  # fmt: skip
        if seq.get("stagesP50_ms"):
            t.add_row("   stages p50 ms", stage_line(seq))
        if held_ := entry.get("inMemory"):
            inner, eight = held_["sequential"], held_["concurrent8"]
            t.add_row(f"{entry['chunks']:,} chunks held in memory: p50 / p99, 8 clients, RSS, recall@10",
                      f"{inner['p50_ms']} / {inner['p99_ms']} ms, {eight['qps']} q/s, "
                      f"{held_['apiServingPeakRssMb']} MB, {held_['annRecallAt10']} "
                      f"(loaded in {held_['loadSeconds']} s)")  # fmt: skip
            t.add_row("   stages p50 ms", stage_line(inner))
        for alt in entry.get("alternatives", []):
            t.add_row(f"   refine {alt['refine']}, nprobes {alt['nprobes'] or 'default'}",
                      f"recall {alt['recallAt10']}, {alt['p50_ms']} ms")  # fmt: skip
    console.print(t)


if __name__ == "__main__":
    main()
