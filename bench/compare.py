"""`make bench-compare`: this checkout's API against another commit's, side by side, over the tables
`make bench` built — the "before" column for a change to the query path.

Both APIs read the same index, one at a time, each a fresh process, alternating in rounds (the
machines are shared and noisy: a figure means something only beside the other arm's, measured in the
same minutes). Each arm gets a fresh embedder too, so neither inherits the other's warm state.
Per table and arm: one client's p50 / p99 and stage medians (Server-Timing), eight clients'
throughput, the API's peak RSS; the medians over the rounds, and every round. Nothing asserts.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import lancedb
from rich.console import Console
from rich.table import Table

from bench.run import query_latency, rss_peak_mb, wait_for_copy
from tests.processes import start_api, start_embedder

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
console = Console()


def checkout(rev: str, work: Path) -> Path:
    """The commit's tree in a git worktree under `work` (made once per commit), with its gRPC stubs."""
    sha = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--verify", f"{rev}^{{commit}}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    tree = work / f"before-{sha[:12]}"
    if not (tree / "src" / "semsearch").is_dir():
        shutil.rmtree(tree, ignore_errors=True)
        subprocess.run(["git", "-C", str(REPO), "worktree", "prune"], check=True)
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), sha], check=True)
    subprocess.run([sys.executable, str(tree / "src" / "semsearch" / "proto" / "codegen.py")], check=True)
    return tree


def questions(data_dir: Path, count: int = 150) -> list[str]:
    """Lines of the table's own chunks (as `make bench` asks), in a seeded order."""
    table = lancedb.connect(str(data_dir / "index")).open_table("chunks")
    texts = table.search().select(["text"]).limit(3000).to_arrow()["text"].to_pylist()
    random.Random(7).shuffle(texts)
    return [" ".join(t.split()[:8]) for t in texts if len(t.split()) >= 4][:count]


def arm(data_dir: Path, queries: list[str], clients: int, log: Path, **env: str) -> dict[str, Any]:
    embedder, address = start_embedder(log)
    api, api_env = start_api(data_dir, address, **env)
    try:
        url = api_env["SEMSEARCH_URL"]
        wait_for_copy(url, data_dir, within_s=1800)  # 1M chunks held: ~2 min on 2 cores
        one = query_latency(url, queries)
        many = query_latency(url, queries * 2, clients=clients)
        return {
            "p50_ms": one["p50_ms"],
            "p99_ms": one["p99_ms"],
            "stagesP50_ms": one["stagesP50_ms"],
            f"clients{clients}_qps": many["qps"],
            f"clients{clients}_p50_ms": many["p50_ms"],
            "apiPeakRssMb": round(rss_peak_mb(api.pid), 1),
        }
    finally:
        api.stop()
        embedder.stop()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.compare")
    parser.add_argument("--before", default="HEAD~1", help="the commit to compare with (default: HEAD~1)")
    parser.add_argument("--work", type=Path, default=Path.home() / ".cache" / "semsearch-bench")
    parser.add_argument("--tables", default="corpus,synthetic10000,synthetic100000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--out", type=Path, default=HERE / "compare.json")
    parser.add_argument(
        "--resident-rows", type=int, help="SEMSEARCH_RESIDENT_ROWS for both arms: a table over the default bound, held"
    )
    args = parser.parse_args()
    work: Path = args.work
    tables = [work / "run" / name for name in args.tables.split(",")]
    missing = [t.name for t in tables if not (t / "index").is_dir()]
    if missing:
        sys.exit(f"no bench table {', '.join(missing)} under {work / 'run'}: run `make bench` first, it builds them")
    before = checkout(args.before, work)
    # The other commit's modules first on the path; PYTHONSAFEPATH keeps the working directory off it.
    held = {} if args.resident_rows is None else {"SEMSEARCH_RESIDENT_ROWS": str(args.resident_rows)}
    arms = {"before": {"PYTHONPATH": str(before / "src"), **held}, "after": held}
    results: dict[str, Any] = {"before": args.before, "rounds": args.rounds, "tables": {}}
    for data_dir in tables:
        queries = questions(data_dir)
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in arms}
        for r in range(args.rounds):
            for name, env in arms.items():
                entry = arm(data_dir, queries, args.clients, work / "run" / "compare-embedder.log", **env)
                runs[name].append(entry)
                console.print(
                    f"{data_dir.name} {name} round {r + 1}: p50 {entry['p50_ms']} ms, p99 {entry['p99_ms']} ms"
                )
        results["tables"][data_dir.name] = {name: summary(entries, args.clients) for name, entries in runs.items()}
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    report(results, args.clients)
    console.print(f"wrote {args.out}")


def summary(entries: list[dict[str, Any]], clients: int) -> dict[str, Any]:
    def median(key: str) -> float:
        return round(statistics.median(e[key] for e in entries), 2)

    stages = {
        k: round(statistics.median(e["stagesP50_ms"].get(k, 0.0) for e in entries), 2)
        for k in entries[0]["stagesP50_ms"]
    }
    return {
        "p50_ms": median("p50_ms"),
        "p99_ms": median("p99_ms"),
        f"clients{clients}_qps": median(f"clients{clients}_qps"),
        "apiPeakRssMb": max(e["apiPeakRssMb"] for e in entries),
        "stagesP50_ms": stages,
        "rounds": entries,
    }


def report(results: dict[str, Any], clients: int) -> None:
    table = Table(title=f"this checkout against {results['before']}, medians of {results['rounds']} rounds")
    for column in ("table", "arm", "p50 / p99 ms", f"{clients} clients q/s", "API peak RSS MB", "stages p50 ms"):
        table.add_column(column)
    for name, arms in results["tables"].items():
        for arm_name, s in arms.items():
            stages = " · ".join(f"{k} {v}" for k, v in s["stagesP50_ms"].items() if v)
            qps = s[f"clients{clients}_qps"]
            table.add_row(name, arm_name, f"{s['p50_ms']} / {s['p99_ms']}", str(qps), str(s["apiPeakRssMb"]), stages)
    console.print(table)


if __name__ == "__main__":
    main()
