"""The model upstream's connections: one aiohttp session for the direct adapter's streams.

aiohttp rather than httpx, for the cost of a token that arrives alone. At 20 tokens a second
per run every chunk of the upstream's stream is one read: httpx reads it through httpcore,
h11's pure-Python parser and an anyio cancel scope per read (its read timeout); aiohttp's
parser is C (llhttp) and its read timeout one timer per connection (docs/decisions/0013).
aiohttp is litellm's own default transport, so it is installed with it anyway.

Its connector takes an idle connection from the host's queue without walking the others (the
reason the httpx pool was split over 8 clients), and has no connection limit here: every active
run holds one stream, and a run must never wait for another's connection. Idle connections are
kept `KEEPALIVE_SECONDS` (httpx's default), then closed. A response closed before its end
closes its connection instead of returning it to the pool.

The proxy environment (HTTP(S)_PROXY, NO_PROXY) applies as it did with httpx, and is read as
httpx read it: once, when the pool is made, for the one host it calls. aiohttp's own
`trust_env` reads it again for every request, on a worker thread, and looks the upstream's
credentials up in `~/.netrc` on another (two thread hops and file lookups per model call);
httpx never took them from `.netrc`, so neither
does this (a proxy's own credentials still come from its URL or `.netrc`, as aiohttp reads them).
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator

import aiohttp
import httpx
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

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
        # The same CA bundle httpx (and so litellm) trusts; loading it is costly, so it is
        # paid at start-up (`DirectModel.open`) rather than in a run's model call.
        self._tls: ssl.SSLContext = httpx.create_ssl_context()
        self._proxy, self._proxy_auth = env_proxy(self.base_url)
        self._session: aiohttp.ClientSession | None = None

    @contextlib.asynccontextmanager
    async def post(self, path: str, body: bytes, headers: dict[str, str] | None = None
                   ) -> AsyncIterator[aiohttp.ClientResponse]:
        """`POST base_url + path` with `body` as JSON: the response, its body not read yet.
        `headers`: this request's own (their Content-Type included), besides the pool's.

        Sent once more, on a connection of its own, when the kept-alive one it went out on
        turns out closed before any answer (the upstream closed it as it was picked: its idle
        timeout, or llama.cpp's server after a failed request); a connection that cannot be
        made is not tried again."""
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                headers=self._headers, timeout=self._timeout,
                connector=aiohttp.TCPConnector(limit=0, ssl=self._tls,
                                               keepalive_timeout=KEEPALIVE_SECONDS))
        try:
            response: aiohttp.ClientResponse | None = await self._send(
                self._session, path, body, headers)
        except aiohttp.ClientConnectorError:
            raise
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
            response = None  # the pool may hold more such connections: not from it
        if response is None:
            async with aiohttp.ClientSession(
                    headers=self._headers, timeout=self._timeout,
                    connector=aiohttp.TCPConnector(force_close=True, ssl=self._tls)) as fresh:
                async with await self._send(fresh, path, body, headers) as response:
                    yield response
            return
        async with response:
            yield response

    async def _send(self, session: aiohttp.ClientSession, path: str, body: bytes,
                    headers: dict[str, str] | None) -> aiohttp.ClientResponse:
        return await session.post(self.base_url + path, data=body, headers=headers or {
            "Content-Type": "application/json"}, proxy=self._proxy, proxy_auth=self._proxy_auth)

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()


def env_proxy(base_url: str) -> tuple[URL | None, aiohttp.BasicAuth | None]:
    """The proxy the environment names for `base_url` (and its credentials), or None if none
    does or NO_PROXY exempts its host: aiohttp's own reading of the environment, done once."""
    try:
        return get_env_proxy_for_url(URL(base_url))
    except LookupError:
        return None, None
