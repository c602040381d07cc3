"""What a refused run start costs the event loop: CPU per 503 `OVERLOADED`, in-process.

    .venv/bin/python -m bench.refusal_cost [--requests 2000]

The whole app (`create_app`, its lifespan run, SQLite in a temporary directory) with its start
gate held saturated, called directly as ASGI (no server, no socket: what is left is the app's
own work on the loop) with `POST /v1/threads/runs` carrying a valid key and a 1 KB body, as a
client past capacity would. Prints the loop thread's CPU per refusal (`time.thread_time`) and
checks that each answer is the 503. A refusal waits for the loop as long as it is late, so its
wall time is the loop's (bench/README.md, "Where a start waits"); its CPU is what every refusal
takes from the runs the process carries. Not part of the suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
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
        saturated = gate.saturation
        gate.max_active = 1  # the process is full: every start is refused
        gate._active = lambda: 1
        assert saturated() is not None
        samples = []
        for _ in range(5):
            started = time.thread_time()
            for _ in range(requests // 5):
                await app(dict(scope), receive, send)
            samples.append((time.thread_time() - started) / (requests // 5) * 1e6)
    assert set(statuses) == {503}, set(statuses)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="refusal-cost-")
    os.environ.update({"GATEWAY_DATABASE_URL": f"sqlite+aiosqlite:///{workdir}/gateway.db",
                       "GATEWAY_API_KEYS": "bench", "GATEWAY_MODEL": "openai/none",
                       "GATEWAY_MODEL_API_KEY": "sk-none", "GATEWAY_LOG_LEVEL": "warning"})
    samples = asyncio.run(refusals(args.requests))
    load = open("/proc/loadavg").read().split()[:3]
    print(f"CPU per refused start: median {statistics.median(samples):.0f} µs "
          f"(rounds: {', '.join(f'{s:.0f}' for s in samples)}); load average {' '.join(load)}")


if __name__ == "__main__":
    main()
