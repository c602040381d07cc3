"""Development mode answers this machine only.

Development mode accepts any API key, or none, so whoever can reach it runs the operator's
model. `gateway serve` refuses to listen beyond loopback in development mode; this guard holds
the same line for every request, whatever the socket (a gateway that starts with keys and whose
database later loses them, an embedding server bound elsewhere), and against the one visitor a
loopback socket lets in: a web page in the developer's own browser. Such a page can reach
127.0.0.1 directly (its `Origin` is its own) or under its own name re-pointed at 127.0.0.1
(DNS rebinding: its `Host` is its own). So, in development mode, a request is refused unless
its client address, its `Host` and its `Origin` (when sent) are all loopback. The front
(`server/front.py`) asks before CORS, so a foreign origin's preflight is refused too, and for
WebSocket handshakes (where CORS does not apply at all).

With keys, nothing here applies: a key is what admits a caller then.
"""

from __future__ import annotations

from starlette.types import Receive, Scope, Send

from ..config import Settings
from ..protocol.problems import Problem
from ..server.problem_json import problem
from ..store.base import UNAVAILABLE
from .loopback import is_loopback, is_loopback_host_header, is_loopback_origin

WEBSOCKET_POLICY_VIOLATION = 1008


def foreign_part(scope: Scope) -> str | None:
    """What in a request is not this machine (its client, `Host` or `Origin`), or None."""
    client = scope.get("client")
    if client and not is_loopback(client[0]):
        return "client address"
    for name, value in scope["headers"]:
        if name == b"host" and not is_loopback_host_header(value.decode("latin-1")):
            return "Host"
        if name == b"origin" and not is_loopback_origin(value.decode("latin-1")):
            return "Origin"
    return None


async def refused(settings: Settings, scope: Scope, receive: Receive, send: Send) -> bool:
    """Refuses the request (HTTP or a WebSocket handshake) if development mode is on and it
    does not come from this machine; whether it did."""
    if not settings.development_possible:
        return False
    part = foreign_part(scope)
    if part is None or not await _development(settings, scope):
        return False
    if scope["type"] == "websocket":  # closing before accepting refuses the handshake
        await send({"type": "websocket.close", "code": WEBSOCKET_POLICY_VIOLATION})
        return True
    response = problem(Problem.LOOPBACK_ONLY, f"Development mode (no API keys) answers this machine "
                       f"only, and this request's {part} is not loopback; create an API key "
                       "(`gateway keys create`) or set GATEWAY_API_KEYS to serve others")
    await response(scope, receive, send)
    return True


async def _development(settings: Settings, scope: Scope) -> bool:
    """Whether development mode is on; when that cannot be known (not started yet, the
    database away), it is taken to be: refusing is the safe side."""
    services = getattr(scope["app"].state, "services", None)
    if services is None:
        return True
    try:
        return bool(await services.keyring.development(settings))
    except UNAVAILABLE:
        return True
