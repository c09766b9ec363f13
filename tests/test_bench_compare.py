"""`make bench-compare` (bench/compare.py) refuses clearly when there is nothing to compare over."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_without_the_bench_tables_it_says_to_run_make_bench_first(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.compare", "--work", str(tmp_path), "--tables", "synthetic10000"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert f"no bench table synthetic10000 under {tmp_path / 'run'}" in done.stderr
    assert "run `make bench` first" in done.stderr
    assert not (tmp_path / "run").exists() and not list(tmp_path.glob("before-*"))  # nothing made
