"""A Tambo run request (`POST /v1/threads[/{id}]/runs`) -> the neutral `RunSpec`.

The request's shapes are `protocol/tambo.py`'s (shared with the thread endpoints); this module
only says what each field becomes. It is pure: the route calls it after parsing the body.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...protocol.run_spec import (
    Component,
    Idempotency,
    RunSpec,
    ToolResult,
    UserInput,
)
from ...protocol.tambo import (
    MediaBlock,
    ResourceBlock,
    RunRequest,
    TextBlock,
    ToolChoiceName,
    ToolResultBlock,
)


def run_spec(request: RunRequest, agent: str | None = None) -> RunSpec:
    """The run `request` asks for; `agent`: the agent it names (a new thread's `?agent=`)."""
    message = request.message
    blocks = [user_block(b) for b in message.content
              if isinstance(b, (TextBlock, ResourceBlock, MediaBlock))]
    choice = request.toolChoice
    init = request.thread
    return RunSpec(
        user=UserInput(blocks, message.additionalContext or None,
                       message.metadata or None) if blocks else None,
        tool_results=[tool_result(r) for r in message.tool_results()],
        context=message.additionalContext or None,
        client_tools=[t.client_tool() for t in request.tools],
        components=[Component(c.name, c.description, c.propsSchema, c.stateSchema,
                              tuple(t.client_tool() for t in c.contextTools or []))
                    for c in request.availableComponents],
        tool_choice={"name": choice.name} if isinstance(choice, ToolChoiceName) else choice,
        force_component=request.forceComponent,
        max_tokens=request.maxTokens,
        temperature=request.temperature,
        model=request.model,
        agent=agent,
        previous_run_id=request.previousRunId,
        on_disconnect=request.onDisconnect,
        metadata=request.runMetadata if request.runMetadata is not None else request.metadata,
        seed_messages=[m.seed() for m in init.initialMessages or []] if init else [],
        abandon_pending_tools=bool(request.abandonPendingTools),
        multitask_strategy=request.multitaskStrategy,
        embed_resources=bool(request.embedResources),
        status_messages=True,
        webhook=request.webhook,
    )


def user_block(block: TextBlock | ResourceBlock | MediaBlock) -> dict[str, Any]:
    """A block of the user's message as the run keeps it: the proposal's `image`, `audio` and
    `file` blocks as the `resource` block a Tambo client sends for an attachment."""
    if isinstance(block, MediaBlock):
        return {"type": "resource", "resource": block.resource()}
    return block.model_dump(exclude_none=True)


def keyed(spec: RunSpec, request: RunRequest, key: str | None) -> RunSpec:
    """`spec` retried safely under `key` (the `Idempotency-Key` header): a retry must repeat
    the request exactly."""
    if key is None:
        return spec
    return replace(spec, idempotency=Idempotency(key, request.model_dump(mode="json",
                                                                          exclude_none=True)))


def tool_result(block: ToolResultBlock) -> ToolResult:
    content = block.content if isinstance(block.content, list) else [
        TextBlock(type="text", text=block.content)]
    return ToolResult(block.toolUseId, [b.model_dump(exclude_none=True) for b in content],
                      bool(block.isError))

