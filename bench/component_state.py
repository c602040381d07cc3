"""Component state update latencies on loopback.

    .venv/bin/python -m bench.component_state [--updates 200]

Starts the scripted OpenAI-compatible model in this process and two real gateway processes on
one SQLite database (as `tests/` does), renders a component, then measures:

- `POST .../state` with a one-op patch, one after another (small state, and a 2,000-row table);
- 50 patches at once on one process, and split over two processes (compare-and-set retries);
- a patch posted during a live run to its `tambo.component.state_delta` reaching a subscriber.

Prints median / p90 / p99 / max in milliseconds. Not part of the pass/fail suite.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import threading
import time
from pathlib import Path

import httpx

from bench.lifecycle import summary
from tests.conftest import scripted_env
from tests.support.gateway_server import GatewayServer
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import iter_events

TABLE = {"name": "Table", "description": "A table", "propsSchema": {"type": "object"}}
HEADERS = {"x-api-key": "bench"}


def table_turn(*extra: dict) -> list[dict]:
    return [{"tool_call": {"index": 0, "id": "call_t", "name": "show_component_Table",
                           "arguments": '{"title": "bench"}'}}, *extra]


def body(text: str) -> dict:
    return {"message": {"role": "user", "content": [{"type": "text", "text": text}]},
            "availableComponents": [TABLE], "thread": {"userKey": "bench"}}


def render(http: httpx.Client, model: ScriptedModel) -> str:
    """A finished run that rendered one component; returns its state URL."""
    model.enqueue(table_turn())
    with http.stream("POST", "/v1/threads/runs", json=body("table"),
                     headers={"accept": "text/event-stream"}) as response:
        events = [e.data for e in iter_events(response)]
    start = next(e for e in events if e.get("name") == "tambo.component.start")
    return state_url(events[0]["threadId"], start["value"]["componentId"])


def state_url(thread_id: str, component_id: str) -> str:
    # The thread's user scope, as its run gave it (`body`): state belongs to that user.
    return f"/v1/threads/{thread_id}/components/{component_id}/state?userKey=bench"


def sequential(http: httpx.Client, url: str, count: int) -> list[float]:
    samples = []
    for i in range(count):
        started = time.perf_counter()
        response = http.post(url, json={"patch": [{"op": "add", "path": f"/k{i}", "value": i}]})
        samples.append(time.perf_counter() - started)
        assert response.status_code == 200, response.text
    return samples


def appends(http: httpx.Client, url: str, count: int) -> list[float]:
    samples = []
    for i in range(count):
        started = time.perf_counter()
        response = http.post(url, json={"patch": [
            {"op": "add", "path": "/rows/-", "value": {"id": i, "name": f"row {i}"}}]})
        samples.append(time.perf_counter() - started)
        assert response.status_code == 200, response.text
    return samples


async def burst(bases: list[str], url: str, count: int) -> float:
    async with httpx.AsyncClient(timeout=120, headers=HEADERS,
                                 limits=httpx.Limits(max_connections=count)) as http:
        async def one(i: int) -> None:
            response = await http.post(bases[i % len(bases)] + url, json={
                "patch": [{"op": "add", "path": f"/b{i}", "value": i}]})
            assert response.status_code == 200, response.text

        started = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(count)))
        return time.perf_counter() - started


def live_deltas(http: httpx.Client, model: ScriptedModel, count: int) -> list[float]:
    """Post patches during a live run; time each until its delta reaches a subscriber."""
    model.enqueue(table_turn({"delay": 120}))
    arrived: dict[int, float] = {}
    ready = threading.Event()
    urls: list[str] = []

    def subscribe() -> None:
        with (httpx.Client(base_url=str(http.base_url), timeout=180, headers=HEADERS) as own,
              own.stream("POST", "/v1/threads/runs", json=body("live"),
                         headers={"accept": "text/event-stream"}) as response):
            for event in iter_events(response):
                data = event.data
                if data["type"] == "RUN_STARTED":
                    thread_id, run_id = data["threadId"], data["runId"]
                if data.get("name") == "tambo.component.start":
                    urls.append(state_url(thread_id, data["value"]["componentId"]))
                    urls.append(f"/v1/threads/{thread_id}/runs/{run_id}?userKey=bench")
                    ready.set()
                if data.get("name") == "tambo.component.state_delta":
                    arrived[data["value"]["revision"]] = time.perf_counter()

    reader = threading.Thread(target=subscribe, daemon=True)
    reader.start()
    ready.wait(60)
    sent: dict[int, float] = {}
    for i in range(count):
        sent[i + 1] = time.perf_counter()
        http.post(urls[0], json={"patch": [{"op": "add", "path": f"/k{i}", "value": i}]})
        while i + 1 not in arrived:
            time.sleep(0.0005)
    http.delete(urls[1])
    reader.join(30)
    return [arrived[r] - sent[r] for r in sent]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--updates", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ScriptedModel() as model:
        env = scripted_env(model)
        first = GatewayServer(Path(tmp), env).start()
        second = GatewayServer(Path(tmp), env).start()
        try:
            with httpx.Client(base_url=first.url, timeout=60, headers=HEADERS) as http:
                url = render(http, model)
                sequential(http, url, 20)  # warm up
                print(summary("patch, small state, sequential", sequential(http, url, args.updates)))
                big = render(http, model)
                http.post(big, json={"state": {"rows": [{"id": i, "name": f"row {i}"}
                                                        for i in range(2000)]}})
                print(summary("append a row to a 2,000-row table, sequential",
                              appends(http, big, args.updates // 2)))
                for name, bases in (("one process", [first.url]),
                                    ("two processes", [first.url, second.url])):
                    fresh = render(http, model)
                    walls = [asyncio.run(burst(bases, fresh, 50)) for _ in range(5)]
                    print(summary(f"50 concurrent patches, {name} (wall time)", walls))
                    revision = http.get(fresh).json()["revision"]
                    assert revision == 250, revision
                print(summary("patch during a run -> state_delta at a subscriber",
                              live_deltas(http, model, args.updates // 2)))
        finally:
            first.stop()
            second.stop()


if __name__ == "__main__":
    main()
