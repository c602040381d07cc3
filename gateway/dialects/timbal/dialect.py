"""The Timbal dialect as the registry holds it: its NDJSON and WebSocket views, their
documentation, and the log's own types (`protocol/frames_schema.py`), which it publishes."""

from __future__ import annotations

from ...api.spec import EVENT_CURSOR, KEYS, Operation, Param
from ...protocol import frames_schema
from ...protocol.frames_schema import Frame as TimbalFrame
from ...protocol.schema_files import Schemas, Type, Union
from ..base import WireDialect
from . import routes

OPERATIONS: tuple[Operation, ...] = (
    Operation("GET", "/v1/timbal/threads/{thread_id}", "timbalThread",
              "A thread as Timbal/1.0 NDJSON", "timbal",
              description="One Timbal frame per line (`application/x-ndjson`, schema "
                          "`TimbalFrame`): every completed message as a set frame (with "
                          "`since`, only those completed at or after it), then, if a run is "
                          "active, that run's frames live until it ends. The same thread is "
                          "served as a WebSocket at `/v1/timbal/threads/{threadId}/stream` "
                          "(see the README).",
              params=(*KEYS, Param("since", "query", {"type": "string", "format": "date-time"},
                                   "Only messages completed at or after this time.")),
              result=TimbalFrame, media_type="application/x-ndjson"),
    Operation("GET", "/v1/timbal/threads/{thread_id}/runs/{run_id}", "timbalRun",
              "A run's log as Timbal/1.0 NDJSON", "timbal",
              description="The run's frames, one per line (`application/x-ndjson`, schema "
                          "`TimbalFrame`), from the first (or after `after` frames), live "
                          "until the run ends: the user's input, the model's messages as they "
                          "stream, and control frames for the run's lifecycle.",
              params=(*KEYS, Param("after", "query", EVENT_CURSOR,
                                   "Skip this many frames; empty: from the start.")),
              result=TimbalFrame, media_type="application/x-ndjson",
              errors=("RUN_NOT_FOUND", "INVALID_CURSOR")),
)

SCHEMAS = Schemas(
    unions=(Union("timbal.frame", frames_schema.Frame, "timbal/frame.json",
                  "One line of a run's Timbal log (message frames and the gateway's control "
                  "frames)."),
            Union("timbal.value", frames_schema.MessageValue, "timbal/value.json",
                  "One part of a stored message: the `v` of a set frame, or an input value "
                  "stored as is.")),
    types=(*(Type("timbal.frames", name, tp, f"timbal/frames/{name}.json")
             for name, tp in frames_schema.FRAMES.items()),
           *(Type("timbal.frames", f"control {name}", tp, f"timbal/frames/control.{name}.json")
             for name, tp in frames_schema.CONTROL_FRAMES.items()),
           *(Type("timbal.values", name, tp, f"timbal/values/{name}.json")
             for name, tp in frames_schema.VALUES.items())),
)

DIALECT = WireDialect("timbal", routes.routes, OPERATIONS, schemas=SCHEMAS)
