"""The model upstream's connections: one aiohttp session for the direct adapter's streams.

aiohttp rather than httpx, for the cost of a token that arrives alone. At 20 tokens a second
per run every chunk of the upstream's stream is one read: httpx reads it through httpcore,
h11's pure-Python parser and an anyio cancel scope per read (its read timeout), about 120 to
160 µs of CPU a chunk on this machine; aiohttp's parser is C (llhttp) and its read timeout one
timer per connection, about 27 µs (bench/README.md, "CPU per paced token"). aiohttp is
litellm's own default transport, so it is installed with it anyway.

Its connector takes an idle connection from the host's queue without walking the others (the
reason the httpx pool was split over 8 clients), and has no connection limit here: every active
run holds one stream, and a run must never wait for another's connection. Idle connections are
kept `KEEPALIVE_SECONDS` (httpx's default), then closed. A response closed before its end
closes its connection instead of returning it to the pool.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator

import aiohttp
import httpx

KEEPALIVE_SECONDS = 5.0


class UpstreamPool:
    """The session is made on first use, on the running loop (aiohttp binds it to the loop)."""

    def __init__(self, base_url: str, headers: dict[str, str], read_timeout: float,
                 connect_timeout: float) -> None:
        self.base_url = base_url.rstrip("/")
        self._headers = headers
        # Between reads, and to connect; no overall deadline (the run's own is the caller's).
        self._timeout = aiohttp.ClientTimeout(total=None, sock_read=read_timeout,
                                              sock_connect=connect_timeout)
        # The same CA bundle httpx (and so litellm) trusts; loading it costs about 40 ms of CPU,
        # paid at start-up (`DirectModel.open`) rather than in a run's model call.
        self._tls: ssl.SSLContext = httpx.create_ssl_context()
        self._session: aiohttp.ClientSession | None = None

    @contextlib.asynccontextmanager
    async def post(self, path: str, body: bytes) -> AsyncIterator[aiohttp.ClientResponse]:
        """`POST base_url + path` with `body` as JSON: the response, its body not read yet."""
        if self._session is None or self._session.closed:
            # `trust_env`: HTTP(S)_PROXY and NO_PROXY apply, as they did with httpx.
            self._session = aiohttp.ClientSession(
                headers=self._headers, timeout=self._timeout, trust_env=True,
                connector=aiohttp.TCPConnector(limit=0, ssl=self._tls,
                                               keepalive_timeout=KEEPALIVE_SECONDS))
        async with self._session.post(self.base_url + path, data=body, headers={
                "Content-Type": "application/json"}) as response:
            yield response

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

