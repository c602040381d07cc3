"""What the registry holds for each dialect: the routes `create_app` mounts, their documentation
(the operations and examples the OpenAPI builder reads) and the event types it publishes (the
SSE event union the OpenAPI document names, the files under `schemas/`), and what it keeps
going in the background while the app lives (Chorus's sweeper)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

from starlette.routing import BaseRoute

from ..protocol.operations import Operation
from ..protocol.schema_files import Schemas


@dataclass(frozen=True)
class EventSchema:
    """A dialect's SSE event union, as the OpenAPI document names it (`TamboEvent`); its
    streams' messages are `<name without Event>SseMessage`."""

    name: str
    type: Any

    @property
    def sse_message(self) -> str:
        return self.name.removesuffix("Event") + "SseMessage"


@dataclass(frozen=True)
class WireDialect:
    name: str
    routes: Sequence[BaseRoute]
    operations: tuple[Operation, ...] = ()
    # operationId -> {"request": ..., "response": ..., "stream": ...}, as `openapi/examples.py`.
    examples: dict[str, dict[str, Any]] = field(default_factory=dict)
    events: EventSchema | None = None
    schemas: Schemas = Schemas()
    # What the dialect keeps going beside the app (entered in its lifespan, given the app).
    background: Callable[[Any], AbstractAsyncContextManager[None]] | None = None
