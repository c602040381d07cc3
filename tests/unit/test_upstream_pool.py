"""The model upstream's connections split over a few clients (`engine.upstream_pool`): a quiet
process uses one client (its connections kept alive and reused), a busy one spreads its open
streams evenly, each new call going to the client carrying the fewest."""

from __future__ import annotations

import contextlib
import ssl

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from gateway.engine.upstream_pool import SHARDS, UpstreamPool


async def echo(request: Request) -> PlainTextResponse:
    return PlainTextResponse(request.headers["x-client"])  # which client sent it


APP = Starlette(routes=[Route("/chat/completions", echo, methods=["POST"])])
tls_contexts: set[int] = set()  # the TLS contexts the clients were made with


def pool() -> tuple[UpstreamPool, list[httpx.AsyncClient]]:
    made: list[httpx.AsyncClient] = []

    def make(limits: httpx.Limits, tls: ssl.SSLContext) -> httpx.AsyncClient:
        client = httpx.AsyncClient(transport=httpx.ASGITransport(APP), base_url="http://model",
                                   headers={"x-client": str(len(made))}, limits=limits,
                                   verify=tls)
        tls_contexts.add(id(tls))
        made.append(client)
        return client

    return UpstreamPool(make), made


async def client_of(upstream: UpstreamPool) -> str:
    async with upstream.stream("POST", "/chat/completions") as response:
        return (await response.aread()).decode()


async def test_one_call_at_a_time_uses_one_client() -> None:
    upstream, made = pool()
    assert [await client_of(upstream) for _ in range(5)] == ["0"] * 5
    assert len(made) == 1  # the others are never made
    await upstream.aclose()
    assert made[0].is_closed


async def test_open_streams_spread_over_the_clients_the_fewest_first() -> None:
    tls_contexts.clear()
    upstream, made = pool()
    async with contextlib.AsyncExitStack() as held:
        served = []
        for _ in range(SHARDS + 3):  # each held open while the next starts
            response = await held.enter_async_context(upstream.stream("POST", "/chat/completions"))
            served.append((await response.aread()).decode())
        assert served[:SHARDS] == [str(k) for k in range(SHARDS)]  # one each
        assert served[SHARDS:] == ["0", "1", "2"]  # then again the least loaded
        assert len(made) == SHARDS
        assert len(tls_contexts) == 1  # one TLS context for all (made once, ~40 ms of CPU)
    assert await client_of(upstream) == "0"  # all closed: back to the first
    await upstream.aclose()
    assert all(client.is_closed for client in made)
