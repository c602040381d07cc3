"""Who a server tool is working for: the project, the user scope, the thread and the run.

A tool that reads or changes anything outside the conversation (an order, a file, a customer
record) must authorise the call itself, and for that it needs to know who asked. The run binds
a `ToolContext` before its agent loop starts; every tool the loop calls sees it:

- a Python tool declares a parameter annotated `ToolContext` (any name) and gets it passed in;
  that parameter is not part of the arguments the model fills in, so the model cannot forge it.
  `tool_context()` returns the same object anywhere inside the call;
- an MCP tool receives it in the request's `_meta` (`gateway/projectId`, `gateway/userScope`,
  `gateway/signedIn`, `gateway/threadId`, `gateway/runId`, and for the call
  `gateway/toolCallId` and `gateway/idempotencyKey`).

Each call also names itself: `tool_call_id` (the model's id for the call) and
`idempotency_key` (that call in its thread). Both stay the same whenever the same call runs
again: a tool that asked a question is called again from the start once it is answered, and
an approved call runs in a later run than the one that paused for it. A tool with side effects
passes the key to what it changes (a payment API's `Idempotency-Key`, a unique column), so that
the effect happens once however often the call runs (docs/human-in-the-loop.md, "Exactly
once").

`user_scope` is the thread's owner: a `userKey` the browser sent (asserted by the client, not
proven), or, when `signed_in`, the subject of a bearer token the gateway issued after verifying
the app's identity provider, or a Chorus connection's (`chorus:<connection id>`: a channel's
thread, whose messages come from many people). Only a signed-in scope is fit to authorise on
(docs/security.md).
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .shared_state import SharedState

# Scopes of signed-in users start with this (they come from verified tokens, see api/identity).
SIGNED_IN_PREFIX = "oauth:"


@dataclass(frozen=True)
class ToolContext:
    project_id: str
    thread_id: str
    run_id: str
    user_scope: str | None  # the thread's userKey or signed-in scope; None: the project's
    tool_call_id: str | None = None  # the call being run (None outside a tool call)

    @property
    def idempotency_key(self) -> str | None:
        """The same for every run of this call, and for no other call: `<threadId>:<call>`
        (a model's call ids are unique within a thread, not across threads)."""
        return f"{self.thread_id}:{self.tool_call_id}" if self.tool_call_id else None

    @property
    def signed_in(self) -> bool:
        """Whether `user_scope` was verified (a bearer token), not just asserted (a userKey)."""
        return self.user_scope is not None and self.user_scope.startswith(SIGNED_IN_PREFIX)

    async def ask(self, schema: dict[str, Any], message: str) -> dict[str, Any] | None:
        """Ask the user for input (a JSON Schema of what to answer, and a prompt): the run
        pauses and the tool is called again, from the start, once the user answered; then this
        returns the accepted content, or None if the user declined (`engine/tools/elicitation.py`)."""
        from .elicitation import ask

        return await ask(schema, message)

    async def status(self, detail: str, state: str = "working") -> bool:
        """Tell whoever watches the run what the tool is doing now ("Searching 3 sources"):
        a Timbal `status` message, replaced by the next and deleted when the call ends
        (`engine/tools/status.py`). False when it was not shown (outside a tool call, or over the
        run's budget of statuses): a tool never needs to care."""
        from .status import current

        line = current()
        return await line.report(detail, state) if line is not None else False

    @property
    def state(self) -> SharedState:
        """The thread's shared state (AG-UI agent state): `ctx.state.get()`, `await
        ctx.state.update(patch=[...])` (`engine/tools/shared_state.py`)."""
        from .shared_state import current

        bound = current()
        if bound is None:
            raise RuntimeError("ctx.state is only available inside a run (a server tool)")
        return bound

    def mcp_meta(self) -> dict[str, Any]:
        """The context as an MCP request's `_meta`."""
        meta = {"gateway/projectId": self.project_id, "gateway/userScope": self.user_scope,
                "gateway/signedIn": self.signed_in, "gateway/threadId": self.thread_id,
                "gateway/runId": self.run_id}
        if self.tool_call_id is not None:
            meta.update({"gateway/toolCallId": self.tool_call_id,
                         "gateway/idempotencyKey": self.idempotency_key})
        return meta


_current: ContextVar[ToolContext | None] = ContextVar("tool_context", default=None)


def bind_tool_context(context: ToolContext) -> None:
    """Make `tool_context()` answer `context` in this task (the run's) and what it awaits."""
    _current.set(context)


def bind_tool_call(tool_call_id: str) -> None:
    """In a tool call's own task: the run's context, naming the call."""
    bound = _current.get()
    if bound is not None:
        _current.set(replace(bound, tool_call_id=tool_call_id))


def tool_context() -> ToolContext:
    """For a server tool: who the run that called it works for."""
    bound = _current.get()
    if bound is None:
        raise RuntimeError("tool_context() is only available inside a run (a server tool)")
    return bound


def current_tool_context() -> ToolContext | None:
    return _current.get()
