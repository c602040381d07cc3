"""AG-UI 1.0 proper (what `HttpAgent` from `@ag-ui/client` and CopilotKit read).

Every event is built with `ag_ui.core`'s own types, so a stream is 1.0 by construction:
reasoning is `REASONING_*` (a span and one reasoning message), server tool results are
`TOOL_CALL_RESULT` with their own message id, a pause for client tools is
`RUN_FINISHED {outcome: {type: success, pendingToolCallIds}}`, and a cancel is
`RUN_FINISHED {outcome: {type: cancelled}}` after every open item is closed.

Components are tool calls named after the component (their arguments are the props as they
stream) answered by the gateway itself, plus the gateway's agent state: `state.components` maps
a component id to `{componentId, name, messageId, toolCallId, props, state}`. The first
component of a run adds it with a `STATE_DELTA`, as later changes are (a component's state
changes under `/components/{id}/state`), so the client's own keys stay: they are the thread's
shared state, which a server tool changes with `ctx.state` (a `thread.state` frame, a
`STATE_DELTA` at the state's root).

Input the client sent itself (the user's message, client tool results) is in the log too, but it
is never echoed back: the client already holds it under its own ids.

Sub-agents: a `subagent.started` control frame is `SUBAGENT_STARTED` (with the spawning tool
call and message, and the enclosing sub-agent when one delegates further); every event of a
message that carries `subagentRunId` carries it too (AG-UI's attribution); the sub-agent's
`agent_complete` is `SUBAGENT_FINISHED {result}` and its `error` `SUBAGENT_ERROR`. A run that
ends while a sub-agent works (a cancel, a failure) first ends it with `SUBAGENT_ERROR`, so no
sub-agent is left open.

A client that declares no `protocolVersion` in its `RunAgentInput` predates 1.0 (the spec reads
absence so): `@ag-ui/client` 0.0.x, which CopilotKit 1.7x bundles. Its `RUN_FINISHED` schema is
strict and knows neither `outcome.pendingToolCallIds` nor the `cancelled` outcome, and rejects
the whole run over either. Such a client gets the spec's downgrade: both are left out (it finds
the calls it must answer from the tool calls themselves); so are the `SUBAGENT_*` events and
the attribution, which it does not know either (it sees the sub-agent's messages as the
assistant's). Nothing else changes. Its schema does know the `interrupt` outcome, though, and
CopilotKit's `useInterrupt` reads it: a client that opts in (`interrupts`, from its input's
`forwardedProps.interrupts`) gets it when calls wait for a human, instead of the plain success
that leaves it to answer them as tool calls.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import jsonpatch
from ag_ui.core import (
    PROTOCOL_VERSION,
    ActivityDeltaEvent,
    ActivitySnapshotEvent,
    BaseEvent,
    CustomEvent,
    Interrupt,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from ...protocol import approvals, timbal
from ...protocol.frames_schema import (
    ComponentStartMeta,
    ComponentValue,
    ControlFrame,
    Frame,
    JsonPatchOp,
    SetValue,
    StatusValue,
    SubagentStartedFrame,
    SubagentValue,
)
from ...protocol.props_stream import pointer
from ...protocol.translation import Dialect, Item
from ...protocol.usage_events import agui_usage, run_metadata

COMPONENTS = "components"  # the member of the agent state that holds the run's components
CUSTOM_STATE = "gateway.component.state"  # a state change of a component this run never showed
CUSTOM_QUEUED = "gateway.run.queued"  # the run waits for its thread (`enqueue`)
ACTIVITY_TYPE = "tool_status"  # the activity messages of tools' statuses


class AguiDialect(Dialect[BaseEvent]):
    """`client_ids`: the (threadId, runId) the client calls the thread and the run by, which
    its events name instead of the gateway's own ids (`routes.py`, "Ids")."""

    def __init__(self, client_version: str | None = PROTOCOL_VERSION,
                 client_ids: tuple[str, str] | None = None, interrupts: bool = False) -> None:
        super().__init__()
        self.before_1_0 = client_version is None
        self.interrupt_outcome = interrupts or not self.before_1_0
        self.client_ids = client_ids
        self.pending: list[str] = []
        self.interrupts: list[Interrupt] = []  # calls waiting for a human
        self.components: set[str] = set()  # components in the state this run sent
        self.subagents: list[str] = []  # sub-agent invocations under way, innermost last
        self.activities: dict[str, dict[str, Any]] = {}  # a status shown, by its item id

    def feed(self, frame: Frame) -> list[BaseEvent]:
        owner = None if self.before_1_0 else _owner(frame, self.open)
        events = super().feed(frame)
        return _attributed(events, owner) if owner else events

    def close_open(self) -> list[BaseEvent]:
        """Every open item closed (as its owner's), then every sub-agent still working."""
        events: list[BaseEvent] = []
        for item in self.open.values():
            owner = None if self.before_1_0 else item.meta.get("subagentRunId")
            events.extend(_attributed(self.on_close(item), owner))
        self.open.clear()
        return events + self._end_subagents()

    def _end_subagents(self) -> list[BaseEvent]:
        ended: list[BaseEvent] = [
            SubagentErrorEvent(subagent_run_id=invocation, code="RUN_ENDED",
                               message="The run ended before the sub-agent finished")
            for invocation in reversed(self.subagents)]
        self.subagents.clear()
        return ended

    def on_start(self, item: Item) -> list[BaseEvent] | None:
        meta = item.meta
        if meta["type"] == "agent":
            return [TextMessageStartEvent(message_id=item.message_id, role="assistant")]
        if meta["type"] == "thinking":
            return [ReasoningStartEvent(message_id=_span(item.i)),
                    ReasoningMessageStartEvent(message_id=item.i, role="reasoning")]
        if meta["type"] == "tool_call":
            return [ToolCallStartEvent(tool_call_id=meta["toolCallId"],
                                       tool_call_name=meta["name"],
                                       parent_message_id=item.message_id)]
        if meta["type"] == "x-component":
            return [ToolCallStartEvent(tool_call_id=_component_call_id(meta),
                                       tool_call_name=meta["name"],
                                       parent_message_id=item.message_id),
                    self._put_component(meta, {}, {})]
        return None

    def on_append(self, item: Item, text: str) -> list[BaseEvent]:
        if item.type == "agent":
            return [TextMessageContentEvent(message_id=item.message_id, delta=text)]
        if item.type == "thinking":
            return [ReasoningMessageContentEvent(message_id=item.i, delta=text)]
        meta = item.meta
        if meta["type"] == "tool_call":
            return [ToolCallArgsEvent(tool_call_id=meta["toolCallId"], delta=text)]
        if meta["type"] == "x-component":
            return [ToolCallArgsEvent(tool_call_id=_component_call_id(meta), delta=text)]
        return []

    def on_end(self, item: Item, value: SetValue) -> list[BaseEvent]:
        if item.type in ("agent", "thinking"):
            rest = item.rest_of(value)
            tail = self.on_append(item, rest) if rest else []
            return tail + self.on_close(item)
        meta = item.meta
        if meta["type"] == "tool_call":
            return self.on_close(item)
        if meta["type"] == "x-component" and value["type"] == "x-component":
            call_id = _component_call_id(meta)
            events: list[BaseEvent] = []
            if not item.sent:  # props that never streamed still reach the call's arguments
                events.append(ToolCallArgsEvent(tool_call_id=call_id,
                                                delta=json.dumps(value.get("props") or {})))
            events.append(ToolCallEndEvent(tool_call_id=call_id))
            return events + self._component_done(item.i, value)
        return []

    def on_whole(self, i: str, value: SetValue) -> list[BaseEvent]:
        if value["type"] == "agent":
            message_id, content = value.get("messageId", ""), value.get("content", "")
            text: list[BaseEvent] = [TextMessageStartEvent(message_id=message_id,
                                                           role="assistant")]
            if content:
                text.append(TextMessageContentEvent(message_id=message_id, delta=content))
            return text + [TextMessageEndEvent(message_id=message_id)]
        if value["type"] == "thinking":
            content = value.get("content", "")
            events: list[BaseEvent] = [ReasoningStartEvent(message_id=_span(i)),
                      ReasoningMessageStartEvent(message_id=i, role="reasoning")]
            if content:
                events.append(ReasoningMessageContentEvent(message_id=i, delta=content))
            return events + [ReasoningMessageEndEvent(message_id=i),
                             ReasoningEndEvent(message_id=_span(i))]
        if value["type"] == "tool_call":
            call_id = value["toolCallId"]
            return [ToolCallStartEvent(tool_call_id=call_id, tool_call_name=value["name"],
                                       parent_message_id=value.get("messageId", "")),
                    ToolCallArgsEvent(tool_call_id=call_id,
                                      delta=json.dumps(value.get("arguments") or {})),
                    ToolCallEndEvent(tool_call_id=call_id)]
        if value["type"] == "agent_complete" or value["type"] == "error":
            return self._subagent_ended(value)
        if value["type"] == "status":
            return [] if self.before_1_0 else [self._activity(i, value)]
        if value["type"] == "tool_result" and "origin" not in value:  # not a client's
            return [ToolCallResultEvent(message_id=i, tool_call_id=value["toolCallId"],
                                        content=timbal.tool_result_text(value), role="tool")]
        if value["type"] == "x-component":
            call_id = _component_call_id(value)
            props = value.get("props") or {}
            return [ToolCallStartEvent(tool_call_id=call_id, tool_call_name=value["name"],
                                       parent_message_id=value.get("messageId", "")),
                    ToolCallArgsEvent(tool_call_id=call_id, delta=json.dumps(props)),
                    ToolCallEndEvent(tool_call_id=call_id),
                    self._put_component(value, props, value.get("state") or {}),
                    _rendered(i, value)]
        return []

    def on_close(self, item: Item) -> list[BaseEvent]:
        if item.type == "agent":
            return [TextMessageEndEvent(message_id=item.message_id)]
        if item.type == "thinking":
            return [ReasoningMessageEndEvent(message_id=item.i),
                    ReasoningEndEvent(message_id=_span(item.i))]
        meta = item.meta
        if meta["type"] == "tool_call":
            return [ToolCallEndEvent(tool_call_id=meta["toolCallId"])]
        if meta["type"] == "x-component":
            return [ToolCallEndEvent(tool_call_id=_component_call_id(meta))]
        return []

    def on_control(self, frame: ControlFrame) -> list[BaseEvent]:
        if frame["c"] == timbal.RUN_STARTED:
            if self.client_ids is not None:
                self.thread_id, self.run_id = self.client_ids
            return [RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id,
                                    protocol_version=PROTOCOL_VERSION)]
        if frame["c"] == timbal.RUN_AWAITING_INPUT:
            calls = frame["pendingToolCalls"]
            self.pending = [p["toolCallId"] for p in calls if not asks_a_human(p)]
            self.interrupts = [interrupt(p) for p in calls if asks_a_human(p)]
            return []
        if frame["c"] == timbal.COMPONENT_STATE:
            return [self._state_change(frame["componentId"], frame["operations"],
                                       frame["revision"])]
        if frame["c"] == timbal.SUBAGENT_STARTED:
            return [] if self.before_1_0 else [self._subagent_started(frame)]
        if frame["c"] == timbal.THREAD_STATE:  # a server tool changed the shared state
            return [StateDeltaEvent(delta=list(frame["operations"]))]
        # What the run consumed (1.0's `usage`; unknown to a client before 1.0, as outcomes are).
        usage = None if self.before_1_0 else agui_usage(frame)
        # A cut answer, an estimated usage (1.0's `metadata`).
        metadata = None if self.before_1_0 else run_metadata(frame)
        if frame["c"] == timbal.RUN_FINISHED:
            return self.close_open() + [RunFinishedEvent(
                thread_id=self.thread_id, run_id=self.run_id, outcome=self._outcome(),
                usage=usage, metadata=metadata)]
        if frame["c"] == timbal.RUN_CANCELLED:
            cancelled = None if self.before_1_0 else RunFinishedCancelledOutcome()
            return self.close_open() + [RunFinishedEvent(
                thread_id=self.thread_id, run_id=self.run_id, outcome=cancelled, usage=usage,
                metadata=metadata)]
        if frame["c"] == timbal.ERROR:
            return self._end_subagents() + [RunErrorEvent(
                message=frame.get("message") or "An internal error occurred",
                code=frame.get("code") or "INTERNAL_ERROR", usage=usage, metadata=metadata)]
        return []

    def on_queued(self) -> list[BaseEvent]:
        return [CustomEvent(name=CUSTOM_QUEUED,
                            value={"threadId": self.thread_id, "runId": self.run_id})]

    def stamp(self, event: BaseEvent, ts: int) -> BaseEvent:
        event.timestamp = ts
        return event

    def _outcome(self) -> RunFinishedOutcome:
        """How a run that finished ended: interrupted when calls wait for a human (those that
        wait for the client stay tool calls without a result, answered with `tool` messages);
        else a success naming the client's pending calls. A client before 1.0 knows no
        `pendingToolCallIds`: it gets a plain success, and the interrupt only if it opted in
        (else it answers them with `tool` messages)."""
        if self.interrupts and self.interrupt_outcome:
            return RunFinishedInterruptOutcome(interrupts=self.interrupts)
        if self.before_1_0:
            return RunFinishedSuccessOutcome()
        return RunFinishedSuccessOutcome(pending_tool_call_ids=self.pending or None)

    # -- sub-agents ----------------------------------------------------------------------------

    def _subagent_started(self, frame: SubagentStartedFrame) -> BaseEvent:
        self.subagents.append(frame["subagentRunId"])
        return SubagentStartedEvent(
            subagent_run_id=frame["subagentRunId"], name=frame["name"],
            description=frame.get("description") or None,
            parent_subagent_run_id=frame.get("parentSubagentRunId"),
            parent_tool_call_id=frame["toolCallId"], parent_message_id=frame["messageId"])

    def _subagent_ended(self, value: SubagentValue) -> list[BaseEvent]:
        invocation = value.get("agentId")
        if self.before_1_0 or invocation not in self.subagents:
            return []
        self.subagents.remove(invocation)
        if value["type"] == "agent_complete":
            return [SubagentFinishedEvent(subagent_run_id=invocation, result=value.get("result"))]
        return [SubagentErrorEvent(subagent_run_id=invocation, message=value.get("content", ""),
                                   code=value.get("code"))]

    # -- a tool's status as an activity message ------------------------------------------------

    def _activity(self, i: str, value: StatusValue) -> BaseEvent:
        """A tool's status (`ctx.status`, an MCP server's progress): an `ACTIVITY_SNAPSHOT`
        the first time (`HttpAgent` adds an activity message), then `ACTIVITY_DELTA`s."""
        content: dict[str, Any] = {"toolCallId": value["toolCallId"], "state": value["state"],
                                   "detail": value["detail"]}
        for key in ("progress", "total"):
            if key in value:
                content[key] = value[key]
        old = self.activities.get(i)
        self.activities[i] = content
        if old is None:
            return ActivitySnapshotEvent(message_id=i, activity_type=ACTIVITY_TYPE,
                                         content=content)
        return ActivityDeltaEvent(message_id=i, activity_type=ACTIVITY_TYPE,
                                  patch=jsonpatch.make_patch(old, content).patch)

    def on_delete(self, i: str) -> list[BaseEvent]:
        """The call ended: its activity is marked `done` (AG-UI deletes no message)."""
        if self.activities.pop(i, None) is None:
            return []
        return [ActivityDeltaEvent(message_id=i, activity_type=ACTIVITY_TYPE,
                                   patch=[{"op": "add", "path": "/done", "value": True}])]

    # -- components as agent state -----------------------------------------------------------

    def _put_component(self, meta: ComponentStartMeta | ComponentValue, props: dict[str, Any],
                       state: dict[str, Any]) -> BaseEvent:
        component_id = meta["componentId"]
        entry = {"componentId": component_id, "name": meta["name"],
                 "messageId": meta.get("messageId"), "toolCallId": _component_call_id(meta),
                 "props": props, "state": state}
        if not self.components:
            # A delta, not a snapshot: the agent state also holds the thread's shared state
            # (the client's keys, `runs/components/thread_state.py`), which must stay.
            self.components.add(component_id)
            return StateDeltaEvent(delta=[{"op": "add", "path": f"/{COMPONENTS}",
                                           "value": {component_id: entry}}])
        self.components.add(component_id)
        return StateDeltaEvent(delta=[{"op": "add", "path": _path(component_id),
                                       "value": entry}])

    def _component_done(self, i: str, value: ComponentValue) -> list[BaseEvent]:
        base = _path(value["componentId"])
        ops = [{"op": "replace", "path": f"{base}/props", "value": value.get("props") or {}}]
        if value.get("state") is not None:
            ops.append({"op": "replace", "path": f"{base}/state", "value": value["state"]})
        return [StateDeltaEvent(delta=ops), _rendered(i, value)]

    def _state_change(self, component_id: str, operations: list[JsonPatchOp],
                      revision: int) -> BaseEvent:
        if component_id in self.components:
            base = _path(component_id) + "/state"
            return StateDeltaEvent(delta=[_prefixed(op, base) for op in operations])
        return CustomEvent(name=CUSTOM_STATE, value={"componentId": component_id,
                                                     "operations": operations,
                                                     "revision": revision})


