"""The Tambo dialect as the registry holds it: its run endpoints, their documentation and
the event types it publishes (`events.py`)."""

from __future__ import annotations

from typing import Any

from ...protocol import tambo
from ...protocol.operations import (
    CREATED,
    CURSOR,
    EXAMPLE_USER_KEY,
    IDEMPOTENCY_KEY,
    KEYS,
    MESSAGE,
    PREVIOUS_RUN,
    REPLAY,
    RUN,
    RUN_ERRORS,
    STORED_CAPS,
    STREAM_HEADERS,
    THREAD,
    UPDATED,
    Operation,
    Param,
    T,
    limit,
    sse,
)
from ...protocol.schema_files import Schemas, Type, Union
from ..base import EventSchema, WireDialect
from . import events, routes

EVENTS = EventSchema("TamboEvent", events.TamboEvent)
RUN_STREAM = (
    "The run as Server-Sent Events in the Tambo dialect of AG-UI: each message is an `id:` line "
    "(the event's position in the run, for `Last-Event-ID`) and a `data:` line holding one "
    "event (schema `TamboEvent`, also published under `schemas/tambo/`). Headers are flushed "
    "at once; comment lines are heartbeats. After the stream starts, an error is exactly one "
    "`RUN_ERROR` event and nothing after it.")

AGENT = Param("agent", "query", {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
              "The gateway's addition: the agent of the new thread (as the AG-UI path names "
              "one). Without it, the API key's agent, else the default agent.")

OPERATIONS: tuple[Operation, ...] = (
    Operation("POST", "/v1/threads/runs", "createThreadAndRun", "Create a thread and run it",
              "runs", description=RUN_STREAM, body=tambo.RunRequest,
              params=(*KEYS, IDEMPOTENCY_KEY, AGENT), stream=EVENTS.name,
              headers=STREAM_HEADERS,
              errors=(*RUN_ERRORS, *STORED_CAPS, "USER_SCOPE_REQUIRED")),
    Operation("POST", "/v1/threads/{thread_id}/runs", "runThread", "Start a run on a thread",
              "runs", description=RUN_STREAM, body=tambo.RunRequest,
              params=(*KEYS, IDEMPOTENCY_KEY), stream=EVENTS.name, headers=STREAM_HEADERS,
              errors=(*RUN_ERRORS, *STORED_CAPS, "USER_SCOPE_REQUIRED")),
    Operation("GET", "/v1/threads/{thread_id}/runs", "listRuns", "List a thread's runs",
              "runs", description="The thread's runs, newest first, each with its status, "
                                  "times (`startedAt`, `firstTokenAt`, `finishedAt`), model "
                                  "and usage: what the playground's run list shows.",
              params=(*KEYS, limit(20, 100), CURSOR), result=tambo.RunList,
              errors=("INVALID_CURSOR", "USER_SCOPE_REQUIRED")),
    Operation("GET", "/v1/threads/{thread_id}/runs/{run_id}", "getRun",
              "Reconnect to a run's stream, or its status", "runs",
              description="With `Accept: application/json` (and not `text/event-stream`): the "
                          "run's status. Otherwise the run's events from the cursor "
                          "(`Last-Event-ID` or `after`), live until the run ends. " + RUN_STREAM,
              params=(*KEYS, *REPLAY),
              result=tambo.Run, stream=EVENTS.name, errors=("RUN_NOT_FOUND", "INVALID_CURSOR")),
    Operation("DELETE", "/v1/threads/{thread_id}/runs/{run_id}", "cancelRun",
              "Cancel a run (idempotent)", "runs", params=KEYS, result=tambo.CancelResponse,
              alternates={202: "The run is executing in another process and has not ended "
                               "yet; its cancellation is under way (`cancelRequested`)."},
              errors=("RUN_NOT_FOUND",)),
)

_RUN = {"id": RUN, "threadId": THREAD, "status": "completed", "createdAt": CREATED,
        "startedAt": CREATED, "finishedAt": UPDATED, "previousRunId": PREVIOUS_RUN,
        "onDisconnect": "grace"}
_USAGE = {"inputTokens": 412, "outputTokens": 37, "totalTokens": 449, "reasoningTokens": 0,
          "cachedInputTokens": 0, "costUsd": 0.00067,
          "models": [{"model": "gpt-4o-mini", "calls": 1, "inputTokens": 412, "outputTokens": 37,
                      "totalTokens": 449, "reasoningTokens": 0, "cachedInputTokens": 0,
                      "costUsd": 0.00067}]}
_LISTED_RUN = {**_RUN, "firstTokenAt": "2026-01-05T10:00:00.420Z", "model": "gpt-4o-mini",
               "usage": _USAGE}
_RUN_REQUEST = {
    "message": {"role": "user",
                "content": [{"type": "text", "text": "Show me the weather in Paris"}]},
    "previousRunId": PREVIOUS_RUN,
    "userKey": EXAMPLE_USER_KEY,
    "availableComponents": [{
        "name": "WeatherCard", "description": "The weather of a city.",
        "propsSchema": {"type": "object", "properties": {"city": {"type": "string"},
                                                         "temperature": {"type": "number"}}},
        "stateSchema": {"type": "object", "properties": {"pinned": {"type": "boolean"}}}}],
    "tools": [{"name": "get_local_time", "description": "The user's local time.",
               "inputSchema": {"type": "object", "properties": {}}}],
}
_NEW_THREAD_RUN = {key: value for key, value in _RUN_REQUEST.items() if key != "previousRunId"}


RUN_EVENTS = sse([
    {"type": "RUN_STARTED", "threadId": THREAD, "runId": RUN, "timestamp": T},
    {"type": "TEXT_MESSAGE_START", "messageId": MESSAGE, "role": "assistant", "timestamp": T + 40},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": MESSAGE, "delta": "Here is the weather",
     "timestamp": T + 52},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": MESSAGE, "delta": " in Paris.",
     "timestamp": T + 64},
    {"type": "TEXT_MESSAGE_END", "messageId": MESSAGE, "timestamp": T + 70},
    {"type": "RUN_FINISHED", "threadId": THREAD, "runId": RUN, "timestamp": T + 90},
])
EXAMPLES: dict[str, dict[str, Any]] = {
    "createThreadAndRun": {"request": _NEW_THREAD_RUN, "stream": RUN_EVENTS},
    "runThread": {"request": _RUN_REQUEST, "stream": RUN_EVENTS},
    "listRuns": {"response": {"runs": [_LISTED_RUN], "hasMore": False}},
    "getRun": {"response": _RUN, "stream": RUN_EVENTS},
    "cancelRun": {"response": {"runId": RUN, "status": "cancelled"}},
}

SCHEMAS = Schemas(
    unions=(Union("tambo.event", events.TamboEvent, "tambo/event.json",
                  "Any event of a Tambo-dialect run stream: the JSON in the `data:` line of one "
                  "SSE message (POST /v1/threads/runs, POST /v1/threads/{threadId}/runs, GET "
                  ".../runs/{runId})."),),
    types=(*(Type("tambo.events", name, tp, f"tambo/events/{name}.json")
             for name, tp in events.EVENTS.items()),
           *(Type("tambo.events", f"CUSTOM {name}", tp, f"tambo/events/CUSTOM.{name}.json")
             for name, tp in events.CUSTOM_EVENTS.items())),
)

DIALECT = WireDialect("tambo", routes.routes, OPERATIONS, EXAMPLES, EVENTS, SCHEMAS)
