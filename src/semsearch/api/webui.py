"""The web UI: a static page and its two assets, shipped inside the package (`api/web/`).

No framework, no build step and no CDN: the page is plain HTML, CSS and one JavaScript
module that calls the same /v1 endpoints as every other client, so it works on an
offline server exactly as it does on a laptop. Its Content-Security-Policy is set in
`middleware.PagePolicy`, beside the docs pages'.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter, HTTPException
from fastapi.responses import Response

ASSETS = files("semsearch.api") / "web"
TYPES = {
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    "icon.svg": "image/svg+xml",
}
# A page that changed on upgrade must not be served from a stale cache.
HEADERS = {"Cache-Control": "no-cache"}

router = APIRouter(include_in_schema=False)


@router.get("/")
def page() -> Response:
    return Response((ASSETS / "index.html").read_bytes(), media_type="text/html; charset=utf-8", headers=HEADERS)


@router.get("/ui/{name}")
def asset(name: str) -> Response:
    if name not in TYPES:
        raise HTTPException(404, f"/ui/{name} is not part of the web UI; open / instead")
    return Response((ASSETS / name).read_bytes(), media_type=TYPES[name], headers=HEADERS)