def _owner(frame: Frame, open_items: dict[str, Item]) -> str | None:
    """The sub-agent invocation a message frame belongs to (None: the run's own agent)."""
    if "c" in frame:
        return None
    item = open_items.get(frame.get("i") or "")
    meta = item.meta if item is not None else frame.get("m") or frame.get("v") or {}
    owner = meta.get("subagentRunId") if isinstance(meta, dict) else None
    return owner if isinstance(owner, str) else None


def _attributed(events: list[BaseEvent], owner: str | None) -> list[BaseEvent]:
    """The events with AG-UI's `subagentRunId` attribution, on those that can carry it."""
    if owner is not None:
        for event in events:
            if "subagent_run_id" in type(event).model_fields and not isinstance(
                    event, (SubagentStartedEvent, SubagentFinishedEvent, SubagentErrorEvent)):
                setattr(event, "subagent_run_id", owner)  # noqa: B010 (a field of some)
    return events


def encode(event: BaseEvent) -> str:
    """An event as the JSON of one SSE `data:` line (camelCase, unset fields omitted)."""
    return event.model_dump_json(by_alias=True, exclude_none=True)


def asks_a_human(call: Mapping[str, Any]) -> bool:
    """Whether a pending call waits for a human's answer (an interrupt), not a client tool. An
    approval and a tool's question both carry the request in the call's `approval` member (the
    wire's name, kept for the clients that read it)."""
    return isinstance(call.get("approval"), dict)


