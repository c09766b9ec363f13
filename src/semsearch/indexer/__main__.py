"""`python -m semsearch.indexer`: one pass (containers, cron, CI), `--worker` to run requested
runs, `--watch` to follow file changes. The same code the CLI and `semsearch serve` run."""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from semsearch.config import load_settings
from semsearch.indexer.main import run_index
from semsearch.indexer.worker import Worker


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="semsearch indexer", description="Index the registered folders.")
    parser.add_argument("path", nargs="?", help="a registered folder (name or path) or a path inside one")
    parser.add_argument("--force", action="store_true", help="re-read and re-embed every file")
    parser.add_argument("--max-files", type=int, help="stop after this many newly processed files")
    parser.add_argument("--dry-run", action="store_true", help="say what would be indexed, embed nothing")
    parser.add_argument("--verbose", action="store_true", help="log every file to stderr")
    parser.add_argument("--concurrency", type=int, help="threads reading and chunking files")
    parser.add_argument("--watch", action="store_true", help="after the pass, follow changes until stopped")
    parser.add_argument("--worker", action="store_true", help="run index requests from the API until stopped")
    args = parser.parse_args(argv)
    settings = load_settings("semsearch indexer")
    if not (args.watch or args.worker):
        sys.exit(
            run_index(settings, args.path, args.force, args.max_files, args.dry_run, args.verbose, args.concurrency)
        )
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    Worker(settings, watch=args.watch, requests=args.worker, path=args.path, verbose=args.verbose).run(stop)


if __name__ == "__main__":
    main()
