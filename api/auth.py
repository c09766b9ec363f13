"""The auth hook: one dependency on every /v1 route. A no-op until a token is configured."""

from __future__ import annotations

from fastapi import HTTPException, Request, status

from semsearch.security import bearer_matches


def require_token(request: Request) -> None:
    token = request.app.state.settings.token
    if token is None:
        return
    if not bearer_matches(request.headers.get("authorization", ""), token.get_secret_value()):
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "missing or wrong bearer token; send `Authorization: Bearer $SEMSEARCH_TOKEN`",
            headers={"WWW-Authenticate": "Bearer"},
        )
