"""Secret redaction measured on a corpus (`eval/redaction.py`): generated keys of every kind in
the places real repositories hold them, and look-alikes that must stay. Both rates are 1.0 today;
a pattern change that loses a kind or starts eating hashes fails here, naming the case."""

from __future__ import annotations

from eval.redaction import corpus, score
from semsearch.corpus.secrets import TOKENS, VALUES


def test_every_planted_key_is_caught_and_no_look_alike_is_touched() -> None:
    result = score(corpus())
    assert set(result["recallByKind"]) == {"private-key", *TOKENS, *VALUES}  # every kind is in the corpus
    assert result["missed"] == [] and result["recall"] == 1.0
    assert result["falsePositives"] == [] and result["precision"] == 1.0
    assert result["planted"] >= 300 and result["lookAlikes"] >= 100
