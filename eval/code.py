"""`make eval`, code part: paragraph chunks against syntax-aware chunks on the code sets, per arm.

Each code set is indexed twice through the real indexer, once per `SEMSEARCH_CODE_CHUNKER`
(two indexes side by side), and every query is asked of each arm:
- by file (`group=file`, as `eval.run` does): MRR@10 and nDCG@10 from the reference scorer;
- by definition, for the sets built from docstrings and doc comments (Python, and Rust, Go and
  TypeScript from `eval.codesets`): function Hit@10 — one of the ten best chunks (no grouping)
  covers the line where the definition the sentence documented starts — and, for each miss,
  where that definition ranks among a hundred chunks.
click's queries are ours and name no definition, so it is judged by file only. `--setting
NAME=VALUE` indexes a set again with a setting changed and records it beside the shipped figures.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
from rich.table import Table

from eval.codesets import BUILDERS as OTHER_LANGUAGES
from eval.datasets import BUILDERS, Dataset
from eval.run import MODES, Evaluator, arguments, as_run, console, index_dir, save, score
from tests.processes import start_api, start_embedder

CODE_SETS = ("code", "rich-doc", "boltons-doc", *OTHER_LANGUAGES)
BUILDERS = BUILDERS | OTHER_LANGUAGES
DEPTH = 100  # chunks asked for to see where a definition that missed the ten best ranks
CHUNKERS = ("paragraph", "syntax")


def chunk_hits(http: httpx.Client, data: Dataset, query: str, mode: str, k: int) -> list[dict[str, Any]]:
    body = {"query": query, "k": k, "mode": mode, "minScore": -1, "folder": [data.name]}
    response = http.post("/v1/search", json=body)
    response.raise_for_status()
    return response.json()["hits"]  # type: ignore[no-any-return]


def rank_of(hits: list[dict[str, Any]], targets: list[tuple[str, int]]) -> int | None:
    """The rank (1-based) of the first chunk that covers one of the definitions' lines."""
    for n, h in enumerate(hits, 1):
        if any(h["relPath"] == path and h["startLine"] <= line <= h["endLine"] for path, line in targets):
            return n
    return None


def where(hits: list[bool], deep: list[int | None]) -> dict[str, float]:
    """Function Hit@10 (ten chunks asked for, as a user asks), and where each miss ranks when a
    hundred are asked for: within 30 (a ranking problem), or further down or not at all (what
    is embedded and indexed for the definition does not match the question)."""
    misses = [r for hit, r in zip(hits, deep, strict=True) if not hit]
    share = {"functionHit@10": sum(hits),
             "rank11to30": sum(1 for r in misses if r is not None and r <= 30),
             "rank31to100": sum(1 for r in misses if r is not None and r > 30),
             "absent": sum(1 for r in misses if r is None)}  # fmt: skip
    return {k: round(v / len(hits), 4) for k, v in share.items()}


def measure(evaluator: Evaluator, data: Dataset, env: dict[str, str]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    with httpx.Client(base_url=env["SEMSEARCH_URL"], timeout=120) as http:
        for mode in MODES:
            run = {qid: as_run(evaluator.docs(data, evaluator.ask(http, data, q, mode)["hits"]))
                   for qid, q in data.queries["test"].items()}  # fmt: skip
            scored = score(data.qrels["test"], run)
            row = {"MRR@10": scored["MRR@10"], "nDCG@10": scored["nDCG@10"]}
            if data.definitions:
                asked = data.queries["test"].items()
                hits = [rank_of(chunk_hits(http, data, q, mode, 10), data.definitions[qid]) is not None
                        for qid, q in asked]  # fmt: skip
                deep = [rank_of(chunk_hits(http, data, q, mode, DEPTH), data.definitions[qid]) for qid, q in asked]
                row |= where(hits, deep)
            out[mode] = row
    return out


def main() -> None:
    parser = arguments("python -m eval.code", CODE_SETS)
    parser.add_argument("--chunkers", default=",".join(CHUNKERS))
    parser.add_argument("--setting", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting to try (SEMSEARCH_CHUNK_TOKENS=64), indexed apart, kept beside")  # fmt: skip
    args = parser.parse_args()
    tried = dict(s.split("=", 1) for s in args.setting)
    label = "".join(f"-{k.removeprefix('SEMSEARCH_').lower()}={v}" for k, v in sorted(tried.items()))
    embedder, addr = start_embedder(args.work / "embedder.log")
    evaluator = Evaluator(args.work, addr)
    found: dict[str, Any] = {}
    try:
        for name in args.datasets.split(","):
            data = BUILDERS[name](args.work)
            key = name + label  # a setting tried is recorded beside the shipped figures, not over them
            found[key] = {"queries": len(data.queries["test"]), "source": data.source, "settings": tried}
            for chunker in args.chunkers.split(","):
                extra = {"SEMSEARCH_CODE_CHUNKER": chunker} | tried
                data_dir = index_dir(args.work, data, chunker).with_name(f"{name}-{chunker}{label}")
                service, env = start_api(data_dir, addr, **extra)
                try:
                    summary = evaluator.index(data, env | extra)
                    started = time.perf_counter()
                    metrics = measure(evaluator, data, env)
                    chunks = httpx.get(f"{env['SEMSEARCH_URL']}/v1/status").json()["chunks"]
                finally:
                    service.stop()
                found[key][chunker] = {"metrics": metrics, "chunks": chunks, "indexSeconds": summary["wallSeconds"],
                                        "querySeconds": round(time.perf_counter() - started, 1)}  # fmt: skip
                console.print(f"{key} {chunker}: {chunks} chunks, {metrics}")
    finally:
        embedder.stop()
    report(found)
    # Merged by set and chunker: a run of some sets (or one chunker) keeps the others' last figures.
    earlier = json.loads(args.out.read_text()).get("codeChunking", {}) if args.out.exists() else {}
    save(args.out, "codeChunking", earlier | {key: earlier.get(key, {}) | per for key, per in found.items()})


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
    misses = Table(title="code sets, syntax-aware: where the definition ranks among 100 chunks (share of queries)")
    for column in ("set", "arm", "top 10", "11-30", "31-100", "absent"):
        misses.add_column(column)
    for name, per in found.items():
        for mode in MODES:
            m = per.get("syntax", {}).get("metrics", {}).get(mode, {})
            if "rank11to30" in m:
                misses.add_row(
                    name, mode, *(f"{m[k]:.3f}" for k in ("functionHit@10", "rank11to30", "rank31to100", "absent"))
                )
    console.print(misses)


if __name__ == "__main__":
    main()
