"""Embeddings from an OpenAI-compatible server (Ollama, LM Studio, vLLM, llama.cpp's server, Text
Embeddings Inference) behind the same gRPC contract: the API, the indexer and every client are
unchanged, and this service stays the one place that embeds.

`POST {SEMSEARCH_EMBEDDINGS_URL}/embeddings` with `{"model", "input": [...], "encoding_format":
"base64"}` (a server that ignores the format and answers floats is read too), at most
`embeddings_batch` inputs a call, halved when the server says a call is too large (413, or a 400
that says so). 429 and 5xx are retried with exponential back-off, honouring `Retry-After`; a call
that outlives the timeout is retried the same way. Queries never queue behind indexing here:
they go out on their own connection while bulk calls are in flight.

Token counts (the chunker's budget) come from a local `tokenizer.json` when one is given
(`SEMSEARCH_EMBEDDINGS_TOKENIZER`); otherwise from a conservative estimate, one token per
`CHARS_PER_TOKEN` characters (WordPiece and BPE tokenizers average ~4 on English, ~3 on code).

The key (`SEMSEARCH_EMBEDDINGS_KEY`) goes in the Authorization header and nowhere else: errors
name the URL and the status, never a header, and what the server says is redacted.
"""

from __future__ import annotations

import base64
import email.utils
import logging
import math
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import grpc
import httpx
import numpy as np
from tokenizers import Tokenizer

from semsearch.config import Settings
from semsearch.embedder.model import ModelError
from semsearch.embedder.server import EmbedderService
from semsearch.limits import MAX_EMBED_INPUTS
from semsearch.proto import embedder_pb2 as pb

log = logging.getLogger("semsearch.embedder")

CHARS_PER_TOKEN = 3  # the estimate without a tokenizer: errs towards more tokens, so chunks stay in the window
ATTEMPTS = 6  # a call is tried this often before the request fails
MAX_BACKOFF_S = 30.0


class EndpointError(ModelError):
    """The endpoint refused or could not be reached; the message names the URL and the status."""


