"""The CPU the model runs on, and whether the configured compute path is the faster one there.

int8 compute (`SEMSEARCH_MODEL_COMPUTE=int8`) pays where the CPU has int8 dot-product
instructions — AVX-512 VNNI or AVX-VNNI on x86-64, the dot-product extension on ARM: 1.45-1.6x
the chunks/s of fp32 there (make bench). On a CPU with AVX2 alone both paths embed at the same
speed (8.9 vs 8.9 chunks/s, measured on such a machine). The two paths give vectors within cosine
0.99 but not equal, so an index records which one made its vectors (`…+int8-matmul`): changing
the path means `semsearch index --rebuild`, which is why the default stays int8 on every CPU
(one identity wherever an index or a snapshot moves) and this module only says which is faster.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path

# /proc/cpuinfo flag (x86-64 `flags`, ARM `Features`) → label, the widest int8 dot product first.
INT8_DOT = [("avx512_vnni", "AVX-512 VNNI"), ("avx_vnni", "AVX-VNNI"), ("asimddp", "NEON dot product")]
VECTOR = [("avx512f", "AVX-512"), ("avx2", "AVX2"), ("asimd", "NEON")]


@dataclass(frozen=True)
class CpuFacts:
    name: str
    extensions: tuple[str, ...]  # the vector extensions found, widest first
    int8_dot: bool | None  # None: unknown (not Linux, or no /proc/cpuinfo)

    def line(self, compute: str) -> str:
        """`AMD EPYC, AVX2, no int8 dot product: int8 compute is not faster here than fp32 …`."""
        found = ", ".join(self.extensions) or "no vector extension found"
        if self.int8_dot is None:
            return f"{self.name}, {found}"
        dot = "" if self.int8_dot else ", no int8 dot product"
        return f"{self.name}, {found}{dot}: {advice(compute, self.int8_dot)}"


def advice(compute: str, int8_dot: bool) -> str:
    if compute == "int8" and int8_dot:
        return "int8 compute is the faster path here"
    if compute == "int8":
        return "int8 compute is not faster here than fp32 (kept: the index's model identity depends on it)"
    if int8_dot:
        return "int8 compute would embed ~1.5x faster here (SEMSEARCH_MODEL_COMPUTE=int8, then index --rebuild)"
    return "fp32 compute is as fast as int8 here"


def facts_from(cpuinfo: str, machine: str = "") -> CpuFacts:
    """Parses /proc/cpuinfo's text (x86-64 `model name` and `flags`; ARM `Features`, `CPU part`)."""
    lines = cpuinfo.splitlines()

    def field(*names: str) -> str | None:
        return next((ln.split(":", 1)[1].strip() for ln in lines if ln.split(":", 1)[0].strip() in names), None)

    flags = set((field("flags", "Features") or "").split())
    name = field("model name", "Processor", "Hardware") or machine or platform.machine() or "CPU"
    extensions = tuple(label for flag, label in INT8_DOT + VECTOR if flag in flags)
    return CpuFacts(name, extensions, any(flag in flags for flag, _ in INT8_DOT) if flags else None)


def detect() -> CpuFacts:
    try:
        return facts_from(Path("/proc/cpuinfo").read_text(), platform.machine())
    except OSError:
        return CpuFacts(platform.processor() or platform.machine() or "CPU", (), None)
