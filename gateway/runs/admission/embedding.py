"""A run request's `embedResources`: the message's MCP resource references read and embedded
before the run starts (`engine/tools/resources.py` says what is read, from where, and the
bounds), so every refusal is a problem+json answer, never a failed run.

Reading may take seconds (an MCP server's round trips), so `submit` does it outside the
process's start gate (`start_gate.py`, `StartGate.outside`): a slow server delays its own
request, never other starts.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ...config import Settings
from ...engine.loop import ServerToolSpec
from ...engine.tools import resources
from ...protocol.problems import ApiError, Problem
from ...protocol.run_spec import RunSpec


def references(spec: RunSpec) -> bool:
    """Whether the run asks for its message's resources to be embedded, and its message names
    one to read (a `uri` without contents)."""
    return spec.embed_resources and spec.user is not None and any(
        resources.is_reference(b) for b in spec.user.blocks)


async def embedded(settings: Settings, spec: RunSpec, tools: dict[str, ServerToolSpec]
                   ) -> RunSpec:
    """`spec` with each resource reference of its message replaced by its contents, read from
    the MCP servers of the agent's server tools (`tools`)."""
    assert spec.user is not None
    servers = resources.servers_of(tools.values())
    try:
        blocks: list[dict[str, Any]] = await resources.embed(
            spec.user.blocks, servers, settings.max_embedded_resources,
            settings.max_attachment_bytes)
    except resources.ResourceError as exc:
        fields = {"uri": exc.uri} if exc.uri else {}
        raise ApiError(Problem[exc.code], str(exc), **fields) from None
    return dataclasses.replace(spec, user=dataclasses.replace(spec.user, blocks=blocks))

