"""Driving the one-shot indexer (`python -m semsearch.indexer`) as the fault tests do: a corpus to
index, the run as a process they can kill, and what the index holds read straight from LanceDB."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import lancedb


def write_corpus(root: Path, files: int = 24) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        (root / f"part{i:02}.md").write_text(f"# Part {i}\n" + f"Section {i} covers subject {i * 11}. " * 60)
    return root


def manifest(env: dict[str, str], folder: str) -> dict[str, tuple[str, int]]:
    files = httpx.get(f"{env['SEMSEARCH_URL']}/v1/folders/{folder}/manifest").json()["files"]
    return {f["path"]: (f["sha256"], f["chunks"]) for f in files}


INDEXER = [sys.executable, "-m", "semsearch.indexer"]  # the one-shot indexer: these tests kill and fault it


def index(env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([*INDEXER, *args], env=env, capture_output=True, text=True, timeout=600)
    if check:
        assert result.returncode == 0, result.stderr
    return result


def chunk_shas(data_dir: Path) -> dict[str, set[str]]:
    """path -> sha256 values of its chunks, read straight from the table (as a reader would).

    An indexer killed before its first commit leaves no table at all, which a reader sees as empty.
    """
    db = lancedb.connect(str(data_dir / "index"))
    if "chunks" not in db.list_tables().tables:
        return {}
    table = db.open_table("chunks").to_arrow().select(["path", "sha256"])
    out: dict[str, set[str]] = {}
    for row in table.to_pylist():
        out.setdefault(row["path"], set()).add(row["sha256"])
    return out
