"""Memory while an agent searches over MCP, the two ways semsearch can serve it, side by side.

The corpus is the one the comparison in issue 28 used: the Flask and Requests sources (sdists
from PyPI). Each arm indexes it, then answers the same searches through the official MCP client
over stdio, and the resident memory (VmRSS, and the peak VmHWM) of every process the agent's
searches need is read from /proc:

- three processes: the embedder, the API and the MCP bridge, as `semsearch serve` + `semsearch
  mcp` run them (the indexer worker that built the index is reported apart: searching does not
  need it);
- standalone: `semsearch mcp --standalone FOLDERS`, one process.

Each arm is measured twice per round: right after it indexed the corpus (the writer holds what
writing left), and freshly started on that index (what a laptop's agent meets every morning). The
arms alternate (`--rounds`, default 2) and each round's figures are kept; the table shows the
median. Writes bench/serving.json. Run alone: `python -m bench.serving`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from rich.console import Console
from rich.table import Table

from tests.processes import Service, clean_env, free_port, start_api, start_embedder, start_worker

HERE = Path(__file__).parent
SDISTS = ("flask==3.1.0", "requests==2.32.3")
QUERIES = (
    "how are blueprints registered on the application",
    "retry a request when the connection drops",
    "where is the session cookie signed",
    "stream a large response body in chunks",
    "url routing with converters",
    "verify TLS certificates with a custom bundle",
    "teardown callbacks after a request",
    "proxy settings from the environment",
)
SEMSEARCH = str(Path(sys.executable).parent / "semsearch")
console = Console()


def corpus(work: Path) -> list[Path]:
    roots = []
    for spec in SDISTS:
        name, version = spec.split("==")
        root = work / f"{name}-{version}"
        if not root.is_dir():
            download = work / "download"
            pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:"]
            subprocess.run([*pip, spec, "-d", str(download)], check=True)
            with tarfile.open(next(download.glob(f"{name}-{version}.tar.gz"))) as archive:
                archive.extractall(work, filter="data")
        roots.append(root)
    return roots


def memory_mb(pid: int) -> dict[str, float]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return {"rssMb": round(fields["VmRSS"], 1), "peakMb": round(fields["VmHWM"], 1)}


def bridge_pids(parent: int) -> list[int]:
    """The processes the MCP client spawned (the stdio server is this process's child)."""
    out = subprocess.run(["ps", "--ppid", str(parent), "-o", "pid=,args="], capture_output=True, text=True).stdout
    return [int(line.split()[0]) for line in out.splitlines() if "semsearch" in line and " mcp" in line]


async def searches(params: StdioServerParameters, index_first: bool) -> tuple[dict[str, float], dict[str, Any]]:
    """Runs the queries through one MCP session; returns the bridge's memory and the search p50."""
    async with Client(params) as client:
        if index_first:
            deadline = time.monotonic() + 1800
            result = await client.call_tool("index", {})
            while '"state": "done"' not in result.content[0].text:  # type: ignore[union-attr]
                assert time.monotonic() < deadline, result.content
                run = json.loads(result.content[0].text)["id"]  # type: ignore[union-attr]
                result = await client.call_tool("index_status", {"runId": run})
                await anyio.sleep(0.5)
        await client.call_tool("search", {"query": "warm up"})
        took = []
        for query in QUERIES * 3:
            started = time.perf_counter()
            result = await client.call_tool("search", {"query": query})
            took.append(time.perf_counter() - started)
            assert not result.is_error, result.content
        (pid,) = bridge_pids(os.getpid())
        return memory_mb(pid), {"searchP50Ms": round(statistics.median(took) * 1000, 1)}


def three_processes(work: Path, roots: list[Path], build: bool) -> dict[str, Any]:
    """`build`: register and index first (the API holds what writing left); else serve the index
    the last build left, freshly started."""
    data = work / "three"
    embedder, address = start_embedder(data / "embedder.log")
    api, env = start_api(data, address)
    worker: Service | None = None
    try:
        if build:
            for root in roots:
                url = f"{env['SEMSEARCH_URL']}/v1/folders"
                httpx.post(url, json={"path": str(root)}, timeout=30).raise_for_status()
            worker = start_worker(env, data / "worker.log")
            subprocess.run([SEMSEARCH, "index"], env=env, check=True, capture_output=True)
        params = StdioServerParameters(command=SEMSEARCH, args=["mcp"], env=env)
        bridge, timing = anyio.run(searches, params, False)
        parts = {"embedder": memory_mb(embedder.pid), "api": memory_mb(api.pid), "bridge": bridge}
        return {
            "parts": parts,
            **({"worker": memory_mb(worker.pid)} if worker is not None else {}),
            "rssMb": round(sum(p["rssMb"] for p in parts.values()), 1),
            "peakMb": round(sum(p["peakMb"] for p in parts.values()), 1),
            **timing,
        }
    finally:
        for part in (worker, api, embedder):
            if part is not None:
                part.stop()


def standalone(work: Path, roots: list[Path], build: bool) -> dict[str, Any]:
    data = work / "standalone"
    env = clean_env(SEMSEARCH_DATA_DIR=str(data), SEMSEARCH_PORT=str(free_port()), SEMSEARCH_CORPUS_ROOT="/")
    folders = [str(r) for r in roots] if build else []
    params = StdioServerParameters(command=SEMSEARCH, args=["mcp", "--standalone", *folders], env=env)
    whole, timing = anyio.run(searches, params, build)
    return whole | timing


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.serving")
    parser.add_argument("--work", type=Path, default=Path.home() / ".cache" / "semsearch-bench" / "serving")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=HERE / "serving.json")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    roots = corpus(args.work)
    rounds: list[dict[str, Any]] = []
    for n in range(args.rounds):
        for arm in ("three", "standalone"):  # a fresh index each round
            shutil.rmtree(args.work / arm, ignore_errors=True)
        entry: dict[str, Any] = {}
        for build in (True, False):  # indexed by these processes; then a fresh start on that index
            phase = "built" if build else "served"
            console.print(f"round {n + 1}, {phase}: three processes")
            three = three_processes(args.work, roots, build)
            console.print(f"round {n + 1}, {phase}: standalone")
            alone = standalone(args.work, roots, build)
            ratio = round(alone["rssMb"] / three["rssMb"], 3)
            entry[phase] = {"threeProcesses": three, "standalone": alone, "ratio": ratio}
        rounds.append(entry)
    results = {"corpus": list(SDISTS), "queries": len(QUERIES) * 3, "rounds": rounds}
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    report(results)
    console.print(f"wrote {args.out}")


def report(results: dict[str, Any]) -> None:
    table = Table(title="MCP searches: resident memory of what they need (median of rounds)")
    for column in ("", "RSS MB", "peak MB", "search p50 ms", "standalone / three, each round"):
        table.add_column(column)

    def median(phase: str, arm: str, key: str) -> str:
        return str(round(statistics.median(r[phase][arm][key] for r in results["rounds"]), 1))

    for phase, when in (("built", "after indexing"), ("served", "fresh start on the index")):
        ratios = ", ".join(str(r[phase]["ratio"]) for r in results["rounds"])
        for arm, label in (("threeProcesses", "embedder + API + bridge"), ("standalone", "mcp --standalone")):
            cells = [median(phase, arm, k) for k in ("rssMb", "peakMb", "searchP50Ms")]
            table.add_row(f"{label}, {when}", *cells, ratios if arm == "standalone" else "")
    console.print(table)


if __name__ == "__main__":
    main()
