"""The AG-UI 1.0 dialect as the registry holds it: its endpoints, their documentation and the
event union it publishes (`ag_ui.core.Event`, which its translator builds with)."""

from __future__ import annotations

from typing import Any

from ag_ui.core import AgentCapabilities, Event

from ...protocol import tambo
from ...protocol.operations import (
    CALL,
    CREATED,
    CURSOR,
    KEYS,
    MESSAGE,
    REPLAY,
    RUN,
    RUN_ERRORS,
    STORED_CAPS,
    STREAM_HEADERS,
    THREAD,
    THREAD_FILTERS,
    UPDATED,
    Operation,
    T,
    limit,
    sse,
)
from ...protocol.schema_files import Schemas, Union
from ..base import EventSchema, WireDialect
from . import routes, snapshot
from .input import GatewayRunInput

EVENTS = EventSchema("AguiEvent", Event)
AGUI_STREAM = (
    "The run as Server-Sent Events in AG-UI 1.0: each message is an `id:` line (the event's "
    "position in the run, for `Last-Event-ID`) and a `data:` line holding one event (schema "
    "`AguiEvent`, `ag_ui.core.Event` of ag-ui-protocol 1.0). A pause for client tools ends "
    "with `RUN_FINISHED` whose `outcome.pendingToolCallIds` names them; a cancelled run with "
    "`outcome: {type: cancelled}` (a client from before 1.0, whose input declares no "
    "`protocolVersion`, gets neither: a plain success, and no outcome); calls waiting for a "
    "human end it with `outcome: {type: interrupt, interrupts}` (for a client before 1.0 only "
    "if it opted in with `forwardedProps.interrupts`); components are tool "
    "calls plus `STATE_SNAPSHOT` / "
    "`STATE_DELTA` under `/components/{componentId}`. After the stream starts, an error is "
    "exactly one `RUN_ERROR` event and nothing after it.")
