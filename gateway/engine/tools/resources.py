"""`embedResources`: MCP resources a user's message references, read from the agent's MCP
servers and embedded in the message for the model (the Tambo v1 proposal's run option).

A reference is a `resource` block with a `uri` and no content (no `text`, no `blob`): the
client names a resource, the gateway fetches it. Each one is read (`resources/read`) from the
MCP server of the run's agent that lists it (`resources/list`), and the block is replaced by the
resource's contents (`{uri, mimeType, text}` or `{uri, mimeType, blob}`), which the thread then
stores and the model reads as any attachment (`engine/attachments.py`). Without the option,
a reference reaches the model as its URI alone, as before.

The gateway never fetches a URI itself, and asks a server only for what that server lists:
a client cannot make it reach anything the operator did not configure, nor send one server's
URI to another. Everything is bounded and refused before the run starts: at most
`max_count` references per message (`TOO_MANY_RESOURCES`), a URI no server of the agent lists
(`UNKNOWN_RESOURCE`), contents larger than `max_bytes` (`RESOURCE_TOO_LARGE`), a server that
fails or takes longer than `READ_TIMEOUT_SECONDS` (`RESOURCE_UNAVAILABLE`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from ..attachments import decoded_size

READ_TIMEOUT_SECONDS = 30.0


class ResourceServer(Protocol):
    """An MCP server's resources, as `mcp_tools.McpConnection` reads them."""

    async def lists(self, uri: str) -> bool: ...

    async def read(self, uri: str) -> list[dict[str, Any]]: ...


class ResourceError(ValueError):
    """A reference the gateway will not embed; `code` is the problem code."""

    def __init__(self, code: str, message: str, uri: str | None = None) -> None:
        super().__init__(message)
        self.code, self.uri = code, uri


def is_reference(block: Mapping[str, Any]) -> bool:
    resource = block.get("resource")
    return (block.get("type") == "resource" and isinstance(resource, dict)
            and bool(resource.get("uri")) and resource.get("text") is None
            and not resource.get("blob"))


def servers_of(tools: Iterable[Any]) -> list[ResourceServer]:
    """The distinct MCP servers behind an agent's server tools (`ServerToolSpec.resources`)."""
    found: dict[int, ResourceServer] = {}
    for spec in tools:
        server = getattr(spec, "resources", None)
        if server is not None:
            found.setdefault(id(server), server)
    return list(found.values())


async def embed(blocks: list[dict[str, Any]], servers: list[ResourceServer], max_count: int,
                max_bytes: int) -> list[dict[str, Any]]:
    """`blocks` with every reference replaced by the resource's contents."""
    count = sum(1 for b in blocks if is_reference(b))
    if count > max_count:
        raise ResourceError("TOO_MANY_RESOURCES", f"The message references {count} resources "
                            f"to embed; at most {max_count} (GATEWAY_MAX_EMBEDDED_RESOURCES)")
    out: list[dict[str, Any]] = []
    for block in blocks:
        if not is_reference(block):
            out.append(block)
            continue
        resource = block["resource"]
        contents = await _read(str(resource["uri"]), servers)
        _check_size(str(resource["uri"]), contents, max_bytes)
        out.extend({"type": "resource", "resource": {**resource, **_wire(content)}}
                   for content in contents)
    return out


async def _read(uri: str, servers: list[ResourceServer]) -> list[dict[str, Any]]:
    try:
        async with asyncio.timeout(READ_TIMEOUT_SECONDS):
            for server in servers:
                if await server.lists(uri):
                    return await server.read(uri)
    except TimeoutError:
        raise ResourceError("RESOURCE_UNAVAILABLE", f"Reading {uri} took longer than "
                            f"{READ_TIMEOUT_SECONDS:g} s", uri) from None
    except Exception as exc:  # noqa: BLE001  (a server's failure, said without its details)
        raise ResourceError("RESOURCE_UNAVAILABLE", f"The MCP server failed to read {uri} "
                            f"({type(exc).__name__})", uri) from None
    raise ResourceError("UNKNOWN_RESOURCE", f"No MCP server of the agent lists the resource "
                        f"{uri}", uri)


def _check_size(uri: str, contents: list[dict[str, Any]], max_bytes: int) -> None:
    size = sum(decoded_size(c["blob"]) if c.get("blob") else len((c.get("text") or "").encode())
               for c in contents)
    if size > max_bytes:
        raise ResourceError("RESOURCE_TOO_LARGE", f"The resource {uri} is {size} bytes; an "
                            f"embedded resource may be at most {max_bytes} bytes "
                            "(GATEWAY_MAX_ATTACHMENT_BYTES)", uri)


def _wire(content: dict[str, Any]) -> dict[str, Any]:
    """MCP resource contents as a Tambo `resource` (camelCase `mimeType`)."""
    wire = {k: v for k, v in content.items() if k in ("uri", "text", "blob")}
    mime = content.get("mimeType") or content.get("mime_type")
    if mime:
        wire["mimeType"] = mime
    return wire
