"""Hybrid retrieval end to end: provenance, labels, abstention, lifecycle, filters, freshness, model identity."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.conftest import SEMSEARCH, Stack
from tests.processes import start_api, start_embedder, start_worker

FILES = {
    "kb/docs/auth.md": """---
title: Token refresh (old)
status: superseded
superseded_by: reference/auth.md
date: 2026-03-01
---
# Token refresh

The client refreshes its access token by calling the legacy session endpoint every hour.
""",
    "kb/reference/auth.md": """---
title: Token refresh
date: 2026-06-01
tags: [auth, security]
---
# Token refresh

The client exchanges its refresh token for a new access token shortly before expiry.
""",
    "kb/archive/old-plan.md": "# Launch plan\nThe deployment checklist for the 2019 balloon launch.\n",
    "kb/src/ledger.py": (
        "def zxqReconcileLedgerV2(entries):\n"
        "    total = 0\n"
        "    for e in entries:\n"
        "        total += e.amount\n"
        "    return total\n"
    ),
    "kb/src/geometry.py": 'def polygon_area(points):\n    """Shoelace formula for the area of a simple polygon."""\n',
    "kb/notes/garden.md": """---
date: 2025-05-01
tags: [garden]
---
# Tomatoes

Water tomato plants deeply twice a week and give them full sun.
""",
    "small/periscope.txt": "Submarine periscope maintenance: clean the optics and check the seals monthly.\n",
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory, stack: Stack) -> Path:
    root = tmp_path_factory.mktemp("retrieval")
    for rel, text in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    stack.cli("add", str(root / "kb"), str(root / "small"))
    out = stack.cli("index").stdout
    assert "Calibration: background noise p99 = " in out and "suggested minScore" in out
    return root


def search(stack: Stack, query: str, **params: object) -> dict:
    with stack.http() as http:
        response = http.post("/v1/search", json={"query": query, **params})
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def test_exact_identifier_without_semantic_neighbours_comes_first(stack: Stack, corpus: Path) -> None:
    hits = search(stack, "zxqReconcileLedgerV2")["hits"]
    assert hits[0]["relPath"] == "src/ledger.py"
    assert hits[0]["label"] == "[exact match]"
    assert hits[0]["bm25Rank"] == 1
    # Its parts are indexed too: the words find the identifier.
    parts = search(stack, "reconcile ledger", mode="lexical", minScore=-1)["hits"]
    assert parts[0]["relPath"] == "src/ledger.py"


def test_paraphrase_is_found_by_the_vector_arm_with_provenance(stack: Stack, corpus: Path) -> None:
    hit = search(stack, "renewing credentials before they lapse", k=3)["hits"][0]
    assert hit["relPath"] == "reference/auth.md"
    assert hit["vectorRank"] == 1
    assert hit["label"].startswith(("[semantic ", "[both "))
    assert hit["folder"] == "kb" and hit["filePath"] == str(corpus / "kb/reference/auth.md")
    assert hit["heading"] == "Token refresh" and hit["startLine"] >= 6 and hit["endLine"] >= hit["startLine"]
    assert 0 < hit["cosine"] <= 1 and hit["score"] > 0 and hit["stale"] is False
    assert hit["label"].endswith(f"{hit['cosine']:.3f}]")


def test_arms_show_each_arms_candidates_and_the_per_query_weights(stack: Stack, corpus: Path) -> None:
    from semsearch.config import Settings
    from semsearch.engine.fusion import lexical_balance

    answer = search(stack, "reconcile ledger entries total", arms=True, minScore=-1)
    arms = answer["arms"]
    assert arms["vector"] and arms["lexical"] and arms["lexicalTerms"]
    # The weight the API used is the balance of exactly the scores it shows.
    s = Settings()
    expected = lexical_balance(
        [a["bm25"] for a in arms["lexical"]],
        [a["cosine"] for a in arms["vector"]],
        s.lexical_decisiveness_gain,
        s.vector_decisiveness_gain,
        s.arm_balance_bias,
        s.arm_balance_bound,
    )
    assert arms["lexicalWeight"] == pytest.approx(s.lexical_weight * expected, rel=0.02)  # arms are rounded
    assert arms["lexicalWeight"] != s.lexical_weight  # the balance moved it for this query
    assert arms["vectorWeight"] == s.vector_weight


def test_unrelated_query_abstains_with_the_reason(stack: Stack, corpus: Path) -> None:
    answer = search(stack, "medieval falconry tournaments in Burgundy", minScore=0.5)
    assert answer["hits"] == []
    assert answer["message"].startswith("No relevant results (best score 0.")
    assert answer["message"].endswith("threshold 0.50)")
    cli = stack.cli("search", "medieval falconry tournaments in Burgundy", "--min-score", "0.5", check=False)
    assert cli.returncode == 1 and cli.stdout == "" and cli.stderr.startswith("No relevant results (best score")


def test_superseded_documents_hide_unless_all(stack: Stack, corpus: Path) -> None:
    default = search(stack, "legacy session endpoint every hour", k=10, minScore=-1)["hits"]
    assert all(h["relPath"] != "docs/auth.md" for h in default)
    everything = search(stack, "legacy session endpoint every hour", k=10, includeAll=True)["hits"]
    old = next(h for h in everything if h["relPath"] == "docs/auth.md")
    assert old["label"].endswith("[superseded → reference/auth.md; 2026-03-01]")
    assert old["status"] == "superseded" and old["supersededBy"] == "reference/auth.md"
    cli = json.loads(stack.cli("search", "legacy session endpoint every hour", "--all", "--json").stdout)["hits"]
    assert any(h["relPath"] == "docs/auth.md" for h in cli)


def test_default_exclude_and_per_query_exclude(stack: Stack, corpus: Path) -> None:
    query = "deployment checklist for the balloon launch"
    assert all("archive/" not in h["relPath"] for h in search(stack, query, minScore=-1)["hits"])
    assert search(stack, query, includeAll=True)["hits"][0]["relPath"] == "archive/old-plan.md"
    hits = search(stack, "token refresh", exclude="reference", minScore=-1, k=20)["hits"]
    assert hits and all("reference/" not in h["relPath"] for h in hits)


def test_folder_filter_prefilters_instead_of_filtering_top_k(stack: Stack, corpus: Path) -> None:
    # Every kb chunk is closer to this query than the periscope note; the filter still finds it.
    hits = search(stack, "access token refresh", folder="small", k=1, minScore=-1)["hits"]
    assert [h["relPath"] for h in hits] == ["periscope.txt"]


def test_path_ext_tag_and_date_filters(stack: Stack, corpus: Path) -> None:
    def paths(**params: object) -> set[str]:
        return {h["relPath"] for h in search(stack, "tokens plants polygons", k=50, minScore=-1, **params)["hits"]}

    assert paths(pathGlob="src/**") == {"src/ledger.py", "src/geometry.py"}
    assert paths(ext="md", folder="kb") == {"reference/auth.md", "notes/garden.md"}
    assert paths(tags="garden") == {"notes/garden.md"}
    assert paths(dateFrom="2026-05-01", ext="md") == {"reference/auth.md"}
    assert paths(dateTo="2025-12-31", ext="md") == {"notes/garden.md"}


def test_a_filter_that_matches_nothing_says_which(stack: Stack, corpus: Path) -> None:
    answer = search(stack, "anything", pathGlob="nowhere/**")
    assert (
        answer["hits"] == []
        and answer["message"] == "No results: the filter pathGlob nowhere/** matches nothing in the index."
    )
    unknown = httpx.post(f"{stack.url}/v1/search", json={"query": "x", "folder": "nope"})
    assert unknown.status_code == 404 and "no folder named 'nope'" in unknown.json()["detail"]
    typo = httpx.post(f"{stack.url}/v1/search", json={"query": "x", "folders": "kb"})
    assert typo.status_code == 422 and "folders" in typo.json()["detail"]


def test_group_by_file_keeps_at_most_n_chunks_per_file(stack: Stack, corpus: Path) -> None:
    hits = search(stack, "token refresh", k=10, minScore=-1, group="file", perFile=1, includeAll=True)["hits"]
    keys = [(h["folder"], h["relPath"]) for h in hits]
    assert len(keys) == len(set(keys)) >= 3


def test_stale_flag_after_the_file_changes(stack: Stack, corpus: Path) -> None:
    target = corpus / "small/periscope.txt"
    st = target.stat()
    try:
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        hit = search(stack, "periscope maintenance", folder="small")["hits"][0]
        assert hit["stale"] is True
    finally:
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert search(stack, "periscope maintenance", folder="small")["hits"][0]["stale"] is False


def test_vector_only_and_lexical_only_modes(stack: Stack, corpus: Path) -> None:
    vector = search(stack, "zxqReconcileLedgerV2", mode="vector", minScore=-1)
    lexical = search(stack, "zxqReconcileLedgerV2", mode="lexical", minScore=-1)
    assert vector["mode"] == "vector" and all(h["bm25Rank"] is None for h in vector["hits"])
    assert lexical["mode"] == "lexical" and all(h["vectorRank"] is None for h in lexical["hits"])
    assert lexical["hits"][0]["relPath"] == "src/ledger.py"


def test_calibration_endpoint_samples_the_index(stack: Stack, corpus: Path) -> None:
    with stack.http() as http:
        cal = http.get("/v1/calibration", params={"pairs": 50}).json()
    assert cal["pairs"] > 0 and -1 <= cal["p99"] <= 1 and cal["suggestedMinScore"] >= cal["p99"]


def test_an_embedder_with_another_model_is_refused(stack: Stack, corpus: Path, tmp_path: Path) -> None:
    from semsearch.embedder.model import packaged_model

    packaged = packaged_model()
    model_dir = tmp_path / "other-model"
    model_dir.mkdir()
    (model_dir / "model.onnx").symlink_to(packaged.onnx)
    shutil.copy(packaged.tokenizer, model_dir / "tokenizer.json")
    (model_dir / "model.json").write_text(json.dumps({"model_id": "some-other-model"}))
    embedder, address = start_embedder(tmp_path / "other.log", SEMSEARCH_MODEL_DIR=str(model_dir))
    data_dir = tmp_path / "data"
    shutil.copytree(stack.data_dir, data_dir, ignore=shutil.ignore_patterns("*.log"))
    api, env = start_api(data_dir, address)
    worker = start_worker(env, tmp_path / "worker.log")
    try:
        refused = httpx.post(f"{env['SEMSEARCH_URL']}/v1/search", json={"query": "token"})
        assert refused.status_code == 409
        detail = refused.json()["detail"]
        assert "all-MiniLM-L6-v2-onnx-int8+int8-matmul" in detail and "some-other-model" in detail
        assert "semsearch index --rebuild" in detail
        rebuilt = subprocess.run([SEMSEARCH, "index", "--rebuild", "--yes"], env=env, capture_output=True, text=True)
        assert rebuilt.returncode == 0, rebuilt.stderr
        assert json.loads(rebuilt.stdout.strip().splitlines()[-1])["filesProcessed"] == len(FILES)
        after = httpx.post(f"{env['SEMSEARCH_URL']}/v1/search", json={"query": "periscope", "folder": "small"})
        assert after.status_code == 200  # the folder's name (model.json), a digest of its files, the compute path
        assert re.fullmatch(r"some-other-model@[0-9a-f]{12}\+int8-matmul", after.json()["modelId"])
    finally:
        worker.stop()
        api.stop()
        embedder.stop()


def test_filters_that_match_nothing_are_left_out_until_a_write_makes_them_matter(
    api_factory,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    """The API leaves out lifecycle/defaultExclude clauses while no row could match them (a pass
    over every row saved); a later write that adds such rows must bring them back at once."""
    fresh: Stack = api_factory()
    root = tmp_path / "notes"
    (root / "guide").mkdir(parents=True)
    (root / "guide/kettle.md").write_text("# Kettle\nDescale the kettle with citric acid every month.\n")
    fresh.cli("add", str(root))
    fresh.cli("index")
    assert search(fresh, "descale the kettle", minScore=-1)["hits"][0]["relPath"] == "guide/kettle.md"
    (root / "archive").mkdir()
    (root / "archive/kettle-2019.md").write_text("# Kettle\nDescale the kettle with vinegar, 2019 advice.\n")
    (root / "guide/old-kettle.md").write_text(
        "---\nstatus: superseded\nsuperseded_by: guide/kettle.md\n---\n# Kettle\nDescale the kettle with lemon.\n"
    )
    fresh.cli("index")
    default = {h["relPath"] for h in search(fresh, "descale the kettle", minScore=-1)["hits"]}
    assert default == {"guide/kettle.md"}
    everything = {h["relPath"] for h in search(fresh, "descale the kettle", minScore=-1, includeAll=True)["hits"]}
    assert everything == {"guide/kettle.md", "archive/kettle-2019.md", "guide/old-kettle.md"}
