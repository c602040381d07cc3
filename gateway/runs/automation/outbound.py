"""Outbound safety for every URL a client names for the gateway to call: a Chorus message's
callback and MCP servers, a run's or a schedule's completion webhook. Whoever names one could
otherwise aim the gateway at anything it can reach.

A URL is called only if its host matches the allow-list of its kind
(`GATEWAY_CHORUS_ALLOWED_HOSTS`, `GATEWAY_WEBHOOK_ALLOWED_HOSTS`: a name, `*.` and its
subdomains, an address or a network) and every address the name resolves to is public or
inside a listed address or network: loopback, link-local and private addresses (the cloud
metadata service, the database, the gateway itself) are refused unless listed. The call then
goes to the address that was checked (the name is not resolved again, so a DNS answer that
changes in between cannot move it), with TLS still verified against the name, no redirects,
short timeouts and a bound on what is read of the answer.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

TIMEOUT = httpx.Timeout(10.0, connect=5.0)
MAX_RESPONSE_BYTES = 64 * 1024
IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class NotAllowed(Exception):
    """A URL the allow-list does not let the gateway call (the message says why)."""


@dataclass(frozen=True)
class Target:
    """A checked URL, and the address it is called at."""

    url: httpx.URL
    address: str


def _networks(allowed: Sequence[str]) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    found = []
    for entry in allowed:
        try:
            found.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
        except ValueError:
            continue
    return found


def name_allowed(host: str, allowed: Sequence[str]) -> bool:
    """Whether `host` is listed: by name, under a `*.` entry, or as an address in a listed
    network."""
    host = host.lower().rstrip(".")
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        address = None
    if address is not None:
        return any(address in net for net in _networks(allowed))
    for entry in (e.lower().rstrip(".") for e in allowed):
        if entry == host or (entry.startswith("*.") and host.endswith(entry[1:])):
            return True
    return False


# IPv6 prefixes that carry an IPv4 address in their last 32 bits, which a translator on the
# path (NAT64: the well-known prefix; the local-use one) or the host itself reaches.
NAT64 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))
COMPATIBLE = ipaddress.IPv6Network("::/96")  # IPv4-compatible (deprecated): `::a.b.c.d`


def embedded_ipv4(address: IpAddress) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address leads to (IPv4-mapped, IPv4-compatible, NAT64,
    6to4, Teredo's server and client); none for any other address."""
    if isinstance(address, ipaddress.IPv4Address):
        return []
    last = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.ipv4_mapped is not None:
        return [address.ipv4_mapped]
    if address.sixtofour is not None:
        return [address.sixtofour]
    if address.teredo is not None:
        return list(address.teredo)
    if any(address in net for net in NAT64) or (address in COMPATIBLE and int(address) > 1):
        return [last]
    return []


def address_allowed(address: IpAddress, allowed: Sequence[str]) -> bool:
    """A public address, or one inside a listed address or network. An IPv6 address that
    embeds IPv4 ones (NAT64, 6to4, Teredo, IPv4-mapped or -compatible) is judged by those:
    `64:ff9b::a9fe:a9fe` reaches the metadata service as `169.254.169.254` does."""
    networks = _networks(allowed)
    if any(address in net for net in networks):
        return True
    inner = embedded_ipv4(address)
    if inner:
        return all(any(v4 in net for net in networks) or (v4.is_global and not v4.is_multicast)
                   for v4 in inner)
    return address.is_global and not address.is_multicast


async def resolve(host: str, port: int) -> list[IpAddress]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [ipaddress.ip_address(info[4][0]) for info in infos]


def port(url: httpx.URL) -> int:
    return url.port or (443 if url.scheme == "https" else 80)


def check_url(raw: str, allowed: Sequence[str],
              setting: str = "GATEWAY_CHORUS_ALLOWED_HOSTS") -> httpx.URL:
    """The URL if its form and its host's name are allowed (no address is resolved);
    `NotAllowed` otherwise. `setting`: the allow-list's name, for the message."""
    try:
        url = httpx.URL(raw)
    except (httpx.InvalidURL, TypeError):
        raise NotAllowed("not a URL") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise NotAllowed("only http and https URLs with a host")
    if url.userinfo:
        raise NotAllowed("credentials in the URL's authority are not allowed")
    if not name_allowed(url.host, allowed):
        raise NotAllowed(f"host {url.host[:100]!r} is not in {setting}")
    return url


async def check(raw: str, allowed: Sequence[str],
                setting: str = "GATEWAY_CHORUS_ALLOWED_HOSTS") -> Target:
    """The URL as the gateway may call it; `NotAllowed` otherwise."""
    url = check_url(raw, allowed, setting)
    try:
        addresses = await resolve(url.host, port(url))
    except OSError:
        raise NotAllowed(f"host {url.host[:100]!r} does not resolve") from None
    refused = [a for a in addresses if not address_allowed(a, allowed)]
    if refused or not addresses:
        raise NotAllowed(f"host {url.host[:100]!r} resolves to a loopback, link-local or "
                         f"private address that {setting} does not list")
    return Target(url, str(addresses[0]))


async def post(client: httpx.AsyncClient, target: Target, body: Any,
               headers: dict[str, str] | None = None, content: bytes | None = None) -> int:
    """POST `body` as JSON (or `content` as it is) to the checked address, with `headers`;
    the status (at most `MAX_RESPONSE_BYTES` of the answer is read, and ignored)."""
    host = target.url.host
    pinned = target.url.copy_with(host=target.address)
    extensions = {"sni_hostname": host} if target.url.scheme == "https" else {}
    sent = {**(headers or {}), "host": target.url.netloc.decode("ascii")}
    if content is not None:
        request = client.build_request("POST", pinned, content=content, extensions=extensions,
                                       headers={**sent, "content-type": "application/json"})
    else:
        request = client.build_request("POST", pinned, json=body, extensions=extensions,
                                       headers=sent)
    response = await client.send(request, stream=True, follow_redirects=False)
    try:
        read = 0
        async for chunk in response.aiter_raw():
            read += len(chunk)
            if read > MAX_RESPONSE_BYTES:
                break
    finally:
        await response.aclose()
    return response.status_code
