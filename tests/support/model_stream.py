"""What the agent loop sees of a model adapter's stream, for tests that drive an adapter alone."""

from __future__ import annotations

from typing import Any

from gateway.engine.deltas import ModelError
from gateway.engine.models.litellm_model import ModelRequest

HI = [{"role": "user", "content": "hi"}]


async def outcome(model: Any, request: ModelRequest | None = None) -> list[Any]:
    """The deltas, then the `ModelError` if the stream failed."""
    seen: list[Any] = []
    try:
        async for delta in model.stream(request or ModelRequest(messages=HI)):
            seen.append(delta)
    except ModelError as error:
        seen.append(error)
    return seen
