"""The gRPC server: Embed, CountTokens, Info, plus standard health and reflection."""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from concurrent import futures
from functools import partial

import grpc
import numpy as np
import onnxruntime as ort
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from semsearch.config import Settings, load_settings
from semsearch.embedder.cpu import detect
from semsearch.embedder.model import Encoder, Interrupted, ModelError, load
from semsearch.embedder.scheduler import PriorityGate
from semsearch.limits import MAX_EMBED_INPUTS as MAX_INPUTS
from semsearch.limits import MAX_EMBED_MESSAGE_BYTES as MAX_MESSAGE_BYTES
from semsearch.malloc import limit_arenas
from semsearch.proto import embedder_pb2 as pb
from semsearch.proto import embedder_pb2_grpc as pb_grpc

log = logging.getLogger("semsearch.embedder")

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["Embedder"].full_name
MAX_PREEMPTIONS = 3  # a bulk batch gives way to queries this often, then runs to the end


WARMUP_TEXT = " ".join(["the quick brown fox jumps over the lazy dog"] * 20)  # ~180 tokens, a typical chunk
WARMUP_CHUNKS = 4
WARMUP_QUERY = "how does the quick brown fox jump"


class EmbedderService(pb_grpc.EmbedderServicer):
    def __init__(self, encoder: Encoder, query_grace_s: float = 0.0) -> None:
        self.encoder = encoder
        self.gate = PriorityGate(query_grace_s)
        self.cpu = detect().line(getattr(encoder, "compute", ""))
        self.chunks_per_second = 0.0
        self._rate_lock = threading.Lock()

    def warm_up(self) -> None:
        """One real batch at start: the first onnxruntime run is slow, and it seeds the rate."""
        started = time.perf_counter()
        self.encoder.embed([WARMUP_TEXT] * WARMUP_CHUNKS)
        self._record(WARMUP_CHUNKS, time.perf_counter() - started)
        self.encoder.embed([WARMUP_QUERY], query=True)  # the queries' session has its own first run

    def _record(self, chunks: int, seconds: float) -> None:
        rate = chunks / max(seconds, 1e-6)
        with self._rate_lock:
            self.chunks_per_second = rate if not self.chunks_per_second else 0.8 * self.chunks_per_second + 0.2 * rate

    def Embed(self, request: pb.EmbedRequest, context: grpc.ServicerContext) -> pb.EmbedResponse:
        n = len(request.inputs)
        if n > MAX_INPUTS:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{n} inputs in one request; send at most {MAX_INPUTS}")
        urgent = any(item.kind == pb.INPUT_KIND_QUERY for item in request.inputs)
        kinds = [item.kind == pb.INPUT_KIND_QUERY for item in request.inputs]
        encodings = self.encoder.tokenize([item.text for item in request.inputs], kinds)
        vectors = np.empty((n, self.encoder.dimension), dtype=np.float32)
        # The whole request is sorted by length first, then run one model batch at a time.
        for idx in self.encoder.batches(encodings):
            vectors[idx] = self._run_batch([encodings[i].ids for i in idx], urgent)
        truncated = [bool(e.overflowing) for e in encodings]
        return pb.EmbedResponse(
            vectors=vectors.astype("<f4").tobytes(),
            count=n,
            dimension=self.encoder.dimension,
            model_id=self.encoder.model_id,
            truncated=truncated,
        )

    def _run_batch(self, ids: list[list[int]], urgent: bool) -> np.ndarray:
        """One model batch through the gate. A bulk batch gives way to a query that arrives
        while it runs (see scheduler.py) and is run again; after MAX_PREEMPTIONS interruptions
        (queries keep coming) it finishes one sequence at a time, so a query then waits for
        one short run at most, and indexing still moves."""
        if urgent:
            with self.gate.hold(urgent=True):
                return self.encoder.run(ids, query=True)
        for _ in range(MAX_PREEMPTIONS):
            options = ort.RunOptions()
            with self.gate.hold(False, partial(setattr, options, "terminate", True)):
                began = time.perf_counter()
                try:
                    vectors = self.encoder.run(ids, options)
                except Interrupted:
                    continue
                self._record(len(ids), time.perf_counter() - began)
                return vectors
        singles = []
        for sequence in ids:
            with self.gate.hold(urgent=False):
                singles.append(self.encoder.run([sequence]))
        return np.vstack(singles)

    def CountTokens(self, request: pb.CountTokensRequest, context: grpc.ServicerContext) -> pb.CountTokensResponse:
        return pb.CountTokensResponse(
            counts=self.encoder.count_tokens(list(request.texts)), special_tokens=self.encoder.special_tokens
        )

    def Info(self, request: pb.InfoRequest, context: grpc.ServicerContext) -> pb.InfoResponse:
        return pb.InfoResponse(
            model_id=self.encoder.model_id,
            dimension=self.encoder.dimension,
            max_sequence_length=self.encoder.window,  # the room for a text: the window less its prompt
            quantisation=self.encoder.quantisation,
            runtime=self.encoder.runtime,
            measured_chunks_per_second=self.chunks_per_second,
            interrupted_batches=self.gate.preemptions,
            cpu=self.cpu,
        )


def build_server(service: EmbedderService, address: str) -> grpc.Server:
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=16),
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ],
    )
    pb_grpc.add_EmbedderServicer_to_server(service, server)
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    for name in ("", SERVICE_NAME):
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    reflection.enable_server_reflection(
        (SERVICE_NAME, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME), server
    )
    if server.add_insecure_port(address) == 0:
        raise OSError(f"cannot listen on {address}: the port is taken or the address is not local")
    return server


def _serve_endpoint(settings: Settings, address: str, started: float) -> None:
    """The same service, forwarding to an OpenAI-compatible endpoint (embedder/endpoint.py)."""
    from semsearch.embedder.endpoint import Endpoint, EndpointService

    try:
        endpoint = Endpoint.from_settings(settings)
        service = EndpointService(endpoint)
        server = build_server(service, address)
    except (ModelError, OSError) as exc:
        sys.exit(f"semsearch embedder: {exc}")
    server.start()
    log.info("serving %s (dim %d) through %s on %s; ready in %.2fs", endpoint.model_id, endpoint.dimension,
             endpoint.url, address, time.perf_counter() - started)  # fmt: skip
    _wait(server)


def _wait(server: grpc.Server) -> None:
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    server.stop(grace=5).wait()


def main(settings: Settings | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s embedder %(levelname)s %(message)s")
    settings = settings or load_settings("semsearch embedder")
    limit_arenas(settings.malloc_arenas)  # before gRPC's and onnxruntime's threads start
    address = f"{settings.embedder_host}:{settings.embedder_port}"
    started = time.perf_counter()
    if settings.embeddings_url:
        _serve_endpoint(settings, address, started)
        return
    try:
        encoder = load(
            settings.model,
            settings.max_seq_length,
            settings.model_batch_size,
            settings.threads,
            settings.model_cache_dir,
            settings.model_batch_tokens,
            settings.model_compute,
            "max_seq_length" in settings.model_fields_set,
            settings.query_threads,
        )
        service = EmbedderService(encoder, settings.query_grace_ms / 1000)
        service.warm_up()
        server = build_server(service, address)
    except (ModelError, OSError) as exc:
        sys.exit(f"semsearch embedder: {exc}")
    server.start()
    log.info(
        "serving %s (dim %d, max %d tokens, %.1f chunks/s) on %s; ready in %.2fs; CPU: %s",
        encoder.model_id,
        encoder.dimension,
        encoder.max_length,
        service.chunks_per_second,
        address,
        time.perf_counter() - started,
        service.cpu,
    )
    _wait(server)
