"""What counts as this machine: loopback addresses, `Host` headers and browser origins.

Development mode accepts any key, so it must answer nobody but the developer's own machine. A
loopback listening address keeps other machines out; the `Host` header keeps out a web page
whose own name was re-pointed at 127.0.0.1 (DNS rebinding); the `Origin` header keeps out
every other web page the developer's browser has open. Pure functions, used by `gateway serve`
and by the development-mode guard of the API.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from urllib.parse import urlsplit

LOCALHOST = "localhost"


# Asked of every request in development mode, with the same few values: remembered (a pure
# function; docs/decisions/0032-small-cuts-per-start.md).
@lru_cache(maxsize=1024)
def is_loopback(host: str) -> bool:
    """Whether `host` (a name or address) names only this machine; a name we cannot judge
    counts as remote (only `localhost` itself is trusted, not what DNS says of a name)."""
    host = host.strip().lower().rstrip(".")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host == LOCALHOST:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@lru_cache(maxsize=1024)
def is_loopback_host_header(value: str) -> bool:
    """A `Host` header (`name`, `name:port`, `[v6]`, `[v6]:port`) that names this machine."""
    value = value.strip()
    if value.startswith("["):
        address, bracket, rest = value[1:].partition("]")
        return bool(bracket) and (not rest or _is_port(rest)) and is_loopback(address)
    name, colon, port = value.partition(":")
    return (not colon or port.isdigit()) and is_loopback(name)


def is_loopback_origin(value: str) -> bool:
    """A browser `Origin` (`http://localhost:5173`) served from this machine. `null` (a
    sandboxed frame or a file) is anybody's origin, so it is not."""
    try:
        parts = urlsplit(value.strip())
        hostname, _ = parts.hostname, parts.port  # .port raises on a malformed port
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and hostname is not None and is_loopback(hostname)


def _is_port(rest: str) -> bool:
    return rest.startswith(":") and rest[1:].isdigit()
