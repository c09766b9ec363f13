"""The confined read (`cat_file`, `GET /v1/files`, gather's context lines all go through
`corpus.files.read`) attacked while it reads: a thread keeps swapping a file inside the folder,
and a directory on its way, for symlinks to the outside. No byte from outside may ever come back;
each read returns the inside text or is refused."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from semsearch.config import Settings
from semsearch.corpus.files import Refused, read
from semsearch.corpus.folders import FolderRegistry

READS = 3000
OUTSIDE = "OUTSIDE-SECRET-do-not-leak"


def swapper(inside: Path, outside: Path, stop: threading.Event) -> int:
    """Puts the real entry and a symlink to `outside` at `inside` in turn, as fast as it can."""
    real, fake = inside.with_name(inside.name + ".real"), inside.with_name(inside.name + ".fake")
    os.rename(inside, real)
    fake.symlink_to(outside)
    swaps = 0
    try:
        while not stop.is_set():
            os.rename(real, inside)
            os.rename(inside, real)
            os.rename(fake, inside)  # the path now leads outside
            os.rename(inside, fake)
            swaps += 1
    finally:
        os.rename(real, inside)
        fake.unlink()
    return swaps


def race(target: Path, swapped: Path, outside: Path, folders: FolderRegistry, settings: Settings) -> dict[str, int]:
    # Listed while the real file is in place (the listing is reused for a moment), so the reads
    # below get past the ignore rules and race the open itself.
    assert read(str(target), folders, settings).lines == ["inside text"]
    stop = threading.Event()
    counts = {"inside": 0, "refused": 0, "swaps": 0}
    thread = threading.Thread(target=lambda: counts.__setitem__("swaps", swapper(swapped, outside, stop)))
    thread.start()
    try:
        for _ in range(READS):
            try:
                text = "\n".join(read(str(target), folders, settings).lines)
            except Refused:
                counts["refused"] += 1
                continue
            assert OUTSIDE not in text, "a byte from outside the folder came back"
            assert text == "inside text", text
            counts["inside"] += 1
    finally:
        stop.set()
        thread.join()
    return counts


def test_a_file_swapped_for_a_symlink_while_it_is_read_never_leaks(tmp_path: Path) -> None:
    root, elsewhere = tmp_path / "corpus", tmp_path / "elsewhere"
    (root / "docs").mkdir(parents=True)
    elsewhere.mkdir()
    (elsewhere / "secret.txt").write_text(OUTSIDE)
    (elsewhere / "notes.txt").write_text(OUTSIDE)
    target = root / "docs" / "notes.txt"
    target.write_text("inside text")
    settings = Settings(data_dir=tmp_path / "data", corpus_root=tmp_path)
    folders = FolderRegistry(tmp_path / "folders.json", tmp_path, [settings.data_dir])
    folders.add(str(root))

    by_file = race(target, target, elsewhere / "secret.txt", folders, settings)
    by_directory = race(target, root / "docs", elsewhere, folders, settings)  # a directory on the way
    for counts in (by_file, by_directory):
        assert counts["swaps"] > 100 and counts["inside"] + counts["refused"] == READS, counts
        assert counts["inside"] > 0 and counts["refused"] > 0, counts  # both sides of the race were hit
