"""`make eval`: retrieval quality of the real pipeline (indexer -> embedder -> API -> search).

For each set, one index is built (incrementally: a rerun reuses it) and every query is
asked three times through `POST /v1/search` — vector only, BM25 only, hybrid — as
documents (`group=file`, best chunk per file), 100 per query, abstention off. Scores come
from the reference scorer in ../shared/eval/score.py.

Fusion is tuned on SciFact **train** only (`--tune`): the API returns each arm's candidates
(`arms: true`), and the grid over RRF k and the per-query arm balance (gains, bias) is fused
offline with the API's own `api.fusion.rrf` and `lexical_balance`. The chosen values are what
`semsearch/config.py` ships; test numbers use those defaults.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from eval.datasets import BUILDERS, HERE, SHARED, Dataset
from semsearch.api.fusion import Candidate, FusionParams, fuse
from semsearch.config import Settings
from semsearch.processes import Service, start_api, start_embedder

MODES = ("vector", "lexical", "hybrid")
ARMS = ("vector", "lexical")
METRICS = ("nDCG@10", "Recall@10", "Recall@100", "MRR@10")
console = Console()


def load_scorer() -> Any:
    spec = importlib.util.spec_from_file_location("score", SHARED / "score.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCORER = load_scorer()


def score(qrels: Path, run: dict[str, dict[str, float]]) -> dict[str, float]:
    """nDCG@10, Recall@10, Recall@100, MRR@10 with the reference scorer (trec_eval conventions)."""
    mean, _ = SCORER.evaluate(SCORER.load_qrels(str(qrels)), run, False)
    return {m: round(float(mean[m]), 4) for m in METRICS}


def as_run(ranked: list[str]) -> dict[str, float]:
    return {doc: float(len(ranked) - i) for i, doc in enumerate(ranked)}


class Evaluator:
    def __init__(self, work: Path, embedder_addr: str) -> None:
        self.work = work
        self.embedder_addr = embedder_addr

    def index(self, data: Dataset, env: dict[str, str]) -> dict[str, Any]:
        url = env["SEMSEARCH_URL"]
        names = [f["name"] for f in httpx.get(f"{url}/v1/folders").json()]
        if data.name not in names:
            httpx.post(f"{url}/v1/folders", json={"path": str(data.folder), "name": data.name}).raise_for_status()
        started = time.perf_counter()
        result = subprocess.run(
            [sys.executable, "-m", "semsearch.indexer", data.name], env=env, capture_output=True, text=True, check=False
        )
        if result.returncode != 0:
            sys.exit(f"eval: indexing {data.name} failed:\n{result.stderr[-3000:]}")
        summary = json.loads(result.stdout.strip().splitlines()[-1])
        summary["wallSeconds"] = round(time.perf_counter() - started, 1)
        return summary  # type: ignore[no-any-return]

    @staticmethod
    def docs(data: Dataset, hits: list[dict[str, Any]], limit: int = 100) -> list[str]:
        seen: dict[str, None] = {}
        for hit in hits:
            seen.setdefault(data.doc_id(hit["relPath"]), None)
            if len(seen) >= limit:
                break
        return list(seen)

    def ask(self, http: httpx.Client, data: Dataset, query: str, mode: str, arms: bool = False) -> dict[str, Any]:
        body = {
            "query": query,
            "k": 100,
            "mode": mode,
            "group": "file",
            "perFile": 1,
            "minScore": -1,
            "folder": [data.name],
            "arms": arms,
        }
        response = http.post("/v1/search", json=body)
        response.raise_for_status()
        return response.json()  # type: ignore[no-any-return]

    def evaluate(self, data: Dataset, env: dict[str, str], split: str) -> dict[str, dict[str, float]]:
        runs: dict[str, dict[str, dict[str, float]]] = {m: {} for m in MODES}
        with httpx.Client(base_url=env["SEMSEARCH_URL"], timeout=120) as http:
            for qid, text in data.queries[split].items():
                for mode in MODES:
                    runs[mode][qid] = as_run(self.docs(data, self.ask(http, data, text, mode)["hits"]))
        return {mode: score(data.qrels[split], runs[mode]) for mode in MODES}

    def collect_arms(self, data: Dataset, env: dict[str, str], split: str) -> dict[str, dict[str, Any]]:
        """Each arm's candidates per query (id, path, cosine, BM25 score): fusion replayed offline."""
        out = {}
        with httpx.Client(base_url=env["SEMSEARCH_URL"], timeout=120) as http:
            for qid, text in data.queries[split].items():
                arms = self.ask(http, data, text, "hybrid", arms=True)["arms"]
                out[qid] = {arm: [(a["id"], a["relPath"], a["cosine"], a["bm25"]) for a in arms[arm]] for arm in ARMS}
        return out