AGUI_RUN = "/v1/agui/threads/{thread_id}/runs/{run_id}"
OPERATIONS: tuple[Operation, ...] = (
    Operation("POST", "/v1/agui/agents/{agent}/run", "aguiRunAgent",
              "Run the agent for an AG-UI 1.0 client (HttpAgent, CopilotKit)", "agui",
              description="Takes a `RunAgentInput`; `threadId` and `runId` (at most 64 "
                          "characters) are the client's names for the thread and the run within "
                          "the project, beside the gateway's own ids (headers `X-Thread-Id`, "
                          "`X-Run-Id`). A new thread starts with "
                          "the messages before the last user message; an existing one takes "
                          "the last user message and the `tool` messages or `resume` entries "
                          "answering its pending tool calls. Image, audio, video and document "
                          "parts of the user message reach the model as Tambo `resource` "
                          "blocks do. `forwardedProps` may carry `components`, `userKey`, "
                          "`onDisconnect` (default `grace`; `cancel` for a client before 1.0, "
                          "which sends no `protocolVersion`) and `interrupts: true` (a client "
                          "before 1.0 that reads the `interrupt` outcome, as CopilotKit's "
                          "`useInterrupt` does). A `runId` the thread already ran replays that "
                          "run, unless the input's `resume` answers what the thread waits for: "
                          "then it is a new run. " + AGUI_STREAM,
              body=GatewayRunInput, params=KEYS, stream=EVENTS.name, headers=STREAM_HEADERS,
              errors=("NO_NEW_INPUT", "AGENT_NOT_FOUND", "THREAD_NOT_FOUND", "RUN_ID_IN_USE",
                      "THREAD_AGENT_MISMATCH", "ATTACHMENT_TOO_LARGE", "INVALID_ATTACHMENT",
                      "UNSUPPORTED_ATTACHMENT",
                      "USER_SCOPE_REQUIRED", *RUN_ERRORS, *STORED_CAPS)),
    Operation("POST", "/v1/agui/agents/{agent}/connect", "aguiConnectAgent",
              "Load a thread for an AG-UI 1.0 client (connectAgent, CopilotKit connect)", "agui",
              description="Takes a `RunAgentInput`; its `threadId` names the thread, its `runId` "
                          "the snapshot. Answers `RUN_STARTED`, `MESSAGES_SNAPSHOT` (the "
                          "thread's messages, tool calls and results included), `STATE_SNAPSHOT` "
                          "(`components`, and `pendingToolCalls` the thread waits for) and "
                          "`RUN_FINISHED` (1.0: `outcome.pendingToolCallIds`), without SSE ids; "
                          "then, if a run is active, that run's events from its start, with "
                          "their ids, live until it ends. With `Last-Event-ID` (or `after`): "
                          "only the thread's latest run after that event. A thread that does "
                          "not exist, or is outside the caller's scope, is an empty thread.",
              body=GatewayRunInput, params=(*KEYS, *REPLAY), stream=EVENTS.name,
              errors=("AGENT_NOT_FOUND", "THREAD_AGENT_MISMATCH", "INVALID_CURSOR",
                      "USER_SCOPE_REQUIRED")),
    Operation("GET", "/v1/agui/agents/{agent}/capabilities", "aguiGetCapabilities",
              "An agent's AG-UI 1.0 capabilities (getCapabilities)", "agui",
              description="`AgentCapabilities` from the agent's definition: its server tools, "
                          "sub-agents, step limit and tools that wait for approval, the input "
                          "its model is known to read, and what the gateway does for every "
                          "agent (streaming, resumable runs, kept shared state, interrupts, "
                          "reasoning; `custom.branches`: edit and regenerate branch the thread).",
              params=KEYS, result=AgentCapabilities, errors=("AGENT_NOT_FOUND",)),
    Operation("GET", "/v1/agui/threads", "aguiListThreads",
              "List the caller's AG-UI threads, newest first", "agui",
              description="The user scope's threads that an AG-UI client named, by those names "
                          "(`threadId`), for a thread picker (CopilotKit's `useThreads`); the "
                          "thread list's filters, order and cursor (`GET /v1/threads`). A thread "
                          "without a client's name (made by the Tambo endpoints, or a branch's "
                          "original, whose name moved to the branch) is left out.",
              params=(*KEYS, limit(20, 100), CURSOR, *THREAD_FILTERS),
              result=snapshot.AguiThreadList,
              errors=("INVALID_CURSOR", "USER_SCOPE_REQUIRED", "VALIDATION_ERROR")),
    Operation("GET", "/v1/agui/threads/{thread_id}", "aguiGetThreadStatus",
              "Whether a run is active on an AG-UI thread", "agui",
              description="By the client's ids: `running`, and the active run's `runId` (to "
                          "cancel it with `DELETE /v1/agui/threads/{threadId}/runs/{runId}`). A "
                          "thread that does not exist, or is outside the caller's scope, reads "
                          "as idle.",
              params=KEYS, result=snapshot.ThreadStatus),
    Operation("GET", AGUI_RUN, "aguiGetRun", "Reconnect to a run's AG-UI 1.0 stream", "agui",
              description="The run's events after the cursor (`Last-Event-ID` or `after`), "
                          "live until the run ends. " + AGUI_STREAM,
              params=(*KEYS, *REPLAY),
              stream=EVENTS.name, errors=("RUN_NOT_FOUND", "INVALID_CURSOR")),
    Operation("DELETE", AGUI_RUN, "aguiCancelRun", "Cancel a run (idempotent)", "agui",
              params=KEYS, result=tambo.CancelResponse,
              alternates={202: "The run is executing in another process and has not ended "
                               "yet; its cancellation is under way (`cancelRequested`)."},
              errors=("RUN_NOT_FOUND",)),
)

