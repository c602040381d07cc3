"""`GET /admin`: the operator console, a static page like the playground (`gateway/web/admin.*`,
the same Content-Security-Policy, no outside asset). It asks for an admin key, keeps it in the
tab's sessionStorage and calls the operator API with it in the `x-api-key` header: never in a
URL, so never in an access log."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

from ..playground import FILES, PAGE_HEADERS, POLICY


async def console(_: Request) -> Response:
    return FileResponse(FILES / "admin.html", media_type="text/html",
                        headers={"Content-Security-Policy": POLICY, **PAGE_HEADERS})


routes = [Route("/admin", console, methods=["GET"])]