def fuse_offline(data: Dataset, arms: dict[str, dict[str, Any]], params: FusionParams) -> dict[str, dict[str, float]]:
    """What the API's hybrid ranking would return, from each arm's candidates: the API's own `fuse`."""
    run = {}
    for qid, arm in arms.items():
        paths = {a[0]: a[1] for a in arm["vector"]} | {a[0]: a[1] for a in arm["lexical"]}
        fused, _ = fuse(
            [Candidate(a[0], a[2]) for a in arm["vector"]], [Candidate(a[0], a[3]) for a in arm["lexical"]], params
        )
        ranked: dict[str, None] = {}
        for f in fused:
            ranked.setdefault(data.doc_id(paths[f.id]), None)
            if len(ranked) >= 100:
                break
        run[qid] = as_run(list(ranked))
    return run


def tune(evaluator: Evaluator, data: Dataset, data_dir: Path) -> dict[str, Any]:
    """Grid search on SciFact train only: RRF k x the per-query balance's gains and bias."""
    service, env = start_api(data_dir, evaluator.embedder_addr)
    try:
        arms = evaluator.collect_arms(data, env, "train")
    finally:
        service.stop()
    grid = [FusionParams(k) for k in (5, 10, 30, 60)] + [
        FusionParams(k, lexical_gain=lg, vector_gain=vg, bias=b)
        for k in (10, 30, 60)
        for lg in (6, 9, 12)
        for vg in (12, 18, 24)
        for b in (-0.5, 0.0, 0.5)
    ]
    table = [asdict(f) | score(data.qrels["train"], fuse_offline(data, arms, f)) for f in grid]
    best = max(table, key=lambda row: row["nDCG@10"])
    console.print(f"  tuned on train: best {best}")
    return {"best": best, "grid": table}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m eval.run")
    parser.add_argument("--datasets", default="scifact,faq,code")
    # Outside the repository: inside it, git (rightly) hides the ignored work folder from the indexer.
    parser.add_argument("--work", type=Path, default=Path.home() / ".cache" / "semsearch-eval")
    parser.add_argument("--tune", action="store_true", help="grid-search fusion on SciFact train first")
    parser.add_argument("--out", type=Path, default=HERE / "results.json")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    embedder, addr = start_embedder(args.work / "embedder.log")
    evaluator = Evaluator(args.work, addr)
    results: dict[str, Any] = {"datasets": {}}
    try:
        for name in args.datasets.split(","):
            data = BUILDERS[name](args.work)
            # One index per compute type: the API refuses vectors of the other one (their model ids differ).
            data_dir = args.work / "data" / Settings().model_compute / name
            console.print(f"[bold]{name}[/]: indexing {data.folder}")
            service, env = start_api(data_dir, addr)
            try:
                summary = evaluator.index(data, env)
                console.print(f"  {summary}")
            finally:
                service.stop()
            entry: dict[str, Any] = {"index": summary, "queries": {s: len(q) for s, q in data.queries.items()}}
            if args.tune and name == "scifact":
                entry["tuning"] = tune(evaluator, data, data_dir)
            service, env = start_api(data_dir, addr)
            try:
                split = "test"
                started = time.perf_counter()
                entry["test"] = evaluator.evaluate(data, env, split)
                entry["querySeconds"] = round(time.perf_counter() - started, 1)
            finally:
                service.stop()
            results["datasets"][name] = entry
            report(name, entry["test"])
    finally:
        embedder.stop()
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    console.print(f"wrote {args.out}")


def report(name: str, metrics: dict[str, dict[str, float]]) -> None:
    table = Table(title=f"{name} (test)")
    table.add_column("arm")
    for metric in METRICS:
        table.add_column(metric, justify="right")
    for mode in MODES:
        table.add_row(mode, *(f"{metrics[mode][m]:.4f}" for m in METRICS))
    console.print(table)


if __name__ == "__main__":
    main()


__all__ = ["Service", "main"]