AGUI_INPUT = {
    "threadId": THREAD, "runId": RUN, "state": {}, "context": [], "forwardedProps": {},
    "messages": [{"id": "msg-1", "role": "user", "content": "What is the weather in Paris?"}],
    "tools": [{"name": "get_weather", "description": "The weather of a city.",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}],
}
AGUI_EVENTS = sse([
    {"type": "RUN_STARTED", "timestamp": T, "threadId": THREAD, "runId": RUN,
     "protocolVersion": "1.0"},
    {"type": "TEXT_MESSAGE_START", "timestamp": T + 40, "messageId": MESSAGE,
     "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "timestamp": T + 52, "messageId": MESSAGE,
     "delta": "Let me check."},
    {"type": "TEXT_MESSAGE_END", "timestamp": T + 60, "messageId": MESSAGE},
    {"type": "TOOL_CALL_START", "timestamp": T + 61, "toolCallId": CALL,
     "toolCallName": "get_weather", "parentMessageId": MESSAGE},
    {"type": "TOOL_CALL_ARGS", "timestamp": T + 70, "toolCallId": CALL,
     "delta": "{\"city\": \"Paris\"}"},
    {"type": "TOOL_CALL_END", "timestamp": T + 75, "toolCallId": CALL},
    {"type": "RUN_FINISHED", "timestamp": T + 90, "threadId": THREAD, "runId": RUN,
     "outcome": {"type": "success", "pendingToolCallIds": [CALL]}},
])
EXAMPLES: dict[str, dict[str, Any]] = {
    "aguiRunAgent": {"request": AGUI_INPUT, "stream": AGUI_EVENTS},
    "aguiConnectAgent": {"request": {**AGUI_INPUT, "messages": [], "tools": []},
                         "stream": sse([
        {"type": "RUN_STARTED", "timestamp": T, "threadId": THREAD, "runId": "connect-1",
         "protocolVersion": "1.0"},
        {"type": "MESSAGES_SNAPSHOT", "timestamp": T, "messages": [
            {"id": "msg-1", "role": "user", "content": "What is the weather in Paris?"},
            {"id": MESSAGE, "role": "assistant", "content": "Let me check.", "toolCalls": [
                {"id": CALL, "type": "function", "function": {
                    "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}]},
        {"type": "STATE_SNAPSHOT", "timestamp": T, "snapshot": {
            "components": {}, "pendingToolCalls": [
                {"toolCallId": CALL, "toolName": "get_weather",
                 "arguments": "{\"city\": \"Paris\"}"}]}},
        {"type": "RUN_FINISHED", "timestamp": T, "threadId": THREAD, "runId": "connect-1",
         "outcome": {"type": "success", "pendingToolCallIds": [CALL]}}])},
    "aguiGetCapabilities": {"response": {
        "identity": {"name": "default", "type": "gateway", "provider": "gateway"},
        "transport": {"streaming": True, "resumable": True},
        "tools": {"supported": True, "clientProvided": True, "items": []},
        "state": {"snapshots": True, "deltas": True, "persistentState": True},
        "humanInTheLoop": {"supported": True, "interrupts": True, "approvals": False,
                           "approveWithEdits": True},
        "custom": {"branches": True, "activity": ["tool_status"]}}},
    "aguiListThreads": {"response": {"threads": [
        {"threadId": THREAD, "agent": "default", "name": None, "createdAt": CREATED,
         "updatedAt": UPDATED, "running": False}], "hasMore": False, "nextCursor": None}},
    "aguiGetThreadStatus": {"response": {"threadId": THREAD, "running": True, "runId": RUN}},
    "aguiGetRun": {"stream": AGUI_EVENTS},
    "aguiCancelRun": {"response": {"runId": RUN, "status": "cancelled"}},
}

SCHEMAS = Schemas(unions=(Union(
    "agui.event", Event, "agui/event.json",
    "Any event of an AG-UI 1.0 run stream (POST /v1/agui/agents/{agent}/run, GET "
    "/v1/agui/threads/{threadId}/runs/{runId}): ag-ui-protocol 1.0's `ag_ui.core.Event`."),))

DIALECT = WireDialect("agui", routes.routes, OPERATIONS, EXAMPLES, EVENTS, SCHEMAS)
