"""The bare limit from outside: `bench/start_cost.py`'s bare app (the same request, the upstream
read through aiohttp as the gateway reads it, and five events through sse-starlette, nothing
stored, no middleware, no auth) served by uvicorn in its own process with the same options as
`gateway serve` (its event loop, listening socket and HTTP protocol: `gateway.server.serve`,
`gateway.cli.main.listen`; uvicorn's own main loop).
`bench/concurrency.py` measures its CPU per start from outside exactly as the gateway's
(`cpu_cost`), so the gateway's figure has the least any server built on the same stack pays
beside it.

    .venv/bin/python -m bench.relay <upstream url> <port>
"""

from __future__ import annotations

import sys

from starlette.responses import PlainTextResponse
from starlette.routing import Route


def main() -> None:
    import uvicorn

    from bench.start_cost import bare_app
    from gateway.cli.main import listen
    from gateway.server.serve import event_loop, http_protocol

    upstream_url, port = sys.argv[1], int(sys.argv[2])
    app = bare_app(upstream_url)
    app.router.routes.append(Route("/health", lambda _: PlainTextResponse("ok")))
    sock = listen("127.0.0.1", port)  # given to uvicorn, as `gateway serve` does
    uvicorn.Server(uvicorn.Config(app, log_level="warning", log_config=None,
                                  timeout_graceful_shutdown=5, loop=event_loop(),
                                  http=http_protocol())
                   ).run(sockets=[sock])


if __name__ == "__main__":
    main()
