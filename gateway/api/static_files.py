"""Static assets (the playground's, Swagger UI's) served with a strict policy.

Only assets are served from these directories: scripts, styles, images and fonts. Their HTML
pages are not (the playground's `index.html` and Swagger UI's stock `index.html`, which loads a
document from an outside URL, would otherwise be reachable as `/web/index.html` and
`/docs/swagger-ui/index.html`, without the pages' Content-Security-Policy); the gateway serves
its own pages from routes that set it. Every asset carries a Content-Security-Policy that allows
nothing, so no file is ever run as a page (and, as every response, `X-Content-Type-Options:
nosniff`, set by the front, `server/front.py`).
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

ASSET_SUFFIXES = (".js", ".css", ".png", ".svg", ".ico", ".woff", ".woff2")
# For a page's own headers too (never sniffed: that header is on every response).
PAGE_HEADERS = {"Cache-Control": "no-cache"}
ASSET_POLICY = "default-src 'none'; frame-ancestors 'none'; sandbox"


class AssetFiles(StaticFiles):
    async def get_response(self, path: str, scope: Scope) -> Response:
        if not path.endswith(ASSET_SUFFIXES):
            raise HTTPException(status_code=404)
        response = await super().get_response(path, scope)
        response.headers["Content-Security-Policy"] = ASSET_POLICY
        return response