class Endpoint:
    def __init__(
        self,
        url: str,
        model: str,
        key: str | None = None,
        batch: int = 32,
        timeout_s: float = 60.0,
        tokenizer: Path | None = None,
        window: int = 256,
    ) -> None:
        self.url = url.rstrip("/") + "/embeddings"
        self.model = model
        self.batch = max(1, min(batch, MAX_EMBED_INPUTS))
        self.window = window
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._key = key
        self._timeout = timeout_s
        self._bulk = httpx.Client(timeout=timeout_s)
        self._queries = httpx.Client(timeout=timeout_s)  # a query never waits for a bulk call's connection
        self._lock = threading.Lock()
        self._tokenizer: Tokenizer | None = None
        self.special_tokens = 2  # [CLS] and [SEP] without a tokenizer to ask
        if tokenizer is not None:
            self._tokenizer = Tokenizer.from_file(str(tokenizer))
            self._tokenizer.no_padding()
            self._tokenizer.no_truncation()
            self.special_tokens = len(self._tokenizer.encode("", add_special_tokens=True).ids)
        # The probe, once: at start a dead or misconfigured endpoint is one line, not minutes of retries.
        self.dimension = len(self._call(["semsearch"], urgent=True, attempts=1)[0])
        parts = urlsplit(url)
        self.model_id = f"{model}@{parts.hostname}{f':{parts.port}' if parts.port else ''}{parts.path.rstrip('/')}"
        self.quantisation = "as the endpoint serves it"
        self.runtime = f"OpenAI-compatible endpoint {self.url}"

    @classmethod
    def from_settings(cls, settings: Settings) -> Endpoint:
        if not settings.embeddings_model:
            raise EndpointError(
                "SEMSEARCH_EMBEDDINGS_URL is set but SEMSEARCH_EMBEDDINGS_MODEL is not; name the embedding model "
                "the server serves (e.g. nomic-embed-text for Ollama)"
            )
        key = settings.embeddings_key.get_secret_value() if settings.embeddings_key else None
        return cls(
            str(settings.embeddings_url),
            settings.embeddings_model,
            key,
            settings.embeddings_batch,
            settings.embeddings_timeout_s,
            settings.embeddings_tokenizer,
            settings.max_seq_length,
        )

    def count_tokens(self, texts: list[str]) -> list[int]:
        if self._tokenizer is None:
            return [math.ceil(len(t) / CHARS_PER_TOKEN) for t in texts]
        return [len(e.ids) for e in self._tokenizer.encode_batch(texts, add_special_tokens=False)]

    def embed(self, texts: list[str], urgent: bool = False) -> np.ndarray:
        """Unit vectors, in input order; calls of at most `batch` inputs (halved when refused as too large)."""
        out: list[np.ndarray] = []
        start = 0
        while start < len(texts):
            part = texts[start : start + self.batch]
            try:
                out.append(self._call(part, urgent))
            except _TooLarge:
                if self.batch == 1:
                    raise EndpointError(f"{self.url} refuses even one input as too large") from None
                with self._lock:
                    self.batch = max(1, self.batch // 2)
                log.warning("%s refused %d inputs in one call; sending %d", self.url, len(part), self.batch)
                continue
            start += len(part)
        vectors = np.vstack(out) if out else np.empty((0, self.dimension), dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return (vectors / np.clip(norms, 1e-12, None)).astype(np.float32)

    def _call(self, texts: list[str], urgent: bool, attempts: int = ATTEMPTS) -> np.ndarray:
        body = {"model": self.model, "input": texts, "encoding_format": "base64"}
        client = self._queries if urgent else self._bulk
        failure = "was not called"
        for attempt in range(attempts):
            wait = min(MAX_BACKOFF_S, 0.5 * 2**attempt)
            try:
                answer = client.post(self.url, json=body, headers=self._headers)
            except httpx.TimeoutException:
                failure = f"did not answer within {self._timeout:.0f} s"
            except httpx.HTTPError as exc:
                failure = f"cannot be reached ({type(exc).__name__})"
            else:
                if answer.status_code == 200:
                    return self._vectors(answer, len(texts))
                said = self._said(answer)
                if answer.status_code == 413 or (
                    answer.status_code == 400 and "too" in said.lower() and len(texts) > 1
                ):
                    raise _TooLarge
                failure = f"answered {answer.status_code} {answer.reason_phrase}: {said}"
                if answer.status_code != 429 and answer.status_code < 500:
                    raise EndpointError(f"{self.url} {failure}; {self._advice(answer.status_code)}")
                wait = _retry_after(answer) or wait
            if attempt + 1 < attempts:
                log.warning("%s %s; retrying in %.1f s", self.url, failure, wait)
                time.sleep(wait)  # back-off between a server's refusals, not a wait for a test
        tried = f" ({attempts} attempts)" if attempts > 1 else ""
        raise EndpointError(f"{self.url} {failure}{tried}; check that the server is up and SEMSEARCH_EMBEDDINGS_URL")

    def _vectors(self, answer: httpx.Response, count: int) -> np.ndarray:
        try:
            items = sorted(answer.json()["data"], key=lambda item: item["index"])
            rows = [
                np.frombuffer(base64.b64decode(e), dtype="<f4") if isinstance(e, str) else np.asarray(e, np.float32)
                for e in (item["embedding"] for item in items)
            ]
        except (ValueError, KeyError, TypeError) as exc:
            raise EndpointError(f"{self.url} answered 200 but not an embeddings list ({type(exc).__name__})") from exc
        if len(rows) != count or len({len(r) for r in rows}) != 1:
            raise EndpointError(f"{self.url} answered {len(rows)} vectors of uneven width for {count} inputs")
        return np.vstack(rows).astype(np.float32)

    def _said(self, answer: httpx.Response) -> str:
        text = " ".join(answer.text.split())[:300]
        return text.replace(self._key, "[REDACTED]") if self._key else text  # a server may echo the header

    def _advice(self, status: int) -> str:
        if status in (401, 403):
            return "check SEMSEARCH_EMBEDDINGS_KEY"
        if status == 404:
            return "check SEMSEARCH_EMBEDDINGS_URL (it ends in /v1) and SEMSEARCH_EMBEDDINGS_MODEL"
        return "check SEMSEARCH_EMBEDDINGS_MODEL and the server's log"


class _TooLarge(Exception):
    """The server refused a call as too large: send fewer inputs."""


def _retry_after(answer: httpx.Response) -> float | None:
    value = answer.headers.get("retry-after")
    if not value:
        return None
    try:
        return min(MAX_BACKOFF_S, max(0.0, float(value)))
    except ValueError:
        when = email.utils.parsedate_to_datetime(value) if value else None
        return None if when is None else min(MAX_BACKOFF_S, max(0.0, (when - datetime.now(UTC)).total_seconds()))


class EndpointService(EmbedderService):
    """`EmbedderService` over an endpoint: the same Info and CountTokens (the endpoint answers what
    a model answers: id, width, window, counts); Embed forwards the texts instead of token ids."""

    def __init__(self, endpoint: Endpoint) -> None:
        super().__init__(endpoint, 0.0)  # type: ignore[arg-type]  # an Endpoint quacks as the Encoder Info reads
        self.encoder: Endpoint = endpoint  # type: ignore[assignment]
        self.cpu = "the endpoint's (not this machine's)"

    def warm_up(self) -> None:
        started = time.perf_counter()
        self.encoder.embed(["semsearch warm-up"] * 4)
        self.chunks_per_second = 4 / max(time.perf_counter() - started, 1e-6)

    def Embed(self, request: pb.EmbedRequest, context: grpc.ServicerContext) -> pb.EmbedResponse:
        n = len(request.inputs)
        if n > MAX_EMBED_INPUTS:
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"{n} inputs in one request; send at most {MAX_EMBED_INPUTS}"
            )
        texts = [item.text for item in request.inputs]
        urgent = any(item.kind == pb.INPUT_KIND_QUERY for item in request.inputs)
        try:
            vectors = self.encoder.embed(texts, urgent)
        except EndpointError as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        counts = self.encoder.count_tokens(texts)
        return pb.EmbedResponse(
            vectors=vectors.astype("<f4").tobytes(),
            count=n,
            dimension=self.encoder.dimension,
            model_id=self.encoder.model_id,
            truncated=[c + self.encoder.special_tokens > self.encoder.window for c in counts],
        )
