"""Generates the gRPC stubs from `embedder.proto` (run by the build, never by hand).

`setup.py` calls this before packaging, so `pip install` (editable or not) and the
Docker images always carry stubs that match the .proto in the same checkout.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # src/
# Compiled as `semsearch/proto/embedder.proto` under src/, so the generated modules import each
# other as `semsearch.proto.…`, the name they are installed under.
PROTO = Path("semsearch") / "proto" / "embedder.proto"


def generate() -> None:
    from grpc_tools import protoc  # build-time dependency only

    out = ROOT / "semsearch" / "proto"
    stale = [out / "embedder_pb2.py", out / "embedder_pb2_grpc.py", out / "embedder_pb2.pyi"]
    if (out / "embedder_pb2_grpc.py").exists() and "from proto import" in (out / "embedder_pb2_grpc.py").read_text():
        stale[0].unlink()  # generated under the old module name
    if all(p.exists() and p.stat().st_mtime >= (ROOT / PROTO).stat().st_mtime for p in stale):
        return
    include = Path(protoc.__file__).parent / "_proto"
    argv = [
        "grpc_tools.protoc",
        f"-I{ROOT}",
        f"-I{include}",
        f"--python_out={ROOT}",
        f"--pyi_out={ROOT}",
        f"--grpc_python_out={ROOT}",
        str(ROOT / PROTO),
    ]
    if protoc.main(argv) != 0:
        sys.exit(f"protoc failed on {PROTO}")


if __name__ == "__main__":
    generate()
