"""How a run ends on stdout, whether it ran here (`python -m semsearch.indexer`) or in a worker
that `semsearch index` followed: the total line, what could not be read (stderr), and the JSON
summary as the last line, which scripts parse."""

from __future__ import annotations

import json
import sys

from semsearch.schemas import RunSummary


def summary_line(summary: RunSummary, seconds: float | None = None) -> str:
    return (
        f"{summary.files_processed:,} indexed  {summary.files_skipped:,} skipped  {summary.files_deleted:,} deleted  "
        f"{summary.chunks_written:,} chunks  {summary.seconds if seconds is None else seconds:.1f}s"
    )


def print_summary(summary: RunSummary) -> None:
    print("total  " + summary_line(summary), flush=True)
    for bad in summary.unindexable:
        print(f"  could not index {bad.path}: {bad.detail}", file=sys.stderr)
    print(json.dumps(summary.dump()), flush=True)
