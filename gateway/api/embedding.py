"""A run request's `embedResources`: the message's MCP resource references read and embedded
before the run starts (`engine/tools/resources.py` says what is read, from where, and the bounds), so
every refusal is a problem+json answer, never a failed run.

Reading may take seconds (an MCP server's round trips), so it happens outside the process's
start gate (`runs/admission/start_gate.py`): a slow server delays its own request, never other starts.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from starlette.requests import Request

from ..engine.agents.agent import ResolvedAgent
from ..engine.tools import resources
from ..protocol.problems import ApiError, Problem
from ..protocol.run_spec import RunSpec
from .context import services
from .runs import check_attachments


def references(spec: RunSpec) -> bool:
    """Whether the run's message names a resource to read (a `uri` without contents)."""
    return spec.user is not None and any(resources.is_reference(b) for b in spec.user.blocks)


async def embedded_blocks(request: Request, spec: RunSpec, agent: ResolvedAgent
                          ) -> list[dict[str, Any]]:
    """The user's blocks with each resource reference replaced by its contents, read from
    `agent`'s MCP servers."""
    assert spec.user is not None
    svc = services(request)
    servers = resources.servers_of(svc.runs.setup.tools_of(agent).values())
    try:
        return await resources.embed(spec.user.blocks, servers,
                                     svc.settings.max_embedded_resources,
                                     svc.settings.max_attachment_bytes)
    except resources.ResourceError as exc:
        fields = {"uri": exc.uri} if exc.uri else {}
        raise ApiError(Problem[exc.code], str(exc), **fields) from None


def with_blocks(request: Request, spec: RunSpec, blocks: list[dict[str, Any]] | None
                ) -> RunSpec:
    """`spec` with the embedded `blocks` (None: as it is), checked as attachments are (the
    model must be able to read them)."""
    if blocks is None or spec.user is None:
        return spec
    embedded = dataclasses.replace(spec, user=dataclasses.replace(spec.user, blocks=blocks))
    check_attachments(request, embedded)
    return embedded
