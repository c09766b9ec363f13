"""What gets indexed: the one file-list function, shared by the indexer and (later) grep.

Everything under the folder, recursively, with no allow-list of extensions, except:
directories that are build output or dependencies, binary files by extension, files
over the size limit, and symlinks (never followed, so nothing outside the folder leaks in).
Content checks that need the bytes (NUL bytes, size on the open descriptor) happen in
`extract.py` when the file is read.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

SKIP_DIRS = frozenset(
    {
        ".git", ".hg", ".svn", "node_modules", "dist", "build", "coverage", "vendor", ".venv", "venv",
        "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox", ".gradle", ".idea",
        ".dart_tool", "Pods", "DerivedData", "target", ".next", ".nuxt", ".cache", ".terraform",
    }
)  # fmt: skip

BINARY_EXTENSIONS = frozenset(
    {
        # images, audio, video
        "png", "jpg", "jpeg", "gif", "bmp", "ico", "icns", "webp", "tif", "tiff", "psd", "heic",
        "mp3", "wav", "flac", "ogg", "m4a", "mp4", "mov", "avi", "mkv", "webm",
        # archives and packages
        "zip", "gz", "tgz", "bz2", "xz", "zst", "7z", "rar", "tar", "jar", "war", "aar", "apk", "ipa",
        "whl", "egg", "deb", "rpm", "dmg", "iso",
        # compiled code and objects
        "o", "a", "so", "dylib", "dll", "exe", "bin", "class", "pyc", "pyo", "wasm", "obj", "lib",
        # fonts
        "ttf", "otf", "woff", "woff2", "eot",
        # model weights and data stores
        "onnx", "pt", "pth", "safetensors", "ckpt", "h5", "pb", "tflite", "npy", "npz", "pkl",
        "parquet", "arrow", "lance", "db", "sqlite", "sqlite3", "mdb",
        # key stores
        "jks", "keystore", "p12", "pfx",
    }
)  # fmt: skip


def is_binary_name(name: str) -> bool:
    _, dot, ext = name.rpartition(".")
    return bool(dot) and ext.lower() in BINARY_EXTENSIONS


def list_files(root: Path, max_file_size: int) -> Iterator[str]:
    """Relative POSIX paths of indexable files under `root`, in a stable order."""

    def walk(directory: Path, prefix: str) -> Iterator[str]:
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            return  # unreadable directory: nothing in it can be indexed
        for entry in entries:
            if entry.is_symlink():
                continue
            rel = f"{prefix}{entry.name}"
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in SKIP_DIRS:
                    yield from walk(Path(entry.path), rel + "/")
            elif entry.is_file(follow_symlinks=False) and not is_binary_name(entry.name):
                try:
                    if entry.stat(follow_symlinks=False).st_size <= max_file_size:
                        yield rel
                except OSError:
                    continue

    yield from walk(root, "")
