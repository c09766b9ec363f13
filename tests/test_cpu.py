"""The embedder says which CPU it runs on, its vector extensions, and whether the configured
compute path is the faster one there — at start-up, in Info, in `semsearch status`, over REST and
in the web UI's status page (tests/test_web_ui.py). The parser is fed /proc/cpuinfo excerpts of
three kinds of machine, and this machine's own file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from semsearch.embedder.cpu import detect, facts_from

XEON = (
    "model name\t: Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz\nflags\t\t: fpu sse4_2 avx2 avx512f avx512bw avx512_vnni\n"
)
EPYC = "model name\t: AMD EPYC 7B12\nflags\t\t: fpu sse4_2 fma avx avx2\n"
GRAVITON = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics asimddp\nCPU part\t: 0xd0c\n"


def test_int8_dot_products_are_told_apart_on_each_kind_of_cpu() -> None:
    xeon, epyc, arm = facts_from(XEON), facts_from(EPYC), facts_from(GRAVITON, "aarch64")
    assert (xeon.extensions, xeon.int8_dot) == (("AVX-512 VNNI", "AVX-512", "AVX2"), True)
    assert (epyc.extensions, epyc.int8_dot) == (("AVX2",), False)
    assert (arm.name, arm.extensions, arm.int8_dot) == ("aarch64", ("NEON dot product", "NEON"), True)
    assert xeon.line("int8").endswith("int8 compute is the faster path here")
    assert "not faster here than fp32" in epyc.line("int8") and "no int8 dot product" in epyc.line("int8")
    assert "SEMSEARCH_MODEL_COMPUTE=int8" in arm.line("fp32")
    assert facts_from("").int8_dot is None  # nothing known: nothing claimed


def test_status_names_this_machines_cpu_on_rest_and_the_cli(api_factory: Any) -> None:
    if not Path("/proc/cpuinfo").exists():
        pytest.skip("no /proc/cpuinfo on this system")
    here = detect()
    stack = api_factory()
    with stack.http() as http:
        cpu = http.get("/v1/status").json()["embedder"]["cpu"]
    assert cpu.startswith(here.name) and all(ext in cpu for ext in here.extensions)
    assert ("faster path here" in cpu) == bool(here.int8_dot)  # the session embedder computes in int8
    assert f"cpu       {cpu}" in stack.cli("status").stdout
