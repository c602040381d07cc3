"""The thread's shared state as a server tool sees it: `ctx.state` (`ToolContext.state`).

AG-UI's agent state is one JSON object the client and the agent share (CopilotKit's
`useCoAgent`): the client sends it with every run, the gateway keeps it with the thread, and a
server tool reads it and changes it here, by a full replacement or an RFC 6902 patch. A change
is stored, then streamed to the client (AG-UI `STATE_DELTA`); it is bounded as component state
is (`GATEWAY_MAX_COMPONENT_STATE_BYTES`). The run binds the implementation
(`runs/components/thread_state.py`); this layer only names what a tool may call.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Protocol


class SharedState(Protocol):
    def get(self) -> dict[str, Any]:
        """A copy of the state as it is now."""

    async def update(self, *, state: dict[str, Any] | None = None,
                     patch: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """Replace the state (`state`) or apply an RFC 6902 `patch`; returns the new state. A
        refused change (a malformed patch, a failed `test`, too large) raises, changing nothing."""


_current: ContextVar[SharedState | None] = ContextVar("shared_state", default=None)


def bind(state: SharedState | None) -> None:
    """Give the run running in this task (and the tools it calls) its thread's state."""
    _current.set(state)


def current() -> SharedState | None:
    return _current.get()
