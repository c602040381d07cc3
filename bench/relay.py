"""The bare limit from outside: `bench/start_cost.py`'s bare app (the same request, upstream call
and five events through sse-starlette, nothing stored, no middleware, no auth) served by uvicorn
in its own process with the same options as `gateway serve` (uvloop and httptools when installed,
as uvicorn picks them). `bench/concurrency.py` measures its CPU per start from outside exactly as
the gateway's (`cpu_cost`), so the gateway's figure has the least any server built on the same
stack pays beside it.

    .venv/bin/python -m bench.relay <upstream url> <port>
"""

from __future__ import annotations

import sys

from starlette.responses import PlainTextResponse
from starlette.routing import Route


def main() -> None:
    import uvicorn

    from bench.start_cost import bare_app

    upstream_url, port = sys.argv[1], int(sys.argv[2])
    app = bare_app(upstream_url)
    app.router.routes.append(Route("/health", lambda _: PlainTextResponse("ok")))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", log_config=None,
                timeout_graceful_shutdown=5)


if __name__ == "__main__":
    main()
