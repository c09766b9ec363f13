"""A short soak in CI (the long one is `make soak`): concurrent searches while an index run writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.soak import soak

pytestmark = pytest.mark.e2e  # starts services as processes
FILES = 24  # an index run of ~7 s on a 2-core box: the 8 s of searches cover all of it


def test_searches_never_fail_while_an_index_run_writes(tmp_path: Path) -> None:
    result = soak(tmp_path, seconds=8, clients=6, files=FILES)
    assert result["idle"]["requests"] > 0 and result["duringIndexing"]["requests"] > 0
    assert result["idle"]["failed"] == 0, result["idle"]["failures"]
    assert result["duringIndexing"]["failed"] == 0, result["duringIndexing"]["failures"]
    assert result["indexRun"]["filesProcessed"] == FILES and result["indexRun"]["errors"] == []