def interrupt(call: Mapping[str, Any]) -> Interrupt:
    """A call waiting for a human (an approval, or a tool's question) as AG-UI 1.0's
    interrupt: a `resume` entry answers it by `id`; for an approval,
    `{"status": "resolved", "payload": {"approved": true}}` runs the tool."""
    asked = call["approval"]
    return Interrupt(id=asked["interruptId"], reason=asked["reason"],
                     message=asked["message"], tool_call_id=call["toolCallId"],
                     response_schema=asked.get("responseSchema", approvals.RESPONSE_SCHEMA),
                     expires_at=asked["expiresAt"],
                     metadata={"toolName": call["toolName"], "arguments": _input(call)})


def _input(call: Mapping[str, Any]) -> Any:
    """A pending call's arguments as an object: the live frame's `input`, else (as the thread
    stores the call) its `arguments` JSON."""
    if "input" in call:
        return call["input"]
    try:
        return json.loads(call.get("arguments") or "{}")
    except ValueError:
        return call.get("arguments")


def _span(i: str) -> str:
    return f"{i}:span"


def _component_call_id(meta: ComponentStartMeta | ComponentValue) -> str:
    return meta.get("toolCallId") or meta["componentId"]


def _path(component_id: str) -> str:
    return f"/{COMPONENTS}{pointer(component_id)}"


def _prefixed(op: JsonPatchOp, base: str) -> dict[str, Any]:
    moved = {**op, "path": base + op["path"]}
    if "from" in op:
        moved["from"] = base + op["from"]
    return moved


def _rendered(i: str, value: ComponentValue) -> ToolCallResultEvent:
    """The gateway's own answer to a component call: the client must not answer it."""
    return ToolCallResultEvent(
        message_id=f"{i}:result", tool_call_id=_component_call_id(value), role="tool",
        content=json.dumps({"rendered": value["name"], "componentId": value["componentId"]}))
