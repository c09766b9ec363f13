"""REST behaviour that every client relies on: auth, errors, safety of binds and writes."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time

import httpx
import numpy as np

from tests.conftest import Stack, base_env, free_port
from tests.processes import Service


def test_healthz_is_open_and_readyz_checks_the_embedder(stack: Stack) -> None:
    with stack.http() as http:
        assert http.get("/healthz").json() == {"status": "ok"}
        ready = http.get("/readyz")
    assert ready.status_code == 200 and ready.json()["model"] == "all-MiniLM-L6-v2-onnx-int8+int8-matmul"


def test_openapi_docs_are_served(stack: Stack) -> None:
    with stack.http() as http:
        spec = http.get("/openapi.json").json()
        assert http.get("/docs").status_code == 200
    assert "/v1/search" in spec["paths"]


def test_token_protects_every_endpoint_but_healthz(api_factory) -> None:  # type: ignore[no-untyped-def]
    stack = api_factory(token="s3cret-token")
    with httpx.Client(base_url=stack.url, timeout=30) as anon:
        spec = httpx.get(f"{stack.url}/openapi.json", headers=stack.headers).json()
        assert anon.get("/healthz").status_code == 200
        protected = [(method, path) for path, ops in spec["paths"].items() for method in ops if path != "/healthz"]
        assert len(protected) >= 7
        for method, path in protected:
            url = path.replace("{name}", "x")
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret-token"}):
                response = anon.request(method.upper(), url, headers=headers, json={})
                assert response.status_code == 401, (method, path, headers)
                assert response.headers["content-type"] == "application/problem+json"
                assert "SEMSEARCH_TOKEN" in response.json()["detail"]
    with stack.http() as http:
        assert http.get("/v1/folders").status_code == 200


def test_errors_are_problem_details_a_person_can_act_on(stack: Stack) -> None:
    with stack.http() as http:
        missing = http.get("/v1/folders/nope/manifest")
        unknown_field = http.post("/v1/search", json={"query": "x", "kk": 3})
        bad_k = http.post("/v1/search", json={"query": "x", "k": 10**9})
        relative = http.post("/v1/folders", json={"path": "relative/dir"})
    assert missing.status_code == 404
    assert missing.json()["detail"].startswith("no folder named 'nope'")
    assert "semsearch list" in missing.json()["detail"]
    assert unknown_field.status_code == 422 and "kk" in unknown_field.json()["detail"]
    assert bad_k.status_code == 422 and "k:" in bad_k.json()["detail"]
    assert relative.status_code == 400 and "absolute" in relative.json()["detail"]
    for response in (missing, unknown_field, bad_k, relative):
        assert response.headers["content-type"] == "application/problem+json"
        assert {"type", "title", "status", "detail"} <= set(response.json())


def test_oversized_body_is_refused(api_factory) -> None:  # type: ignore[no-untyped-def]
    stack = api_factory(SEMSEARCH_MAX_BODY_BYTES="1000")
    with stack.http() as http:
        response = http.post("/v1/search", json={"query": "x" * 5000})
    assert response.status_code == 413 and "exceeds the limit" in response.json()["detail"]


def test_vectors_of_another_model_are_refused(stack: Stack, tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "a.txt").write_text("hello")
    vec = base64.b64encode(np.ones(384, dtype="<f4").tobytes()).decode()
    with stack.http() as http:
        assert http.post("/v1/folders", json={"path": str(tmp_path), "name": "mm"}).status_code == 201

        def batch(model: str) -> httpx.Response:
            body = {
                "modelId": model,
                "dimension": 384,
                "upserts": [
                    {
                        "path": "a.txt", "mtimeNs": 1, "size": 5, "sha256": model,
                        "chunks": [{"startLine": 1, "endLine": 1, "text": "hello"}], "vectors": vec,
                    }
                ],
            }  # fmt: skip
            return http.post("/v1/folders/mm/batches", json=body)

        assert batch("all-MiniLM-L6-v2-onnx-int8+int8-matmul").status_code == 200
        refused = batch("some-other-model")
        wrong_count = http.post(
            "/v1/folders/mm/batches",
            json={"modelId": "all-MiniLM-L6-v2-onnx-int8+int8-matmul", "dimension": 384, "upserts": [
                {"path": "a.txt", "mtimeNs": 1, "size": 5, "sha256": "z",
                 "chunks": [{"startLine": 1, "endLine": 1, "text": "a"}, {"startLine": 1, "endLine": 1, "text": "b"}],
                 "vectors": vec}]},
        )  # fmt: skip
        named = {"startLine": 1, "endLine": 1, "text": "def f(): pass", "names": ["function f", "function g"]}
        wrong_names = http.post(
            "/v1/folders/mm/batches",
            json={"modelId": "all-MiniLM-L6-v2-onnx-int8+int8-matmul", "dimension": 384, "upserts": [
                {"path": "a.txt", "mtimeNs": 1, "size": 5, "sha256": "n", "chunks": [named], "vectors": vec,
                 "nameVectors": vec}]},
        )  # fmt: skip
        lexical_with_vectors = http.post(
            "/v1/folders/mm/batches",
            json={"modelId": "all-MiniLM-L6-v2-onnx-int8+int8-matmul", "dimension": 384, "withoutVectors": True,
                  "upserts": [{"path": "a.txt", "mtimeNs": 1, "size": 5, "sha256": "w",
                               "chunks": [{"startLine": 1, "endLine": 1, "text": "bye"}], "vectors": vec}]},
        )  # fmt: skip
        kept = http.post("/v1/search", json={"query": "hello", "folder": ["mm"], "minScore": -1}).json()["hits"]
        http.delete("/v1/folders/mm")
    assert wrong_names.status_code == 400 and "2 chunk names" in wrong_names.json()["detail"]
    assert lexical_with_vectors.status_code == 400 and "carries no vectors" in lexical_with_vectors.json()["detail"]
    assert [h["text"] for h in kept] == ["hello"]  # the refused batches changed nothing
    assert refused.status_code == 409
    detail = refused.json()["detail"]
    assert "all-MiniLM-L6-v2-onnx-int8+int8-matmul" in detail and "some-other-model" in detail
    assert wrong_count.status_code == 400 and "expected 768" in wrong_count.json()["detail"]


def test_non_loopback_bind_without_token_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    env = base_env(tmp_path, free_port(), "127.0.0.1:1") | {"SEMSEARCH_HOST": "0.0.0.0"}
    result = subprocess.run(
        [sys.executable, "-m", "semsearch.api"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0
    assert "refusing to listen on 0.0.0.0 without a token" in result.stderr


def test_readyz_fails_clearly_when_the_embedder_is_down(tmp_path) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
    api = Service("semsearch.api", base_env(tmp_path, port, f"127.0.0.1:{free_port()}"), tmp_path / "api.log").start()
    try:
        for _ in range(600):
            api.check_alive()
            try:
                ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=30)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        assert ready.status_code == 503
        assert "not reachable" in ready.json()["embedder"]
        search = httpx.post(f"http://127.0.0.1:{port}/v1/search", json={"query": "x"}, timeout=30)
        assert search.status_code == 503 and "semsearch serve" in search.json()["detail"]
    finally:
        api.stop()


def test_the_api_runs_numpys_blas_on_one_thread_unless_told_otherwise() -> None:
    """`python -m semsearch.api` caps numpy's BLAS at one thread before it serves (its spinning idle
    threads took the cores a search's other parts wait for); an operator's OPENBLAS_NUM_THREADS wins."""
    probe = (
        "import numpy; from threadpoolctl import threadpool_info; from semsearch.api.__main__ import one_blas_thread\n"
        "def blas(): return sorted({i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas'})\n"
        "before = blas(); one_blas_thread(); print(before, blas())"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    cores = len(os.sched_getaffinity(0))
    default = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert default.stdout.split() == [f"[{cores}]", "[1]"], default
    chosen = subprocess.run([sys.executable, "-c", probe], env=env | {"OPENBLAS_NUM_THREADS": "2"},
                            capture_output=True, text=True, check=True)  # fmt: skip
    assert chosen.stdout.split() == ["[2]", "[2]"], chosen
