"""`python -m embedder.prepare`: write the optimised model graph to the cache ahead of time.

The embedder does this itself on its first start; the container image runs it at build time,
because the running container's file system is read-only.
"""

from __future__ import annotations

import sys

from embedder.model import ModelError, cached_model_path, model_files, save_optimised, sha256_of
from semsearch.config import Settings


def main() -> None:
    settings = Settings()
    try:
        files = model_files(settings.model_dir)
        target = cached_model_path(settings.model_cache_dir, sha256_of(files.onnx))
        if not target.is_file():
            save_optimised(files.onnx, target)
    except (ModelError, OSError) as exc:
        sys.exit(f"semsearch embedder: cannot prepare the model cache: {exc}")
    print(target)


if __name__ == "__main__":
    main()
