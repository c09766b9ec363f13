"""The embedding model in this process, with the gRPC client's methods.

Each call goes through the same servicer the gRPC server runs — its batching by length and its
query-first gate (a search's embedding interrupts a bulk batch) — without the transport, so a
vector made here is the vector the service makes for the same text.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np

from semsearch.config import Settings
from semsearch.embedder.client import EmbedderError
from semsearch.embedder.endpoint import Endpoint, EndpointService
from semsearch.embedder.model import load
from semsearch.embedder.server import EmbedderService
from semsearch.proto import embedder_pb2 as pb


class _Context:
    """What a servicer method is handed in place of a gRPC context: an abort is an error here."""

    def abort(self, code: object, details: str) -> None:
        raise EmbedderError(details)


class LocalEmbedder:
    address = "in-process"
    retry_for_s = 0.0

    def __init__(self, service: EmbedderService) -> None:
        self.service = service

    @classmethod
    def from_settings(cls, settings: Settings, warm_up: bool = False) -> LocalEmbedder:
        if settings.embeddings_url:
            return cls(EndpointService(Endpoint.from_settings(settings)))
        encoder = load(settings.model, settings.max_seq_length, settings.model_batch_size, settings.threads,
                       settings.model_cache_dir, settings.model_batch_tokens, settings.model_compute,
                       "max_seq_length" in settings.model_fields_set, settings.query_threads)  # fmt: skip
        service = EmbedderService(encoder, settings.query_grace_ms / 1000)
        if warm_up:
            service.warm_up()
        return cls(service)

    def info(self) -> pb.InfoResponse:
        return self.service.Info(pb.InfoRequest(), _Context())  # type: ignore[arg-type]

    def count_tokens(self, texts: list[str]) -> list[int]:
        return self.service.encoder.count_tokens(texts) if texts else []

    def embed(self, texts: list[str], query: bool = False) -> np.ndarray:
        if not texts:
            return np.empty((0, 0), dtype=np.float32)
        kind = pb.INPUT_KIND_QUERY if query else pb.INPUT_KIND_DOCUMENT
        request = pb.EmbedRequest(inputs=[pb.EmbedInput(text=t, kind=kind) for t in texts])
        response = self.service.Embed(request, _Context())  # type: ignore[arg-type]
        return np.frombuffer(response.vectors, dtype="<f4").reshape(response.count, response.dimension)

    def embed_query(self, text: str) -> tuple[np.ndarray, str]:
        request = pb.EmbedRequest(inputs=[pb.EmbedInput(text=text, kind=pb.INPUT_KIND_QUERY)])
        response = self.service.Embed(request, _Context())  # type: ignore[arg-type]
        return np.frombuffer(response.vectors, dtype="<f4"), response.model_id

    def start_query(self, text: str) -> Callable[[], tuple[np.ndarray, str]]:
        """In this process the model and the caller share the cores: it runs when asked for."""
        return partial(self.embed_query, text)

    def close(self) -> None:
        """Nothing to release: the model goes with the object."""
