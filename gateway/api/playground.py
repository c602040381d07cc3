"""`GET /`: the playground, a page for trying the API in a browser, served by the gateway itself;
and the static assets of the gateway's pages (the playground's, the console's, Swagger UI's).

Its files are plain HTML, CSS and JavaScript shipped in the package (`gateway/web/`, served under
`/web/`): no build step, nothing fetched from elsewhere (the Content-Security-Policy forbids it),
so it works offline. It calls the same public API as any client, with the API key the user types
in.

Only assets are served from these directories: scripts, styles, images and fonts. Their HTML
pages are not (the playground's `index.html` and Swagger UI's stock `index.html`, which loads a
document from an outside URL, would otherwise be reachable as `/web/index.html` and
`/docs/swagger-ui/index.html`, without the pages' Content-Security-Policy); the gateway serves
its own pages from routes that set it. Every asset carries a Content-Security-Policy that allows
nothing, so no file is ever run as a page (and, as every response, `X-Content-Type-Options:
nosniff`, set by the front, `server/front.py`).
"""

from __future__ import annotations

from pathlib import Path

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Mount, Route
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



FILES = Path(__file__).resolve().parent.parent / "web"
# Everything from this origin only; `connect-src 'self'` also keeps the typed API key here.
POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
          "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


async def playground(_: Request) -> Response:
    return FileResponse(FILES / "index.html", media_type="text/html",
                        headers={"Content-Security-Policy": POLICY, **PAGE_HEADERS})


routes = [
    Route("/", playground, methods=["GET"]),
    Mount("/web", AssetFiles(directory=FILES), name="web"),
]
