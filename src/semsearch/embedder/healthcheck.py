"""`python -m semsearch.embedder.healthcheck [ADDR]`: exit 0 when the embedder reports SERVING (compose healthcheck)."""

from __future__ import annotations

import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from semsearch.config import Settings


def main() -> None:
    settings = Settings()
    address = sys.argv[1] if len(sys.argv) > 1 else f"127.0.0.1:{settings.embedder_port}"
    with grpc.insecure_channel(address) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=3)
        except grpc.RpcError as exc:
            sys.exit(f"embedder at {address}: {exc.code().name}")  # type: ignore[attr-defined]
    sys.exit(0 if reply.status == health_pb2.HealthCheckResponse.SERVING else 1)


if __name__ == "__main__":
    main()
