"""What the layers before the routes cost per request, in-process: calls and loop CPU.

    .venv/bin/python -m bench.request_cost

The whole app (`create_app`, its lifespan run, SQLite in a temporary directory) called directly
as ASGI, no server and no socket, with `GET /health` (the front, the router and a small JSON
answer: nothing stored, no model) and `GET /v1/nowhere` (the 404 problem+json made by the
exception handlers), each with and without an `Origin` header (CORS at work or not). Per request:
Python calls under cProfile (the loop thread; a count the machine's load does not change) and
the loop thread's CPU (`time.thread_time`). The request id, metrics, development guard, CORS,
door, body limit and key lookup are most of what `/health` costs
(docs/decisions/0004-one-layer-front.md); `--env GATEWAY_STOCK_RUNTIME=front` measures them as
starlette's middleware, a layer each. Not part of the suite.
"""

from __future__ import annotations

import cProfile
import json
import pstats
import tempfile
import time
from pathlib import Path
from typing import Any

ORIGIN = (b"origin", b"http://localhost:5173")


async def one(app: Any, path: str, origin: bool) -> None:
    headers = [(b"host", b"127.0.0.1"), *([ORIGIN] if origin else [])]
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
             "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
             "root_path": "", "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000),
             "headers": headers}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        pass

    await app(scope, receive, send)


async def measure(requests: int = 2000, env: dict[str, str] | None = None
                  ) -> dict[str, dict[str, float]]:
    from gateway.app import create_app
    from tests.support.inprocess_app import settings_from

    workdir = Path(tempfile.mkdtemp(prefix="bench-request-"))
    app = create_app(settings_from({
        "GATEWAY_DATABASE_URL": f"sqlite+aiosqlite:///{workdir / 'gateway.db'}", **(env or {})}))
    out: dict[str, dict[str, float]] = {}
    async with app.router.lifespan_context(app):
        for path in ("/health", "/v1/nowhere"):
            for origin in (False, True):
                for _ in range(200):  # warm: lazy imports, caches, metric label children
                    await one(app, path, origin)
                profiler = cProfile.Profile(time.thread_time)
                profiler.enable()
                for _ in range(200):
                    await one(app, path, origin)
                profiler.disable()
                started = time.thread_time()
                for _ in range(requests):
                    await one(app, path, origin)
                cpu_us = (time.thread_time() - started) / requests * 1e6
                calls = pstats.Stats(profiler).total_calls / 200  # type: ignore[attr-defined]
                out[path + (" +Origin" if origin else "")] = {"calls": round(calls),
                                                              "cpu_us": round(cpu_us, 1)}
    return out


def main() -> None:
    import argparse

    import uvloop

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--env", action="append", default=[], help="NAME=value setting")
    args = parser.parse_args()
    result = uvloop.run(measure(args.requests, dict(item.split("=", 1) for item in args.env)))
    load = Path("/proc/loadavg").read_text().split()[:3]
    print(json.dumps({"per_request": result, "load_average": load}))


if __name__ == "__main__":
    main()
