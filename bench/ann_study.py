"""`python -m bench.ann_study INDEX_DIR`: the ANN index and query parameters, tried on a copy of
a real index (`make bench-scale` leaves its tables under ~/.cache/semsearch-bench/scale).

Each index configuration is built in its own process on its own copy of the table (so each
build's peak RSS is its own), then queried through the real `Store.vector_search` with each
query setting; recall@10 is against exact search over the table's own vectors, with the
queries `make bench` asks (the first words of the `rich` sdist's chunks). `--keep-index`
measures the table's own index only (a 1M-row build takes long). Writes bench/ann_study.json.
Measures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import lancedb
import numpy as np
from lancedb.index import HnswSq, IvfPq, IvfSq

from semsearch.config import Settings
from semsearch.embedder.model import load
from semsearch.engine.location import IndexLocation
from semsearch.engine.store import AnnQuery, Store

from .run import corpus, corpus_chunks

HERE = Path(__file__).resolve().parent
INDICES: dict[str, Any] = {
    "hnsw-sq m12": HnswSq(distance_type="cosine", m=12),
    "hnsw-sq m20": HnswSq(distance_type="cosine", m=20),
    "hnsw-sq m12, 50k rows per partition": HnswSq(distance_type="cosine", m=12, target_partition_size=50_000),
    "hnsw-sq m20, 50k rows per partition": HnswSq(distance_type="cosine", target_partition_size=50_000),
    "ivf-pq 48x8": IvfPq(distance_type="cosine", num_sub_vectors=48),
    "ivf-sq": IvfSq(distance_type="cosine"),
}
# HNSW indices read refine and ef; IVF-only ones refine and nprobes (LanceDB's default is 20).
QUERIES = [AnnQuery(2, 2, None), AnnQuery(4, 4, None), AnnQuery(8, 8, None), AnnQuery(1, 4, 40),
           AnnQuery(2, 4, 30), AnnQuery(2, 4, 40), AnnQuery(4, 4, 40), AnnQuery(2, 4, 60)]  # fmt: skip


def build(source: Path, work: Path, name: str) -> dict[str, Any]:
    """In this process: copy the table, build the index, report seconds and peak RSS."""
    target = work / name.replace(" ", "_").replace(",", "")
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target)
    table = lancedb.connect(str(target)).open_table("chunks")
    started = time.perf_counter()
    table.create_index("vector", config=INDICES[name], replace=True)
    seconds = time.perf_counter() - started
    peak = next(int(line.split()[1]) / 1024 for line in Path("/proc/self/status").read_text().splitlines()
                if line.startswith("VmHWM:"))  # fmt: skip
    return {"dir": str(target), "buildSeconds": round(seconds, 1), "buildPeakRssMb": round(peak, 1)}


def table_vectors(index_dir: Path) -> tuple[list[str], np.ndarray]:
    """A table's ids and its vectors as one float32 block (a list per row would take GBs at 1M)."""
    chunks = lancedb.connect(str(index_dir)).open_table("chunks")
    table = chunks.search().select(["id", "vector"]).limit(None).to_arrow()
    column = table["vector"].combine_chunks()
    return table["id"].to_pylist(), column.flatten().to_numpy().reshape(len(column), -1)


def recall_at_10(index_dir: Path, asked: list[np.ndarray], settings: list[AnnQuery]) -> list[dict[str, Any]]:
    """Recall@10 and p50 of the real `Store.vector_search` under each query setting, against
    exact search over the table's own vectors."""
    ids, vectors = table_vectors(index_dir)
    exact = [{ids[i] for i in np.argsort(-(vectors @ v))[:10]} for v in asked]
    del vectors
    config = Settings()
    pool = max(10 * config.pool_multiplier, config.pool_min)  # what a search for k=10 asks the store for
    store = Store(IndexLocation(str(index_dir)), timedelta(minutes=5), 10**9)
    out = []
    for ann in settings:
        hits, seconds = 0, list[float]()
        for _ in range(2):  # the second round is the one timed: caches warm
            hits, seconds = 0, []
            for v, truth in zip(asked, exact, strict=True):
                began = time.perf_counter()
                rows = store.vector_search(v, pool, "true", ann)[:10]
                seconds.append(time.perf_counter() - began)
                hits += len({r["id"] for r in rows} & truth)
        out.append({"refine": ann.refine, "ef": ann.ef, "nprobes": ann.nprobes,
                    "recallAt10": round(hits / (10 * len(asked)), 3),
                    "p50_ms": round(statistics.median(seconds) * 1000, 1)})  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ann_study")
    parser.add_argument("index", type=Path, help="an index directory (its `chunks` table is copied)")
    parser.add_argument("--work", type=Path, default=Path.home() / ".cache" / "semsearch-bench" / "ann-study")
    parser.add_argument("--out", type=Path, default=HERE / "ann_study.json")
    parser.add_argument("--keep-index", action="store_true", help="measure the table's own index only")
    parser.add_argument("--only", action="append", help="an index configuration by name (repeatable)")
    parser.add_argument("--build", help=argparse.SUPPRESS)  # the child process: build one index
    args = parser.parse_args()
    if args.build:
        print(json.dumps(build(args.index, args.work, args.build)))
        return
    encoder = load(None, 256, 1, None, Settings().model_cache_dir)
    mix = corpus_chunks(corpus(args.work.parent), encoder.count_tokens)
    random.Random(1).shuffle(mix)
    queries = [" ".join(t.split()[:8]) for t in mix[:200] if len(t.split()) >= 4][:100]  # as bench-scale asks
    asked = list(encoder.embed(queries)[0])  # the model embeds queries and documents alike
    rows = lancedb.connect(str(args.index)).open_table("chunks").count_rows()
    results: dict[str, Any] = {"index": str(args.index), "rows": rows, "configs": {}}
    if args.keep_index:
        results["configs"]["as built"] = {"queries": recall_at_10(args.index, asked, QUERIES)}
        print(json.dumps(results), flush=True)
        args.out.write_text(json.dumps(results, indent=2) + "\n")
        return
    for name in args.only or INDICES:
        child = subprocess.run(
            [sys.executable, "-m", "bench.ann_study", str(args.index), "--work", str(args.work), "--build", name],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        built = json.loads(child.stdout.strip().splitlines()[-1])
        built["queries"] = recall_at_10(Path(built.pop("dir")), asked, QUERIES)
        results["configs"][name] = built
        print(name, json.dumps(built), flush=True)
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    shutil.rmtree(args.work, ignore_errors=True)


if __name__ == "__main__":
    main()
