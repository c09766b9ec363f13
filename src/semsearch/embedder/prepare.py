"""`python -m semsearch.embedder.prepare`: write the prepared model graph to the cache ahead of time.

The embedder runs this itself (as a child process) when its cache has no prepared graph; the
container image runs it at build time, because the running container's file system is
read-only. `--onnx/--target/--compute` prepare one given file (what the embedder passes).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import get_args

from semsearch.config import Compute, Settings
from semsearch.embedder.model import ModelError, build_prepared, cached_model_path, model_files, sha256_of


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m semsearch.embedder.prepare", description=__doc__.splitlines()[0])
    parser.add_argument("--onnx", type=Path, help="the model to prepare (default: the configured model)")
    parser.add_argument("--target", type=Path, help="where to write it (default: the model cache)")
    parser.add_argument("--compute", choices=get_args(Compute), help="default: SEMSEARCH_MODEL_COMPUTE")
    args = parser.parse_args()
    settings = Settings()
    compute: Compute = args.compute or settings.model_compute
    try:
        onnx = args.onnx or model_files(settings.model).onnx
        target = args.target or cached_model_path(settings.model_cache_dir, sha256_of(onnx), compute)
        if args.target is not None or not target.is_file():
            build_prepared(onnx, target, compute)
    except (ModelError, OSError) as exc:
        sys.exit(f"semsearch embedder: cannot prepare the model: {exc}")
    except Exception as exc:  # onnxruntime and onnx raise their own types for a bad graph
        sys.exit(f"semsearch embedder: cannot prepare the model: {type(exc).__name__}: {exc}")
    print(target)


if __name__ == "__main__":
    main()
