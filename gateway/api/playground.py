"""`GET /`: the playground, a page for trying the API in a browser, served by the gateway itself.

Its files are plain HTML, CSS and JavaScript shipped in the package (`gateway/web/`, served under
`/web/`): no build step, nothing fetched from elsewhere (the Content-Security-Policy forbids it),
so it works offline. It calls the same public API as any client, with the API key the user types
in.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Mount, Route

from .static_files import PAGE_HEADERS, AssetFiles

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
