"""The eval sets' builders: the held-out code sets (doc comments removed with line numbers kept,
each asked sentence tied to the line of the definition it documented: `eval/codesets.py`), and
every set's quote unit (`eval/quotes.py`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval.codesets import GO, RUST, TYPESCRIPT, Doc, blank_doc_comments, first_sentence

RUST_SOURCE = """\
//! Sums and other folds over slices of numbers.

/// Returns the sum of all items in the slice, or zero when it is empty.
///
/// More detail that is not asked.
#[inline]
pub fn total(items: &[i64]) -> i64 {
    // a plain comment stays: it is code, not documentation
    items.iter().sum()
}

pub struct Stats;

impl Stats {
    /// Computes the arithmetic mean of the [`Stats`] values seen so far.
    pub fn mean(&self) -> f64 { 0.0 }
}
"""

GO_SOURCE = """\
// Package folds sums numbers.
package folds

// Total returns the sum of all the items in the slice given.
func Total(items []int) int {
	// Ranges over the items: an ordinary comment inside a function.
	n := 0
	for _, v := range items {
		n += v
	}
	return n
}

// A note above the code, then a blank line: documents nothing below.

func helper() {}
"""

TS_SOURCE = """\
/**
 * Applies an accumulator over the source values and emits each {@link Result} as it goes.
 * @param seed the initial value
 */
export function scan<T>(seed: T): T {
  return seed;
}

export class Subject {
  /** Creates a new Observable with this Subject as the source of its values. */
  asObservable(): void {}
}
"""


@pytest.mark.parametrize(
    ("source", "doc", "asked", "gone", "kept"),
    [
        (RUST_SOURCE, RUST,
         [("Returns the sum of all items in the slice, or zero when it is empty.", 7),
          ("Computes the arithmetic mean of the `Stats` values seen so far.", 16)],
         ("///", "//!"), ("// a plain comment stays", "#[inline]")),
        (GO_SOURCE, GO,
         # Go's doc comments open with the name they document; the question drops it.
         [("returns the sum of all the items in the slice given.", 5)],
         ("// Package", "// Total", "// A note"), ("// Ranges over the items",)),
        (TS_SOURCE, TYPESCRIPT,
         [("Applies an accumulator over the source values and emits each Result as it goes.", 5),
          ("Creates a new Observable with this Subject as the source of its values.", 11)],
         ("/**", "@param", " */"), ("export class Subject",)),
    ],
)  # fmt: skip
def test_doc_comments_go_and_each_sentence_points_at_its_definition(
    source: str, doc: Doc, asked: list[tuple[str, int]], gone: tuple[str, ...], kept: tuple[str, ...]
) -> None:
    blanked, firsts = blank_doc_comments(source.encode(), doc)
    assert firsts == asked
    assert len(blanked.split("\n")) == len(source.split("\n"))  # line numbers hold
    for marker in gone:
        assert marker not in blanked
    for text in kept:
        assert text in blanked
    lines = blanked.split("\n")
    for _, line in firsts:  # the line asked for is where the definition starts, not blank
        assert lines[line - 1].strip()


def test_first_sentence_drops_markers_and_keeps_link_text() -> None:
    assert first_sentence("/// See [`Vec`](std::vec::Vec) for more. Then this.") == "See `Vec` for more."
    assert first_sentence("/**\n * Two lines\n * of text.\n */") == "Two lines of text."


def test_quote_units_are_lines_of_the_sets_own_text_with_a_quarter_of_their_words_dropped(tmp_path: Path) -> None:
    import semsearch
    from eval import quotes

    sentences = [
        f"Sentence {i} of the guide explains how the widget number {i} is configured on a server." for i in range(12)
    ]
    (tmp_path / "docs").mkdir()
    for i in range(0, 12, 3):  # four pages of three sentences each
        (tmp_path / "docs" / f"page{i}.md").write_text(" ".join(sentences[i : i + 3]) + "\n")
    with semsearch.connect(tmp_path / "data", corpus_root=tmp_path) as db:
        db.add(tmp_path / "docs")
        db.index()
    index = tmp_path / "data" / "index"
    queries, qrels = quotes.split(tmp_path / "work", "guide", index, False, lambda path: Path(path).stem)
    assert 0 < len(queries) <= quotes.QUERIES and len(qrels.read_text().splitlines()) == len(queries) + 1
    judged = dict(line.split("\t")[:2] for line in qrels.read_text().splitlines()[1:])
    kept = 0
    for qid, text in queries.items():
        words = text.split()
        page = (tmp_path / "docs" / f"{judged[qid]}.md").read_text().split()
        it = iter(page)
        assert all(w in it for w in words), text  # the page's words, in its order
        kept += len(words)
    total = sum(len(s.split()) for s in sentences) / len(sentences) * len(queries)
    assert 0.5 < kept / total < 0.95  # about three words in four stay
    # Built once: asked again, the same lines (the replay reads what the live run asked).
    assert quotes.split(tmp_path / "work", "guide", index, False, lambda path: Path(path).stem)[0] == queries
