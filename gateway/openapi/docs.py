"""`GET /openapi.json` and `GET /docs`: the API document, and Swagger UI on it.

Swagger UI renders the document's markdown, shows each operation's request and response
examples, and lets a developer try calls. Its assets come from a Python dependency
(`swagger-ui-bundle-v2`) and are served by the gateway itself, so the page works on an
air-gapped machine; the Content-Security-Policy keeps every request on this origin.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Mount, Route
from swagger_ui_bundle import swagger_ui_path

from ..api.playground import PAGE_HEADERS, AssetFiles
from .document import openapi_text

PAGE = Path(__file__).resolve().parent.parent / "web" / "docs.html"
# Swagger UI sets inline styles from React, hence 'unsafe-inline' for styles (never scripts).
POLICY = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
          "connect-src 'self'; img-src 'self' data:; font-src 'self'; base-uri 'none'; "
          "form-action 'none'; frame-ancestors 'none'")


async def openapi_json(_: Request) -> Response:
    return Response(openapi_text(), media_type="application/json")


async def docs(_: Request) -> Response:
    return FileResponse(PAGE, media_type="text/html",
                        headers={"Content-Security-Policy": POLICY, **PAGE_HEADERS})


routes = [
    Route("/openapi.json", openapi_json, methods=["GET"]),
    Route("/docs", docs, methods=["GET"]),
    Mount("/docs/swagger-ui", AssetFiles(directory=str(swagger_ui_path)), name="swagger-ui"),
]
