"""The auth hook: one dependency on every /v1 route. A no-op until a token is configured."""

from __future__ import annotations

import hmac
import ipaddress

from fastapi import HTTPException, Request, status


def require_token(request: Request) -> None:
    token = request.app.state.settings.token
    if token is None:
        return
    header = request.headers.get("authorization", "")
    scheme, _, given = header.partition(" ")
    # compare_digest: the time taken does not reveal how much of the token matched.
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.encode(), token.get_secret_value().encode()):
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "missing or wrong bearer token; send `Authorization: Bearer $SEMSEARCH_TOKEN`",
            headers={"WWW-Authenticate": "Bearer"},
        )


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
