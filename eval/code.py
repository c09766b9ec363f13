"""`make eval`, code part: paragraph chunks against syntax-aware chunks on the code sets, per arm.

Each code set is indexed twice through the real indexer, once per `SEMSEARCH_CODE_CHUNKER`
(two indexes side by side), and every query is asked of each arm:
- by file (`group=file`, as `eval.run` does): MRR@10 and nDCG@10 from the reference scorer;
- by definition, for the sets built from docstrings: function Hit@10 — one of the ten best
  chunks (no grouping) covers the line of the `def`/`class` the query's sentence came from.
click's queries are ours and name no definition, so it is judged by file only.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
from rich.table import Table

from eval.datasets import BUILDERS, Dataset
from eval.run import MODES, Evaluator, arguments, as_run, console, save, score
from semsearch.config import Settings
from tests.processes import start_api, start_embedder

CODE_SETS = ("code", "rich-doc", "boltons-doc")
CHUNKERS = ("paragraph", "syntax")


def chunk_hits(http: httpx.Client, data: Dataset, query: str, mode: str) -> list[dict[str, Any]]:
    body = {"query": query, "k": 10, "mode": mode, "minScore": -1, "folder": [data.name]}
    response = http.post("/v1/search", json=body)
    response.raise_for_status()
    return response.json()["hits"]  # type: ignore[no-any-return]


def covers(hits: list[dict[str, Any]], targets: list[tuple[str, int]]) -> bool:
    return any(h["relPath"] == path and h["startLine"] <= line <= h["endLine"] for h in hits for path, line in targets)


def measure(evaluator: Evaluator, data: Dataset, env: dict[str, str]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    with httpx.Client(base_url=env["SEMSEARCH_URL"], timeout=120) as http:
        for mode in MODES:
            run = {qid: as_run(evaluator.docs(data, evaluator.ask(http, data, q, mode)["hits"]))
                   for qid, q in data.queries["test"].items()}  # fmt: skip
            scored = score(data.qrels["test"], run)
            row = {"MRR@10": scored["MRR@10"], "nDCG@10": scored["nDCG@10"]}
            if data.definitions:
                found = [covers(chunk_hits(http, data, q, mode), data.definitions[qid])
                         for qid, q in data.queries["test"].items()]  # fmt: skip
                row["functionHit@10"] = round(sum(found) / len(found), 4)
            out[mode] = row
    return out


def main() -> None:
    parser = arguments("python -m eval.code", CODE_SETS)
    parser.add_argument("--chunkers", default=",".join(CHUNKERS))
    args = parser.parse_args()
    embedder, addr = start_embedder(args.work / "embedder.log")
    evaluator = Evaluator(args.work, addr)
    found: dict[str, Any] = {}
    try:
        for name in args.datasets.split(","):
            data = BUILDERS[name](args.work)
            found[name] = {"queries": len(data.queries["test"]), "source": data.source}
            for chunker in args.chunkers.split(","):
                extra = {"SEMSEARCH_CODE_CHUNKER": chunker}
                data_dir = args.work / "data" / Settings().model_compute / f"{name}-{chunker}"
                service, env = start_api(data_dir, addr, **extra)
                try:
                    summary = evaluator.index(data, env | extra)
                    started = time.perf_counter()
                    metrics = measure(evaluator, data, env)
                    chunks = httpx.get(f"{env['SEMSEARCH_URL']}/v1/status").json()["chunks"]
                finally:
                    service.stop()
                found[name][chunker] = {"metrics": metrics, "chunks": chunks, "indexSeconds": summary["wallSeconds"],
                                        "querySeconds": round(time.perf_counter() - started, 1)}  # fmt: skip
                console.print(f"{name} {chunker}: {chunks} chunks, {metrics}")
    finally:
        embedder.stop()
    report(found)
    save(args.out, "codeChunking", found)


def report(found: dict[str, Any]) -> None:
    table = Table(title="code sets: paragraph vs syntax-aware chunks (file MRR@10 / nDCG@10 / function Hit@10)")
    for column in ("set", "chunker", "chunks", *MODES):
        table.add_column(column)
    for name, per in found.items():
        for chunker in CHUNKERS:
            if chunker not in per:
                continue
            cells = []
            for mode in MODES:
                m = per[chunker]["metrics"][mode]
                hit = f" / {m['functionHit@10']:.3f}" if "functionHit@10" in m else ""
                cells.append(f"{m['MRR@10']:.3f} / {m['nDCG@10']:.3f}{hit}")
            table.add_row(name, chunker, str(per[chunker]["chunks"]), *cells)
    console.print(table)


if __name__ == "__main__":
    main()
