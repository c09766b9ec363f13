"""What every reader of a file format returns: its text as segments, or `Unindexable`."""

from __future__ import annotations

from dataclasses import dataclass

from semsearch.schemas import DocMeta


class Unindexable(Exception):
    """The file cannot be indexed; `reason` is a short category for the summary."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


@dataclass(frozen=True)
class Segment:
    text: str
    # The part the text is: a PDF's page, a notebook's cell, a spreadsheet's sheet, a deck's slide
    # or a mailbox's message (1-based); None for a file of one part.
    page: int | None = None
    code: bool = False  # a notebook's code cell (or its output): no Markdown headings inside
    meta: DocMeta | None = None  # a part's own facts (a message's subject, sender, date), over the file's
    language: str | None = None  # a code cell's language, as the notebook's kernel names it (`python`)
