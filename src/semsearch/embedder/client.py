"""gRPC client for the embedder, used by the API (queries) and the indexer (documents).

One address or a pool: `host1:8766,host2:8766`, or `dns:///embedder:8766` (every address the
name resolves to: a Kubernetes headless Service). A pool is balanced round-robin by gRPC itself,
with client-side health checking against each replica's standard health service, so a replica
that dies or reports NOT_SERVING is skipped; a call that was in flight on it fails UNAVAILABLE
and is retried (below) on the others.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from functools import partial

import grpc
import numpy as np

from semsearch.limits import MAX_EMBED_MESSAGE_BYTES as MAX_MESSAGE_BYTES
from semsearch.proto import embedder_pb2 as pb
from semsearch.proto import embedder_pb2_grpc as pb_grpc

# What an embedder that is stopping, restarting or overloaded answers: worth waiting out.
TRANSIENT = (
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.ABORTED,
)


# gRPC's service config: spread calls over every address, each checked by the health service.
POOL_CONFIG = json.dumps({"loadBalancingConfig": [{"round_robin": {}}], "healthCheckConfig": {"serviceName": ""}})


def _listed(address: str) -> list[str]:
    """The replicas of a comma list (empty for one address or a resolver target)."""
    return [part for part in (p.strip() for p in address.split(",")) if part] if "," in address else []


def calls_in_flight(address: str, asked: int | None = None) -> int:
    """Embed calls a run keeps in flight: as `asked` (SEMSEARCH_EMBED_IN_FLIGHT), else one per
    replica of a comma list; a `dns:///` pool's size is not known here, so a few; else one."""
    if asked is not None:
        return asked
    listed = _listed(address)
    return len(listed) if listed else 4 if address.startswith("dns:") else 1


def grpc_target(address: str) -> str:
    """What gRPC dials for an address: a comma list becomes a static list of resolved IPs (gRPC's
    `ipv4:`/`ipv6:` schemes take addresses, not names); anything else is passed as it is."""
    listed = _listed(address)
    if not listed:
        return address
    resolved: list[str] = []
    for part in listed:
        host, _, port = part.rpartition(":")
        if not host or not port.isdigit():
            raise EmbedderError(f"{part!r} in SEMSEARCH_EMBEDDER_ADDR is not host:port; write host1:8766,host2:8766")
        try:
            infos = socket.getaddrinfo(host.strip("[]"), int(port), type=socket.SOCK_STREAM)
        except OSError as exc:
            raise EmbedderError(
                f"embedder host {host!r} does not resolve ({exc}); check SEMSEARCH_EMBEDDER_ADDR"
            ) from exc
        ip = str(infos[0][4][0])
        resolved.append(f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}")
    family = "ipv6" if all(r.startswith("[") for r in resolved) else "ipv4"
    if family == "ipv4" and any(r.startswith("[") for r in resolved):
        raise EmbedderError("SEMSEARCH_EMBEDDER_ADDR mixes IPv4 and IPv6 replicas; use one family")
    return f"{family}:{','.join(resolved)}"


class EmbedderError(RuntimeError):
    """The embedder could not answer; the message says what to do."""


class EmbedderClient:
    def __init__(self, address: str, timeout: float = 60.0, retry_for_s: float = 0.0) -> None:
        self.address = address
        self.timeout = timeout
        self.retry_for_s = retry_for_s  # the indexer waits out an embedder restart; queries fail fast
        self._channel = grpc.insecure_channel(
            grpc_target(address),
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.service_config", POOL_CONFIG),
            ],
        )
        self._stub = pb_grpc.EmbedderStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def _call(self, method: str, request: object) -> object:
        deadline = time.monotonic() + self.retry_for_s
        delay = 0.25
        while True:
            try:
                return getattr(self._stub, method)(request, timeout=self.timeout)
            except grpc.RpcError as exc:
                code = exc.code()  # type: ignore[attr-defined]
                if code not in TRANSIENT:
                    raise EmbedderError(f"embedder at {self.address} failed: {exc.details()}") from exc  # type: ignore[attr-defined]
                if time.monotonic() + delay > deadline:
                    raise EmbedderError(self._gave_up(code)) from exc
                time.sleep(delay)  # exponential backoff: the embedder may be restarting
                delay = min(delay * 2, 5.0)

    def _gave_up(self, code: grpc.StatusCode) -> str:
        waited = f" after retrying for {self.retry_for_s:.0f} s" if self.retry_for_s else ""
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:  # it took the call and never answered: up, but stuck or slow
            return (
                f"embedder at {self.address} did not answer within {self.timeout:g} s{waited}; it is up but busy "
                "or stuck: see its log, and on few cores raise SEMSEARCH_EMBEDDER_TIMEOUT_S"
            )
        return (
            f"embedder at {self.address} is not reachable ({code.name.lower()}){waited}; "
            "start it with `semsearch serve` or `docker compose up embedder`"
        )

    def info(self) -> pb.InfoResponse:
        return self._call("Info", pb.InfoRequest())  # type: ignore[return-value]

    def count_tokens(self, texts: list[str]) -> list[int]:
        if not texts:
            return []
        response: pb.CountTokensResponse = self._call("CountTokens", pb.CountTokensRequest(texts=texts))  # type: ignore[assignment]
        return list(response.counts)

    def embed(self, texts: list[str], query: bool = False) -> np.ndarray:
        """Unit vectors, one row per text, as float32."""
        if not texts:
            return np.empty((0, 0), dtype=np.float32)
        kind = pb.INPUT_KIND_QUERY if query else pb.INPUT_KIND_DOCUMENT
        request = pb.EmbedRequest(inputs=[pb.EmbedInput(text=t, kind=kind) for t in texts])
        response: pb.EmbedResponse = self._call("Embed", request)  # type: ignore[assignment]
        return np.frombuffer(response.vectors, dtype="<f4").reshape(response.count, response.dimension)

    def embed_query(self, text: str) -> tuple[np.ndarray, str]:
        """One query vector (scheduled ahead of bulk work) and the id of the model that made it."""
        request = pb.EmbedRequest(inputs=[pb.EmbedInput(text=text, kind=pb.INPUT_KIND_QUERY)])
        response: pb.EmbedResponse = self._call("Embed", request)  # type: ignore[assignment]
        return np.frombuffer(response.vectors, dtype="<f4"), response.model_id

    def start_query(self, text: str) -> Callable[[], tuple[np.ndarray, str]]:
        """The query's request sent now; the call returned waits for the vector. A failed call is made
        again through `embed_query` (its retries and its errors)."""
        request = pb.EmbedRequest(inputs=[pb.EmbedInput(text=text, kind=pb.INPUT_KIND_QUERY)])
        try:
            pending = self._stub.Embed.future(request, timeout=self.timeout)
        except grpc.RpcError:
            return partial(self.embed_query, text)

        def answer() -> tuple[np.ndarray, str]:
            try:
                response: pb.EmbedResponse = pending.result()
            except grpc.RpcError:
                return self.embed_query(text)
            return np.frombuffer(response.vectors, dtype="<f4"), response.model_id

        return answer
