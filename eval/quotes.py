"""Quote units: every set's own text asked for by a line a user half remembers.

A known-item search the other units never ask: a sentence of one of the set's documents (for a
code set, a line of its code) with a quarter of its words dropped, whose document is the one
relevant answer. The set's paraphrases — claims, questions, doc comments — judge whether search
understands; these judge whether it still finds what it was quoted. The lines come from the
set's index (its chunks, in a seeded random order), so they are what the chunker kept; nothing
here is written by us.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from pathlib import Path

import lancedb

SPLIT = "quotes"
QUERIES = 80  # per set
DROPPED = 0.25  # share of a line's words left out, each word by itself
SENTENCE = re.compile(r"(?<=[.!?])\s+|\n")
# Markup lines (headings, tables, code fences, prompts) are not what anyone quotes from prose.
MARKUP = ("#", "|", "`", ">>>", "$")


def lines_of(text: str, code: bool) -> list[str]:
    """What a user could quote from one chunk: a sentence of 9-30 words, or a code line of 5+."""
    if code:
        return [line.strip() for line in text.splitlines() if len(line.split()) >= 5]
    return [s.strip() for s in SENTENCE.split(text) if 9 <= len(s.split()) <= 30 and not s.strip().startswith(MARKUP)]


def build(name: str, index: Path, code: bool, doc_id: Callable[[str], str]) -> tuple[dict[str, str], list[str]]:
    """(query id -> quote, qrels lines) for one set from its index's chunks."""
    rows = lancedb.connect(str(index)).open_table("chunks").to_arrow().select(["path", "text"]).to_pylist()
    rows.sort(key=lambda r: (r["path"], r["text"]))  # the table's order is the writer's
    pick = random.Random(f"{name}-{SPLIT}")
    pick.shuffle(rows)
    queries: dict[str, str] = {}
    qrels = ["query-id\tcorpus-id\tscore"]
    for row in rows:
        candidates = lines_of(row["text"], code)
        if not candidates:
            continue
        words = pick.choice(candidates).split()
        kept = " ".join(w for w in words if pick.random() >= DROPPED)
        qid = f"q{len(queries)}"
        queries[qid] = kept
        qrels.append(f"{qid}\t{doc_id(row['path'])}\t1")
        if len(queries) >= QUERIES:
            break
    return queries, qrels


def split(work: Path, name: str, index: Path, code: bool, doc_id: Callable[[str], str]) -> tuple[dict[str, str], Path]:
    """The set's quote queries and qrels file, built once from its index and kept under `work`."""
    kept = work / "qrels" / f"{name}-{SPLIT}.json"
    qrels = work / "qrels" / f"{name}-{SPLIT}.tsv"
    if not kept.exists() or not qrels.exists():
        queries, lines = build(name, index, code, doc_id)
        kept.parent.mkdir(parents=True, exist_ok=True)
        qrels.write_text("\n".join(lines) + "\n")
        kept.write_text(json.dumps(queries))
    return json.loads(kept.read_text()), qrels
