"""`make eval`, screening part: how many chunks of the eval corpora injection screening flags.

None of these corpora plants anything (scientific abstracts, FAQs, three libraries' source), so
every flag is a false positive: the rate is what a user would see labelled without cause. Read
from the indexes `eval.run` and `eval.code` built (each chunk's text, screened again here with
the shipped rules, so a rule change needs no re-index).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import lancedb
from rich.table import Table

from eval.run import arguments, console, save
from semsearch.config import Settings
from semsearch.corpus.screening import flags
from semsearch.indexer.syntax import language_for

SETS = ("scifact", "faq", "debian-faq", "gitfaq", "sqla-faq", "code", "rich-doc", "boltons-doc")


def rate(index: Path) -> dict[str, Any]:
    table = lancedb.connect(str(index)).open_table("chunks").to_arrow().select(["path", "text"])
    counts: Counter[str] = Counter()
    flagged = 0
    examples: list[dict[str, Any]] = []
    for row in table.to_pylist():
        found = flags(row["text"], prose=language_for(row["path"]) is None)
        if found:
            flagged += 1
            counts.update(found)
            if len(examples) < 5:
                examples.append({"path": row["path"], "flags": found, "text": row["text"][:160]})
    chunks = table.num_rows
    return {"chunks": chunks, "flagged": flagged, "rate": round(flagged / max(chunks, 1), 5),
            "byFlag": dict(counts), "examples": examples}  # fmt: skip


def main() -> None:
    args = arguments("python -m eval.screening", SETS).parse_args()
    found = {}
    for name in args.datasets.split(","):
        index = args.work / "data" / Settings().model_compute / name / "index"
        if (index / "chunks.lance").exists():
            found[name] = rate(index)
    table = Table(title="injection screening on the eval corpora (nothing planted: every flag is a false positive)")
    for column in ("set", "chunks", "flagged", "rate", "by flag"):
        table.add_column(column)
    for name, r in found.items():
        table.add_row(name, f"{r['chunks']:,}", str(r["flagged"]), f"{r['rate']:.3%}", json.dumps(r["byFlag"]))
    console.print(table)
    save(args.out, "screening", found)


if __name__ == "__main__":
    main()
