"""What a big JSON body's scan costs the event loop (`api/json_body.py: check_json_body`).

    .venv/bin/python -m bench.body_scan [--megabytes 10] [--rounds 5]

For three bodies of the given size (one attachment's base64 blob: one long string; many
small objects: a long `initialMessages`-like list; the same with `NaN` in a string), prints the scan's own time and the event
loop's longest stall while one request's body is checked as `json_body` checks it
(`checked_json_body`), measured by a task that ticks every millisecond beside it, as a stream's
writes would. The process runs with the server's switch interval (`gateway.server.interpreter.SWITCH_INTERVAL_SECONDS`).
`--inline` checks on the loop whatever the size (as before `SCAN_OFF_LOOP_BYTES`), for the
comparison. Not part of the suite.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import statistics
import sys
import time

from gateway.api import json_body as request_limits
from gateway.server.interpreter import SWITCH_INTERVAL_SECONDS


def bodies(megabytes: float) -> dict[str, bytes]:
    size = int(megabytes * 1024 * 1024)
    blob = base64.b64encode(os.urandom(size * 3 // 4)).decode()
    one_string = {"message": {"role": "user", "content": [
        {"type": "text", "text": "Look at this"},
        {"type": "resource", "resource": {"blob": blob, "mimeType": "application/pdf"}}]}}
    item = {"role": "user", "content": [{"type": "text", "text": "a short line of text"}],
            "metadata": {"n": 12345, "ok": True}}
    count = size // len(json.dumps(item))
    many = {"message": {"role": "user", "content": "hi"}, "initialMessages": [item] * count}
    # The same objects with `NaN` in one string's text: costs what the body without it does
    # (a string's text is never read number by number).
    named = {**many, "message": {"role": "user", "content": "is NaN a number?"}}
    return {"one long string": json.dumps(one_string).encode(),
            "many small objects": json.dumps(many).encode(),
            "many small objects, NaN in a string": json.dumps(named).encode()}


async def longest_stall(raw: bytes, inline: bool) -> tuple[float, float]:
    """(the check's wall time, the loop's longest gap between two 1 ms ticks meanwhile)."""
    stalls: list[float] = []
    done = asyncio.Event()

    async def tick() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            stalls.append(now - last)
            last = now

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0.01)
    started = time.perf_counter()
    if inline:
        request_limits.check_json_body(raw, 64)
    else:
        await request_limits.checked_json_body(raw, 64)
    took = time.perf_counter() - started
    done.set()
    await ticker
    return took, max(stalls)


async def main(megabytes: float, rounds: int, inline: bool) -> None:
    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
    for name, raw in bodies(megabytes).items():
        started = time.perf_counter()
        request_limits.scan_json(raw)
        scan = time.perf_counter() - started
        results = [await longest_stall(raw, inline) for _ in range(rounds)]
        print(f"{name}: {len(raw) / 1e6:.1f} MB, scan {scan * 1000:.0f} ms; "
              f"{'inline' if inline else 'as served'}: check "
              f"{statistics.median(r[0] for r in results) * 1000:.0f} ms, loop's longest stall "
              f"{statistics.median(r[1] for r in results) * 1000:.1f} ms (median of {rounds})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--inline", action="store_true")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.megabytes, arguments.rounds, arguments.inline))
