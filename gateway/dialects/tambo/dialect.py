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
from . import events, routes, routes_batch, routes_wait

EVENTS = EventSchema("TamboEvent", events.TamboEvent)
RUN_STREAM = (
    "The run as Server-Sent Events in the Tambo dialect of AG-UI: each message is an `id:` line "
    "(the event's position in the run, for `Last-Event-ID`) and a `data:` line holding one "
    "event (schema `TamboEvent`, also published under `schemas/tambo/`). Headers are flushed "
    "at once; comment lines are heartbeats. After the stream starts, an error is exactly one "
    "`RUN_ERROR` event and nothing after it.")

RUN_WAIT = (
    "The same request as the streamed run, answered as one JSON body once the run has ended "
    "(completed, awaiting_input, failed or cancelled): its status, ids, the messages it added "
    "(its input, then its answer), its usage and, for a failed or cancelled run, its error. "
    "The run does not depend on this request: `onDisconnect` defaults to `continue`. A run "
    "still going after `GATEWAY_RUN_WAIT_SECONDS` is answered 202 with its ids (`Location`: "
    "`waitRun`, to wait again).")

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
    *(Operation("POST", path, op_id, summary, "runs", description=RUN_WAIT, body=tambo.RunRequest,
                params=params, result=tambo.RunWaitResult,
                alternates={202: "The run had not ended after `GATEWAY_RUN_WAIT_SECONDS`: its "
                                 "ids and status (and `Location`, its stream), to join it."},
                errors=(*RUN_ERRORS, *STORED_CAPS, "USER_SCOPE_REQUIRED"))
      for path, op_id, summary, params in (
          ("/v1/threads/runs/wait", "createThreadAndRunWait",
           "Create a thread, run it and answer when the run ends", (*KEYS, IDEMPOTENCY_KEY, AGENT)),
          ("/v1/threads/{thread_id}/runs/wait", "runThreadWait",
           "Run a thread and answer when the run ends", (*KEYS, IDEMPOTENCY_KEY)))),
    Operation("POST", "/v1/threads/runs/batch", "batchRuns", "Start several runs at once",
              "runs", body=tambo.BatchRunRequest, params=KEYS, result=tambo.BatchStartedList,
              description="Each item is a run request, on the thread its `threadId` names or "
                          "on a new thread, started as if sent alone (same checks and quotas); "
                          f"at most {tambo.MAX_BATCH_RUNS} a request. An item that is refused "
                          "carries its problem (`error`: `status`, `code`, `detail`) and does "
                          "not refuse the others. Join the runs by stream, status or "
                          "`waitRun`.",
              errors=("VALIDATION_ERROR", "USER_SCOPE_REQUIRED")),
    Operation("POST", "/v1/threads/runs/cancel", "bulkCancelRuns",
              "Cancel the active runs of threads", "runs", body=tambo.BulkCancelRequest,
              params=KEYS, result=tambo.BulkCancelled,
              description="Cancels the active run of each of the caller's threads that "
                          "`threadIds` names, or whose metadata has every value `metadata` "
                          "gives (both: the named threads that match); at most 100 threads a "
                          "call (`more`: call again). Threads of other user scopes are never "
                          "reached.",
              errors=("VALIDATION_ERROR", "USER_SCOPE_REQUIRED")),
    Operation("GET", "/v1/threads/{thread_id}/runs/{run_id}/wait", "waitRun",
              "Wait for a run to end", "runs",
              description="The answer of `runThreadWait` for a run already started (the "
                          "`Location` of its 202): waits again up to "
                          "`GATEWAY_RUN_WAIT_SECONDS`.",
              params=KEYS, result=tambo.RunWaitResult,
              alternates={202: "Still not ended: its ids and status, to wait again."},
              errors=("RUN_NOT_FOUND",)),
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

_WAITED = {"status": "completed", "threadId": THREAD, "runId": RUN, "usage": _USAGE,
           "messages": [
               {"id": "01JH8Z3Q0A1B2C3D4E5F6G7H8J", "role": "user", "createdAt": CREATED,
                "runId": RUN, "content": [{"type": "text",
                                           "text": "Show me the weather in Paris"}]},
               {"id": MESSAGE, "role": "assistant", "createdAt": UPDATED, "runId": RUN,
                "content": [{"type": "text", "text": "Here is the weather in Paris."}]}]}


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
    "createThreadAndRunWait": {"request": _NEW_THREAD_RUN, "response": _WAITED},
    "runThreadWait": {"request": _RUN_REQUEST, "response": _WAITED},
    "waitRun": {"response": _WAITED},
    "batchRuns": {"request": {"runs": [
        {"message": _RUN_REQUEST["message"], "threadMetadata": {"job": "nightly"}},
        {"message": _RUN_REQUEST["message"], "threadId": THREAD,
         "previousRunId": PREVIOUS_RUN}]},
        "response": {"runs": [{"index": 0, "threadId": "thr_01JH8Z4A5B6C7D8E9F0G1H2J3K",
                               "runId": RUN, "status": "running"},
                              {"index": 1, "error": {"status": 409, "code": "CONCURRENT_RUN",
                                                     "detail": "A run is already active"}}]}},
    "bulkCancelRuns": {"request": {"metadata": {"job": "nightly"}},
                       "response": {"runs": [{"threadId": THREAD, "runId": RUN,
                                              "status": "cancelled"}], "more": False}},
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

DIALECT = WireDialect("tambo", [*routes_wait.routes, *routes_batch.routes, *routes.routes], OPERATIONS, EXAMPLES, EVENTS, SCHEMAS)
