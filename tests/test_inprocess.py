"""The fast tier: the API app in this process (Starlette's TestClient over httpx, lifespan and
all) on a real LanceDB in a temporary directory, the real model behind a real gRPC server on
loopback in this process, and the indexer's own `Indexer.run` writing through the API — no
subprocess. `make test-fast` runs this tier (and every other test not marked `e2e`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from semsearch.api.app import create_app
from semsearch.client import ApiClient
from semsearch.config import Settings
from semsearch.embedder.client import EmbedderClient
from semsearch.indexer.progress import Reporter
from semsearch.indexer.run import Indexer
from tests.conftest import Stack
from tests.corpus import RETRY_REPO, write_tree
from tests.polling import until


@pytest.fixture
def settings(tmp_path: Path, embedder_address: str) -> Settings:
    return Settings(data_dir=tmp_path / "data", embedder_addr=embedder_address, corpus_root=tmp_path)


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    # 127.0.0.1: the Host guard answers loopback names only (TestClient's default is "testserver").
    with TestClient(create_app(settings), base_url="http://127.0.0.1:8765") as http:
        yield http


def test_ready_with_the_real_model(client: TestClient) -> None:
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["model"].startswith("all-MiniLM-L6-v2")


def test_guards_answer_in_process(client: TestClient, tmp_path: Path) -> None:
    assert client.get("/v1/folders", headers={"Host": "evil.example"}).status_code == 403
    assert client.get("/v1/folders", headers={"Origin": "http://evil.example"}).status_code == 403
    assert client.post("/v1/search", json={"query": "x", "ext": [f"e{i}" for i in range(33)]}).status_code == 422
    assert client.post("/v1/folders", json={"path": "/etc"}).status_code == 400
    own = client.post("/v1/folders", json={"path": str(tmp_path)})  # holds the data directory
    assert own.status_code == 400 and "own data" in own.json()["detail"]
    (tmp_path / "corpus").mkdir()
    assert client.post("/v1/folders", json={"path": str(tmp_path / "corpus")}).status_code == 201


def test_index_and_search_through_the_app_in_process(client: TestClient, settings: Settings, tmp_path: Path) -> None:
    """The indexer's own code, the API's own code, the real model — one process."""
    corpus = tmp_path / "notes"
    corpus.mkdir()
    (corpus / "tides.md").write_text("# Tides\n\nThe spring tide comes two days after the full moon.\n")
    (corpus / "bread.md").write_text("# Bread\n\nSourdough needs a starter fed with flour and water.\n")
    assert client.post("/v1/folders", json={"path": str(corpus)}).status_code == 201
    api = ApiClient(settings, http=client)  # the REST client speaks to the app in this process
    embedder = EmbedderClient(settings.embedder_target)
    try:
        indexer = Indexer(settings, api, embedder, Reporter(interactive=False), 1)
        summary = indexer.run(api.folders())
    finally:
        embedder.close()
    assert summary.files_processed == 2 and not summary.errors
    hits = client.post("/v1/search", json={"query": "when is the highest tide", "k": 2}).json()["hits"]
    assert hits[0]["relPath"] == "tides.md" and hits[0]["folder"] == "notes"
    explained = client.get("/v1/explain", params={"path": str(corpus / "bread.md")}).json()
    assert explained["indexed"] and explained["chunks"] == 1 and explained["stale"] is False


def test_api_docs_are_served_offline(client: TestClient) -> None:
    """/docs and /redoc used to load Swagger UI from a CDN: a blank page on an offline server."""
    for page in ("/docs", "/redoc"):
        html = client.get(page).text
        assert "semsearch" in html and "cdn" not in html.lower()
        assert not re.findall(r"(?:src|href)=[\"']https?://", html), page
        for asset in re.findall(r"(?:src|href)=[\"'](/docs-assets/[^\"']+)", html):
            assert client.get(asset).status_code == 200, asset
    assert (
        client.get("/docs-assets/swagger-ui-bundle.js")
        .headers["content-type"]
        .startswith(("application/javascript", "text/javascript"))
    )


def test_the_web_ui_is_served_from_the_package_under_a_strict_policy(client: TestClient) -> None:
    """The page at / loads only its own files, and its policy forbids inline and foreign scripts."""
    page = client.get("/")
    assert page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self';" in policy and "connect-src 'self'" in policy and "unsafe" not in policy
    assets = re.findall(r"(?:src|href)=[\"']([^\"'#]+)", page.text)
    assert assets and all(a.startswith("/ui/") for a in assets), assets
    for asset in assets:
        assert client.get(asset).status_code == 200, asset
    missing = client.get("/ui/../config.py")
    assert missing.status_code == 404
    assert client.get("/ui/secrets.txt").json()["detail"] == "/ui/secrets.txt is not part of the web UI; open / instead"
    # ReDoc's bundle hard-codes a logo on its CDN: the docs pages' policy refuses foreign images.
    assert "img-src 'self' data:;" in client.get("/redoc").headers["content-security-policy"]


@contextmanager
def indexed(settings: Settings, folder: Path) -> Iterator[TestClient]:
    """An API in process over `settings`, with `folder` added and indexed by a real run."""
    with TestClient(create_app(settings), base_url="http://127.0.0.1:8765") as client:
        assert client.post("/v1/folders", json={"path": str(folder)}).status_code == 201
        api = ApiClient(settings, http=client)
        embedder = EmbedderClient(settings.embedder_target)
        try:
            Indexer(settings, api, embedder, Reporter(interactive=False), 1).run(api.folders())
        finally:
            embedder.close()
        yield client


def test_path_boosts_reorder_after_fusion_and_say_so(tmp_path: Path, embedder_address: str) -> None:
    """The server's pathBoosts (a setting) move test code down; a request's own replace them."""
    settings = Settings(data_dir=tmp_path / "data", embedder_addr=embedder_address, corpus_root=tmp_path,
                        path_boosts={"**/tests/**": 0.5})  # fmt: skip
    repo = tmp_path / "repo"
    write_tree(repo, RETRY_REPO)
    with indexed(settings, repo) as client:

        def ranked(**extra: object) -> tuple[list[tuple[str, float | None]], dict[str, float]]:
            body = {"query": "test retry backoff", "minScore": -1, "arms": True, **extra}
            answer = client.post("/v1/search", json=body).json()
            # Each arm's candidate names its chunk's lines, as the hit made of it does.
            lines = {(h["relPath"], h["startLine"], h["endLine"]) for h in answer["hits"]}
            candidates = answer["arms"]["vector"] + answer["arms"]["lexical"]
            assert lines <= {(a["relPath"], a["startLine"], a["endLine"]) for a in candidates}
            return [(h["relPath"], h["boost"]) for h in answer["hits"]], answer["arms"]["pathBoosts"]

        hits, applied = ranked()
        assert applied == {"**/tests/**": 0.5}
        assert ("tests/test_retry.py", 0.5) in hits and ("src/retry.py", None) in hits
        unboosted, none = ranked(pathBoosts={})
        assert none == {} and all(b is None for _, b in unboosted)
        assert unboosted[0][0] == "tests/test_retry.py" and hits[0][0] == "src/retry.py"
        assert client.get("/v1/explain", params={"path": str(repo / "tests/test_retry.py")}).json()["boost"] == 0.5
        refused = client.post("/v1/search", json={"query": "x", "pathBoosts": {"**": 0}})
        assert refused.status_code == 422 and "greater than or equal to 0.05" in refused.text


def test_fusion_by_score_is_a_setting_and_says_the_shares_it_used(tmp_path: Path, embedder_address: str) -> None:
    """`SEMSEARCH_FUSION=convex`: the arms' scores rescaled and added by share; the answer's order is
    that sum over exactly the candidates `arms` shows, and a question takes its own share."""
    from semsearch.engine.fusion import Candidate, convex

    settings = Settings(data_dir=tmp_path / "data", embedder_addr=embedder_address, corpus_root=tmp_path,
                        fusion="convex", vector_share=0.7, question_vector_share=0.9)  # fmt: skip
    repo = write_tree(tmp_path / "repo", RETRY_REPO | {"docs/retry.md": "# Retries\n\nBack off between tries.\n"})
    with indexed(settings, repo) as client:
        for query, share in (("retry with backoff", 0.7), ("how do I retry with backoff?", 0.9)):
            body = {"query": query, "minScore": -1, "arms": True, "pathBoosts": {}}
            answer = client.post("/v1/search", json=body).json()
            arms = answer["arms"]
            assert (arms["vectorWeight"], arms["lexicalWeight"]) == pytest.approx((share, 1 - share))
            expected = convex([Candidate(a["id"], a["cosine"]) for a in arms["vector"]],
                              [Candidate(a["id"], a["bm25"]) for a in arms["lexical"]], share)  # fmt: skip
            where = {a["id"]: (a["relPath"], a["startLine"]) for a in arms["vector"] + arms["lexical"]}
            assert [(h["relPath"], h["startLine"]) for h in answer["hits"]] == [where[f.id] for f in expected]
            # The arms are rounded to 4 places; the scores the API fused were not.
            assert [h["score"] for h in answer["hits"]] == pytest.approx([f.score for f in expected], abs=1e-3)


def test_a_worker_thread_prints_nothing_on_the_programs_stdout(stack: Stack, tmp_path: Path) -> None:
    """A worker that is a thread of another program (`mcp --standalone`, whose stdout is the MCP
    protocol; this suite) leaves stdout alone: the run's lines reach the CLI that asked through
    the API, once."""
    folder = tmp_path / "quay"
    folder.mkdir()
    (folder / "berths.md").write_text("# Berths\n\nBerth 4 takes ships up to 200 m.\n")
    stack.cli("add", str(folder))
    out = stack.cli("index", "quay").stdout
    assert out.count(f"[1/1] quay  {folder}") == 1, out


@pytest.mark.parametrize("held", [False, True], ids=["lancedb", "in-memory copy"])
def test_searches_write_nothing_to_the_log(
    held: bool, tmp_path: Path, embedder_address: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """A full-text query that leaves out LanceDB's `_score` column made Lance log a deprecation
    warning on stderr for every search: the API's log grew a line a query. Both BM25 paths (rows
    from LanceDB; ids from LanceDB and rows from the copy) and the term-frequency gate are asked."""
    settings = Settings(data_dir=tmp_path / "data", embedder_addr=embedder_address, corpus_root=tmp_path,
                        resident_rows=10_000 if held else 0, lexical_max_doc_freq=0.5)  # fmt: skip
    repo = write_tree(tmp_path / "repo", RETRY_REPO)
    with indexed(settings, repo) as client:
        if held:
            until(lambda: client.get("/v1/status").json()["inMemory"], 60)
        capfd.readouterr()
        for mode in ("hybrid", "lexical"):
            answer = client.post("/v1/search", json={"query": "retry with backoff", "mode": mode, "minScore": -1})
            assert answer.status_code == 200 and answer.json()["hits"], answer.text
        if held:  # the copy answered: still the current version's
            assert client.get("/v1/status").json()["inMemory"]
        err = capfd.readouterr().err
        assert "Deprecation" not in err and "WARN" not in err, err
