"""The hybrid ranking's tuned parameters: one frozen object, one set of defaults.

The defaults live in `ranking.json` beside this module, which `make eval --write-ranking` writes
with the setting it chose on every set (each set's own figure comes from a choice made without
it). The settings' defaults are read from here, the engine ranks with `FusionParams`, and the
eval replays the same object: what is tuned offline is what is served.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

SHIPPED_FILE = Path(__file__).with_name("ranking.json")
_SHIPPED: dict[str, Any] = json.loads(SHIPPED_FILE.read_text())


@dataclass(frozen=True)
class FusionParams:
    """Everything the fusion of the two arms is tuned by (`engine.ranking.rank` uses it)."""

    rrf_k: float = _SHIPPED["rrf_k"]
    vector_weight: float = _SHIPPED["vector_weight"]
    lexical_weight: float = _SHIPPED["lexical_weight"]
    lexical_gain: float = _SHIPPED["lexical_gain"]  # a decisive BM25 top hit raises BM25's weight
    vector_gain: float = _SHIPPED["vector_gain"]  # a decisive vector top hit lowers it
    bias: float = _SHIPPED["bias"]  # log2 offset of BM25's weight when both arms are as decisive
    bound: float = _SHIPPED["bound"]  # the balance never moves BM25's weight beyond 2**±bound
    question_bias: float = _SHIPPED["question_bias"]  # log2 offset for a question in words
    lexical_only_weight: float = _SHIPPED["lexical_only_weight"]  # BM25's share for a chunk only it found
    # "rrf" fuses the arms' ranks (everything above); "convex" their scores, each arm's rescaled so
    # its best is 1 (`engine.fusion.convex`), the vector arm weighing `vector_share`, or
    # `question_vector_share` for a question in words.
    fusion: str = _SHIPPED["fusion"]
    vector_share: float = _SHIPPED["vector_share"]
    question_vector_share: float = _SHIPPED["question_vector_share"]

    @classmethod
    def plain(cls, rrf_k: float = _SHIPPED["rrf_k"]) -> FusionParams:
        """Reciprocal-rank fusion with equal arms and no per-query balance: the baseline."""
        return cls(rrf_k, 1.0, 1.0, 0.0, 0.0, 0.0, 4.0, 0.0, 1.0, "rrf")


SHIPPED = FusionParams()
# The informative-term gate (`lexical_max_doc_freq`): tuned with the fusion, so kept with it.
SHIPPED_GATE: float = _SHIPPED["lexical_max_doc_freq"]


def shipped_document(params: FusionParams, gate: float) -> dict[str, Any]:
    """What `ranking.json` holds for a chosen setting (`make eval --write-ranking`)."""
    return {
        f.name: getattr(params, f.name) if f.name == "fusion" else float(getattr(params, f.name))
        for f in fields(FusionParams)
    } | {  # fmt: skip
        "lexical_max_doc_freq": float(gate)
    }
