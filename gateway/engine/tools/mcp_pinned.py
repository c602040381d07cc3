"""The HTTP transport of an MCP server a run brings with it (a Chorus message's `mcp`): held to
the same outbound safety as a callback.

Whoever sends the message chose the URL, so the caller checks it (the allow-list, and the
addresses its name resolves to) and hands the transport the address it checked. Every request
then goes to that address, never to a new DNS answer (a name that resolves to a public address
at the check and to 127.0.0.1 at the connect cannot move the connection), with TLS still
verified against the name; a request to any other host or port (a redirect, an endpoint the
server names) is refused; timeouts are short; and no response may be longer than
`max_response_bytes` (a server streaming without end fails its connection instead of filling
the process's memory).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx2

TIMEOUT = httpx2.Timeout(30.0, connect=5.0)
MAX_RESPONSE_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class Pin:
    """Where a checked URL's host is reached: `address`, for `host:port` only."""

    host: str
    port: int
    address: str
    max_response_bytes: int = MAX_RESPONSE_BYTES


def default_port(url: httpx2.URL) -> int:
    return url.port or (443 if url.scheme == "https" else 80)


class ResponseTooLarge(httpx2.ReadError):
    """The server answered more than the pin's `max_response_bytes` in one response."""


class _Bounded(httpx2.AsyncByteStream):
    def __init__(self, stream: httpx2.AsyncByteStream, limit: int, request: httpx2.Request
                 ) -> None:
        self.stream, self.limit, self.request = stream, limit, request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read = 0
        async for chunk in self.stream:
            read += len(chunk)
            if read > self.limit:
                raise ResponseTooLarge(f"a response longer than {self.limit} bytes",
                                       request=self.request)
            yield chunk

    async def aclose(self) -> None:
        await self.stream.aclose()


class PinnedTransport(httpx2.AsyncBaseTransport):
    """Sends each request to the pinned address (see the module docstring)."""

    def __init__(self, pin: Pin) -> None:
        self.pin = pin
        self.inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        pin, url = self.pin, request.url
        if url.host.lower() != pin.host.lower() or default_port(url) != pin.port:
            raise httpx2.ConnectError("only the checked host may be called", request=request)
        request.url = url.copy_with(host=pin.address)  # the Host header keeps the name
        if url.scheme == "https":
            request.extensions = {**request.extensions, "sni_hostname": pin.host}
        response = await self.inner.handle_async_request(request)
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        return httpx2.Response(response.status_code, headers=response.headers,
                               stream=_Bounded(response.stream, pin.max_response_bytes, request),
                               extensions=response.extensions)

    async def aclose(self) -> None:
        await self.inner.aclose()
