"""The model upstream's connections, split over a few httpx clients.

httpcore's connection pool walks all of its connections whenever a request is added or a
response closed, and for each idle one counts all of them again: one pool holding a stream per
active run makes every new model call cost in proportion to the runs already streaming, and to
the square of the idle connections a burst leaves behind. Measured on this machine (bench/README.md,
"The model client's pool"): a one-token model call cost 2.9 ms of CPU after a burst of 64 and
7.0 ms beside 300 open streams, against 1.3 and 2.0 ms split over 8 clients. Each call goes to
the client carrying the fewest streams, so a quiet process uses only the first (its
connections kept alive and reused as before) and a busy one spreads its streams evenly. A
client is made on first use: a process that never has many streams at once makes one. The
clients share one TLS context: httpx makes one per client otherwise (loading the CA bundle,
about 40 ms of CPU on the event loop each), and a busy process would pay that, on the loop,
for each client it adds during a burst.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx

SHARDS = 8
# Idle connections kept per client (httpcore closes an idle one while its pool holds more).
KEEPALIVE_PER_SHARD = 8


class UpstreamPool:
    def __init__(self, make_client: Callable[[httpx.Limits, ssl.SSLContext], httpx.AsyncClient],
                 shards: int = SHARDS) -> None:
        # No connection limit: every active run holds one stream, and a run must never wait
        # for another's connection.
        self._limits = httpx.Limits(max_connections=None,
                                    max_keepalive_connections=KEEPALIVE_PER_SHARD)
        self._make = make_client
        self._tls = httpx.create_ssl_context()  # shared by the clients (see the module's doc)
        self._clients: list[httpx.AsyncClient | None] = [None] * shards
        self._streams = [0] * shards

    @contextlib.asynccontextmanager
    async def stream(self, method: str, url: str, **options: Any
                     ) -> AsyncIterator[httpx.Response]:
        """`httpx.AsyncClient.stream` on the client carrying the fewest streams."""
        shard = self._streams.index(min(self._streams))
        client = self._clients[shard]
        if client is None:
            client = self._clients[shard] = self._make(self._limits, self._tls)
        self._streams[shard] += 1
        try:
            async with client.stream(method, url, **options) as response:
                yield response
        finally:
            self._streams[shard] -= 1

    async def aclose(self) -> None:
        clients, self._clients = self._clients, [None] * len(self._clients)
        for client in clients:
            if client is not None:
                await client.aclose()
