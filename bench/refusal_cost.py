"""What a refused run start costs the event loop: CPU per 503 `OVERLOADED`, in-process.

    .venv/bin/python -m bench.refusal_cost [--requests 2000]

The whole app (`create_app`, its lifespan run, SQLite in a temporary directory) called
directly as ASGI (no server, no socket: what is left is the app's own work on the loop), full:
`GATEWAY_MAX_ACTIVE_RUNS=1` and one run going, its model call waiting on an upstream that never
answers (a listening socket nobody accepts from). Then `POST /v1/threads/runs` carrying a valid
key and a 1 KB body, as a client past capacity would. Prints the loop thread's CPU per refusal
(`time.thread_time`) and checks that each answer is the 503. A refusal waits for the loop as
long as it is late, so its wall time is the loop's; its CPU is what every refusal takes from the
runs the process carries (docs/decisions/0027-refusal-at-the-door.md). `--env NAME=value` sets
a setting (`GATEWAY_STOCK_RUNTIME=front`: the same checks as starlette's middleware). Not part
of the suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import tempfile
import time
from typing import Any


async def refusals(requests: int) -> list[float]:
    from gateway.app import create_app
    from gateway.config import load_settings

    app = create_app(load_settings())
    body = json.dumps({"message": {"role": "user", "content": [
        {"type": "text", "text": "x" * 1000}]}, "thread": {"userKey": "bench"}}).encode()
    scope: dict[str, Any] = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/v1/threads/runs", "raw_path": b"/v1/threads/runs",
        "query_string": b"", "root_path": "", "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8000),
        "headers": [(b"host", b"127.0.0.1"), (b"x-api-key", b"bench"),
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode())]}
    statuses: list[int] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    async with app.router.lifespan_context(app):
        gate = app.state.services.runs.start_gate
        going = asyncio.create_task(app(dict(scope), receive, send))  # the one run it holds
        for _ in range(500):
            if gate.saturation() is not None:
                break
            await asyncio.sleep(0.01)
        assert gate.saturation() is not None, "the run did not start"
        statuses.clear()
        samples = []
        for _ in range(5):
            started = time.thread_time()
            for _ in range(requests // 5):
                await app(dict(scope), receive, send)
            samples.append((time.thread_time() - started) / (requests // 5) * 1e6)
        going.cancel()
    assert set(statuses) == {503}, set(statuses)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--env", action="append", default=[], help="NAME=value setting")
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="refusal-cost-")
    silent = socket.create_server(("127.0.0.1", 0))  # accepts nothing: the model never answers
    os.environ.update({"GATEWAY_DATABASE_URL": f"sqlite+aiosqlite:///{workdir}/gateway.db",
                       "GATEWAY_API_KEYS": "bench", "GATEWAY_MODEL": "openai/none",
                       "GATEWAY_MODEL_API_BASE": f"http://127.0.0.1:{silent.getsockname()[1]}/v1",
                       "GATEWAY_MODEL_API_KEY": "sk-none", "GATEWAY_LOG_LEVEL": "warning",
                       "GATEWAY_MAX_ACTIVE_RUNS": "1",
                       **dict(item.split("=", 1) for item in args.env)})
    samples = asyncio.run(refusals(args.requests))
    silent.close()
    load = open("/proc/loadavg").read().split()[:3]
    print(f"CPU per refused start: median {statistics.median(samples):.0f} µs "
          f"(rounds: {', '.join(f'{s:.0f}' for s in samples)}); load average {' '.join(load)}")


if __name__ == "__main__":
    main()
