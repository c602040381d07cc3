"""The Timbal dialect as the registry holds it: its NDJSON and WebSocket views, their
documentation, and the log's own types (`protocol/frames_schema.py`), which it publishes."""

from __future__ import annotations

from typing import Any

from ...protocol import frames_schema
from ...protocol.frames_schema import PublishedFrame as TimbalFrame
from ...protocol.operations import EVENT_CURSOR, KEYS, RUN_ERRORS, Operation, Param
from ...protocol.schema_files import Schemas, Type, Union
from ..base import WireDialect
from . import errors, routes
from . import input as timbal_input

# The write path answers errors in the Timbal shape, not problem+json.
SHAPE: dict[str, Any] = {"error_model": errors.TimbalError, "error_shape": errors.example}

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
    Operation("POST", "/v1/timbal/threads/{thread_id}", "timbalCreateThread",
              "Create a thread with a client-chosen id (Timbal HTTP/1.0)", "timbal",
              description="The path's id must be a UUID (400 otherwise). 201 `created`; the "
                          "same request again (same body, same user scope) 200 `exists`; "
                          "any other request on a taken id 409. The body chooses the agent and "
                          "carries the user scope; other fields are allowed, never kept or "
                          "logged. Errors are in the Timbal shape `{error, message, details}`.",
              body=timbal_input.ThreadCreate, params=KEYS, status=201,
              alternates={200: "The thread exists, created with this same request."},
              result=timbal_input.ThreadCreated, **SHAPE,
              errors=("THREAD_EXISTS", "USER_SCOPE_REQUIRED", "AGENT_NOT_FOUND",
                      "METADATA_TOO_LARGE", "THREAD_LIMIT_REACHED", "RATE_LIMITED",
                      "QUOTAS_UNAVAILABLE")),
    Operation("POST", "/v1/timbal/threads/{thread_id}/messages", "timbalSendMessage",
              "Send a user message: the run starts (Timbal HTTP/1.0)", "timbal",
              description="Answers 202 at once; the user message and the agent's frames go out "
                          "on the thread's WebSocket. 409 `conflict` while a run is active.",
              body=timbal_input.MessageSend, params=KEYS, status=202,
              result=timbal_input.MessageAccepted, **SHAPE,
              errors=(*RUN_ERRORS, "USER_SCOPE_REQUIRED")),
    Operation("POST", "/v1/timbal/threads/{thread_id}/cancel", "timbalCancel",
              "Cancel the thread's active run (Timbal HTTP/1.0)", "timbal",
              description="200 `cancelling` (the run's log ends with `run.cancelled`), or 200 "
                          "`idle` when no run is active. The body (`{reason}`) is optional.",
              params=KEYS, result=timbal_input.CancelAnswer, **SHAPE,
              errors=("USER_SCOPE_REQUIRED", "VALIDATION_ERROR", "INVALID_JSON",
                      "JSON_TOO_DEEP", "INTEGER_OUT_OF_RANGE", "NUMBER_OUT_OF_RANGE",
                      "NUL_CHARACTER")),
)

UUID = "550e8400-e29b-41d4-a716-446655440000"
EXAMPLES: dict[str, dict[str, Any]] = {
    "timbalCreateThread": {
        "request": {"agent": "default", "userKey": "user-123", "metadata": {"topic": "weather"}},
        "response": {"threadId": UUID, "status": "created", "createdAt": "2025-01-15T14:30:00.000Z",
                     "streamUrl": f"wss://gateway.example.com/v1/timbal/threads/{UUID}/stream"}},
    "timbalSendMessage": {
        "request": {"content": "What's the weather in San Francisco?",
                    "metadata": {"role": "user", "timestamp": "2025-01-15T14:30:00.000Z"}},
        "response": {"messageId": "01J4KZ3Y9ABCDEFGHJKMNPQRST", "threadId": UUID,
                     "status": "processing", "receivedAt": "2025-01-15T14:30:00.123Z"}},
    "timbalCancel": {
        "response": {"threadId": UUID, "status": "cancelling",
                     "cancelledAt": "2025-01-15T14:30:10.000Z",
                     "runId": "run_01J4KZ3Y9ABCDEFGHJKMNPQRST"}},
}

SCHEMAS = Schemas(
    unions=(Union("timbal.frame", frames_schema.PublishedFrame, "timbal/frame.json",
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

DIALECT = WireDialect("timbal", routes.routes, OPERATIONS, EXAMPLES, schemas=SCHEMAS)
