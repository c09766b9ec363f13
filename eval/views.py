"""`python -m eval.views`: would a second vector per definition find the function a question
describes? Measured offline before it shipped (the `words` view is what the indexer now embeds
beside each chunk, `Chunk.names`), and kept to weigh other views against it.

The vector arm embeds a whole chunk: a definition's body (and, where short definitions are
packed, its neighbours) dilutes what its name and signature say. This replays the vector arm of
each code set's index (`python -m eval.code` builds them) with each definition also embedded
alone, in one of three *views*, and a chunk scored by the best of its own cosine and those of
the definitions starting in it:

- `signature`: path › symbol path, then the signature (what the chunker already puts first);
- `bare`: the signature alone;
- `words`: kind and name split into words, with the enclosing names (`method set from in Itertools`).

Function Hit@10 of the vector arm, for the chunk alone and each view; then leave-one-set-out:
the view chosen on the other sets, reported on the one left out.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import lancedb
import numpy as np
from rich.table import Table

from eval.code import BUILDERS, CODE_SETS
from eval.run import arguments, console, save
from semsearch.config import Settings
from semsearch.embedder.model import Encoder, load
from semsearch.indexer.syntax import Symbol, language_for, parse_symbols
from semsearch.text import embedded

VIEWS = ("signature", "bare", "words")


def view(kind: str, rel: str, symbol: Symbol) -> str:
    if kind == "signature":
        return embedded(f"{rel} › {symbol.symbol_path}", symbol.signature)
    if kind == "bare":
        return symbol.signature
    return symbol.in_words  # what the indexer embeds beside each chunk (`Chunk.names`)


def embed(encoder: Encoder, texts: list[str], query: bool = False) -> np.ndarray:
    return np.vstack([encoder.embed(texts[i : i + 64], query=query)[0] for i in range(0, len(texts), 64)])


def measure(encoder: Encoder, work: Path, name: str) -> dict[str, float]:
    data = BUILDERS[name](work)
    index = work / "data" / Settings().model_compute / f"{name}-syntax" / "index"
    if not index.is_dir():
        sys.exit(f"eval.views: no index of {name} at {index}; run `python -m eval.code --datasets {name}` first")
    rows = [r for r in lancedb.connect(str(index)).open_table("chunks").to_arrow().to_pylist() if r["folder"] == name]
    chunks = np.array([r["vector"] for r in rows], dtype=np.float32)
    symbols = [
        (rel, s)
        for rel in sorted({r["path"] for r in rows})
        if (language := language_for(rel))
        for s in parse_symbols((data.folder / rel).read_text(), language) or []
    ]
    by_path: dict[str, list[int]] = {}
    for j, r in enumerate(rows):
        by_path.setdefault(r["path"], []).append(j)
    owner = [
        next((j for j in by_path.get(rel, []) if rows[j]["start_line"] <= s.start_line <= rows[j]["end_line"]), -1)
        for rel, s in symbols
    ]
    qids = list(data.queries["test"])
    queries = embed(encoder, [data.queries["test"][q] for q in qids], query=True)
    base = queries @ chunks.T

    def hit(scores: np.ndarray) -> float:
        found = 0
        for i, qid in enumerate(qids):
            top = np.argsort(-scores[i])[:10]
            targets = data.definitions[qid]
            found += any(rows[j]["path"] == p and rows[j]["start_line"] <= line <= rows[j]["end_line"]
                         for j in top for p, line in targets)  # fmt: skip
        return round(found / len(qids), 4)

    out = {"chunk": hit(base), "queries": len(qids), "symbols": len(symbols)}
    for kind in VIEWS:
        cosines = queries @ embed(encoder, [view(kind, rel, s) for rel, s in symbols]).T
        scores = base.copy()
        for k, j in enumerate(owner):
            if j >= 0:
                scores[:, j] = np.maximum(scores[:, j], cosines[:, k])
        out[kind] = hit(scores)
    return out


def main() -> None:
    parser = arguments("python -m eval.views", [s for s in CODE_SETS if s != "code"])
    args = parser.parse_args()
    settings = Settings()
    encoder = load(None, settings.max_seq_length, 16, None, compute=settings.model_compute)
    found: dict[str, Any] = {}
    for name in args.datasets.split(","):
        found[name] = measure(encoder, args.work, name)
        console.print(name, found[name])
    table = Table(title="vector arm, function Hit@10: the chunk alone, and with one view per definition")
    for column in ("set", "chunk", *VIEWS, "view chosen on the others", "held out"):
        table.add_column(column)
    for name, row in found.items():
        others = [r for n, r in found.items() if n != name]
        chosen = max(VIEWS, key=lambda v: sum(r[v] - r["chunk"] for r in others)) if others else VIEWS[0]
        row["heldOut"] = {"view": chosen, "functionHit@10": row[chosen]}
        table.add_row(name, f"{row['chunk']:.3f}", *(f"{row[v]:.3f}" for v in VIEWS), chosen, f"{row[chosen]:.3f}")
    console.print(table)
    save(args.out, "definitionViews", found)


if __name__ == "__main__":
    main()
