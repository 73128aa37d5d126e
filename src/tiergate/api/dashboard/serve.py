"""Serve the dashboard's static files from the installed package.

Only the files listed in ASSETS are served (no directory walking), each with an
explicit content type, a strict Content-Security-Policy (scripts, styles and
fetches from this origin only; no inline script), `no-cache` plus an ETag so a
gateway upgrade is picked up at once, and no framing. It is a Mount, not a Route,
so the OpenAPI test's "every Route is documented" rule keeps covering the API
only; `/dashboard` redirects to `/dashboard/` (Starlette's slash redirect), which
keeps the pages' relative asset URLs right.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route

_JS = "text/javascript; charset=utf-8"
#: file name -> content type; the page is index.html.
ASSETS: dict[str, str] = {
    "index.html": "text/html; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
    "app.js": _JS,
    "api.js": _JS,
    "dom.js": _JS,
    "format.js": _JS,
    "charts.js": _JS,
    "page_overview.js": _JS,
    "page_cache.js": _JS,
    "page_audit.js": _JS,
    "page_sessions.js": _JS,
    "page_shadow.js": _JS,
    "page_value.js": _JS,
    "page_keys.js": _JS,
}

SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-cache",
}


@dataclass(frozen=True, slots=True)
class Asset:
    body: bytes
    media_type: str
    etag: str


@cache
def load_asset(name: str) -> Asset:
    """Read one packaged file once; KeyError for anything not in ASSETS."""
    media_type = ASSETS[name]
    body = resources.files(__package__).joinpath("static", name).read_bytes()
    return Asset(body, media_type, '"' + hashlib.sha256(body).hexdigest()[:20] + '"')


def _respond(name: str, request: Request) -> Response:
    if name not in ASSETS:
        raise HTTPException(404)
    asset = load_asset(name)
    headers = {**SECURITY_HEADERS, "etag": asset.etag}
    if request.headers.get("if-none-match") == asset.etag:
        return Response(status_code=304, headers=headers)
    return Response(asset.body, 200, headers, media_type=asset.media_type)


async def _index(request: Request) -> Response:
    return _respond("index.html", request)


async def _asset(request: Request) -> Response:
    return _respond(request.path_params["name"], request)


def dashboard_mount(path: str = "/dashboard") -> Mount:
    """The dashboard's routes, to add to the app's route list."""
    return Mount(
        path,
        routes=[
            Route("/", _index, methods=["GET", "HEAD"]),
            Route("/{name}", _asset, methods=["GET", "HEAD"]),
        ],
    )
