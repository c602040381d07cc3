"""The agent loop: stream the model, write Timbal frames, run server tools, stop for client tools.

One model call is a *turn*; its output is one Tambo message (`messageId`), made of Timbal
messages: `thinking`, `agent` text, `tool_call`s and `x-component`s. Server tools run inline and
the loop takes another turn; client tools end the run in `awaiting_input`; components end the turn
with a synthetic result. Frames go to a `FrameSink`; this module knows nothing of logs,
databases or HTTP.

Every message carries `sender`, the agent's name (Timbal's multi-actor threads), when the run
has one. A sub-agent (`SubagentTool`) is a tool too: calling it runs the sub-agent's own loop,
recursively, into the same sink, between a `subagent.started` control frame and its
`agent_complete` (or `error`) message; its messages carry its `subagentRunId`, and its answer is
the call's result.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from ..protocol import timbal
from ..protocol.clock import new_id, now_ms
from ..protocol.frames_schema import (
    AgentCompleteValue,
    AgentValue,
    Authorship,
    ComponentStartMeta,
    ComponentValue,
    ErrorValue,
    PendingToolCall,
    ServerToolResultValue,
    StartMeta,
    SubagentStartedFrame,
    TextStartMeta,
    ThinkingValue,
    ToolCallStartMeta,
    ToolCallValue,
    TruncatedAnswer,
    TurnValue,
)
from ..protocol.run_spec import ClientTool, Component, ToolChoice
from ..protocol.timbal import FrameSink
from .context_window import ContextBudget, shrunk
from .deltas import (
    Delta,
    Finish,
    ModelError,
    ReasoningDelta,
    ReasoningSignature,
    RedactedReasoning,
    Served,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from .fragments import Fragments
from .hooks import NO_HOOKS, LoopHooks
from .model_view import COMPONENT_TOOL_PREFIX, turn_messages
from .models.litellm_model import ModelRequest
from .models.reasoning import Reasoning
from .stream_contract import estimated_usage, require_finish, truncation
from .tool_arguments import arguments_error, parsed_arguments
from .tools import approvals, elicitation, status_messages
from .tools import status as tool_status
from .tools.approval_rules import ApprovalRule
from .tools.context import bind_tool_call
from .tools.resources import ResourceServer
from .usage import estimate

log = logging.getLogger(__name__)


class Model(Protocol):
    def stream(self, request: ModelRequest) -> AsyncGenerator[Delta, None]: ...


ServerTool = Callable[[dict[str, Any]], Awaitable[Any]]


class ToolError(Exception):
    """Raised by a server tool to tell the model what went wrong: its message is the error the
    model (and the client) sees. Any other exception is reported as a generic failure with an
    error id, its details logged for the operator only (they may hold hosts or credentials)."""


@dataclass
class ServerToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]
    call: ServerTool
    # Ask a human first: a call pauses the run until it is approved (`engine/tools/approvals.py`).
    approval: bool = False
    # With `approval`: ask only for the calls this rule holds for (`tools/approval_rules.py`).
    approval_rule: ApprovalRule | None = None
    # The MCP server the tool is from, which can also read its resources (`embedResources`,
    # `engine/tools/resources.py`); None: a Python tool.
    resources: ResourceServer | None = None


@dataclass(frozen=True)
class SubagentTool:
    """An agent the model may delegate a task to: offered as a tool of its name with one
    `task` string; `prepare(task, subagent_run_id)` is the sub-agent's own run of it (its
    instructions, model, tools and sub-agents), streamed with `model`."""

    name: str
    description: str
    model: Model
    prepare: Callable[[str, str], RunInput]


@dataclass
class RunInput:
    history: list[dict[str, Any]]
    client_tools: list[ClientTool] = field(default_factory=list)
    components: list[Component] = field(default_factory=list)
    server_tools: dict[str, ServerToolSpec] = field(default_factory=dict)
    tool_choice: ToolChoice | None = None
    force_component: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    model: str | None = None  # a model the request picked (checked against the allow-list)
    reasoning: Reasoning | None = None  # what the agent asks of the model's thinking
    max_steps: int = 10
    # Output tokens the whole run may use (None: no limit), counted from reported usage.
    max_output_tokens: int | None = None
    tool_timeout: float = 30.0
    # How long an approval-gated call may wait for its answer before it counts as denied.
    approval_ttl: float = 86400.0
    # Tools a human allowed on this thread for good: their calls no longer ask.
    allowed_tools: frozenset[str] = frozenset()
    # Components shown in the thread so far: their `context_tools` are offered.
    shown_components: set[str] = field(default_factory=set)
    # Calls each tool already made on this thread, for the tools' `maxCalls`.
    call_counts: dict[str, int] = field(default_factory=dict)
    # Told which model answered a call when the adapter says (a fallback list).
    on_model: Callable[[str], Awaitable[None]] | None = None
    # Metrics, traces and quota counting, called at each model call's well-defined points.
    hooks: LoopHooks = NO_HOOKS
    # The input budget every model call is fitted to (None: the whole history, always).
    context: ContextBudget | None = None
    # The agent's name, written as `sender` on every message (None: no agents, no sender).
    sender: str | None = None
    # The agents this one may delegate to, by tool name.
    subagents: dict[str, SubagentTool] = field(default_factory=dict)
    # Set when this loop is a sub-agent's: the invocation its messages belong to.
    subagent_run_id: str | None = None
    # The statuses the run's tools may still report (shared with its sub-agents; None: none).
    status_budget: tool_status.StatusBudget | None = None
    # What a call cut by its `max_tokens` leads to: the run ends with the answer so far,
    # marked ("stop"), or the model is asked to go on ("continue"; `GATEWAY_ON_TRUNCATION`).
    on_truncation: str = "stop"
    # A run of the Tambo endpoints: every tool's schema gets Tambo's status-message parameters
    # (`engine/tools/status_messages.py`), which server tools then never receive.
    status_messages: bool = False

    def authorship(self) -> Authorship:
        """What every message of this loop carries: who wrote it, for which invocation."""
        who: Authorship = {}
        if self.sender is not None:
            who["sender"] = self.sender
        if self.subagent_run_id is not None:
            who["subagentRunId"] = self.subagent_run_id
        return who


@dataclass
class Outcome:
    """How the loop ended: `pending` holds client tool calls awaiting results; `text` is the
    last turn's answer; `output_tokens` what the loop's calls (sub-agents' too) produced;
    `truncated` (`{reason, messageId}`) when the last answer was cut by the provider."""

    pending: list[PendingToolCall] = field(default_factory=list)
    text: str = ""
    output_tokens: int = 0
    truncated: TruncatedAnswer | None = None


@dataclass
class _Call:
    index: int
    i: str
    tool_call_id: str
    name: str
    kind: str  # "client" | "server" | "subagent" | "component" | "unknown"
    fragments: Fragments = field(default_factory=Fragments)  # joined when read
    component_id: str | None = None

    @property
    def arguments(self) -> str:
        return str(self.fragments)


class Turn:
    """One model call's output, written as Timbal frames as the deltas arrive."""

    def __init__(self, sink: FrameSink, components: set[str], server_tools: set[str],
                 client_tools: set[str],
                 on_model: Callable[[str], Awaitable[None]] | None = None,
                 subagents: set[str] | None = None, who: Authorship | None = None) -> None:
        self.sink, self.on_model = sink, on_model
        self.message_id = new_id()
        self.components, self.server_tools, self.client_tools = (
            components, server_tools, client_tools)
        self.subagents = subagents or set()
        self.who: Authorship = who or {}
        self._texts = Fragments()
        self._thinking: tuple[str, Fragments] | None = None  # (i, content so far)
        self._agent: str | None = None
        self._agent_texts = Fragments()
        self.calls: dict[int, _Call] = {}
        self._waiting: dict[int, ToolCallDelta] = {}  # fragments before their name arrived
        self.values: list[TurnValue] = []  # every value the turn set, in order
        self.finish: str | None = None  # the provider's finish reason, once it said one

    async def feed(self, delta: Delta) -> None:
        if isinstance(delta, ReasoningDelta):
            if self._thinking is None:
                await self._open_thinking()
            assert self._thinking is not None
            i, content = self._thinking
            content.append(delta.text)
            await self.sink.emit(timbal.append(i, delta.text))
        elif isinstance(delta, TextDelta):
            await self._close_thinking()
            if self._agent is None:
                self._agent = new_id()
                meta: TextStartMeta = {"type": "agent", "messageId": self.message_id}
                _sign(meta, self.who)
                await self.sink.emit(timbal.start(self._agent, meta))
            self._agent_texts.append(delta.text)
            self._texts.append(delta.text)
            await self.sink.emit(timbal.append(self._agent, delta.text))
        elif isinstance(delta, ToolCallDelta):
            await self._close_thinking()
            await self._close_agent()
            await self._tool_call(delta)
        elif isinstance(delta, ReasoningSignature):
            await self._open_thinking()
            await self._close_thinking(signature=delta.signature)
        elif isinstance(delta, RedactedReasoning):
            await self._close_thinking()
            await self._open_thinking()
            await self._close_thinking(redacted=delta.data)
        elif isinstance(delta, Finish):
            self.finish = delta.reason
        elif isinstance(delta, Served) and self.on_model is not None:
            await self.on_model(delta.model)

    async def _open_thinking(self) -> None:
        if self._thinking is None:
            i = new_id()
            self._thinking = (i, Fragments())
            meta: TextStartMeta = {"type": "thinking", "messageId": self.message_id}
            _sign(meta, self.who)
            await self.sink.emit(timbal.start(i, meta))

    async def _tool_call(self, delta: ToolCallDelta) -> None:
        call = self.calls.get(delta.index)
        if call is None:
            if not delta.name:
                pending = self._waiting.get(delta.index)
                args = (pending.arguments if pending else "") + delta.arguments
                self._waiting[delta.index] = ToolCallDelta(delta.index, delta.id, None, args)
                return
            early = self._waiting.pop(delta.index, None)
            call = self._new_call(delta, (early.arguments if early else "") + delta.arguments)
            self.calls[delta.index] = call
            meta: ComponentStartMeta | ToolCallStartMeta
            if call.kind == "component":
                assert call.component_id is not None
                meta = {"type": "x-component", "messageId": self.message_id,
                        "componentId": call.component_id, "name": call.name,
                        "toolCallId": call.tool_call_id}
            else:
                meta = {"type": "tool_call", "messageId": self.message_id,
                        "toolCallId": call.tool_call_id, "name": call.name}
            _sign(meta, self.who)
            await self.sink.emit(timbal.start(call.i, meta))
            fragment = call.arguments
        else:
            fragment = delta.arguments
            call.fragments.append(fragment)
        if fragment:
            await self.sink.emit(timbal.append(call.i, fragment))

    def _new_call(self, delta: ToolCallDelta, arguments: str) -> _Call:
        name = delta.name or ""
        call_id = delta.id or new_id("call_")
        if name.startswith(COMPONENT_TOOL_PREFIX) and name[len(COMPONENT_TOOL_PREFIX):] in self.components:
            return _Call(delta.index, new_id(), call_id, name[len(COMPONENT_TOOL_PREFIX):],
                         "component", Fragments(arguments), component_id=new_id("comp_"))
        kind = ("subagent" if name in self.subagents
                else "client" if name in self.client_tools
                else "server" if name in self.server_tools else "unknown")
        return _Call(delta.index, new_id(), call_id, name, kind, Fragments(arguments))

    async def _close_thinking(self, signature: str | None = None,
                              redacted: str | None = None) -> None:
        """End the open thinking message; `signature` (the provider's, which ends a block) or
        `redacted` (an encrypted block) go on its value, for the next call to send back."""
        if self._thinking is not None:
            i, content = self._thinking
            self._thinking = None
            value: ThinkingValue = {"type": "thinking", "messageId": self.message_id,
                                    "content": str(content)}
            if signature:
                value["signature"] = signature
            if redacted:
                value["redacted"] = redacted
            _sign(value, self.who)
            await self.write_value(i, value)

    async def _close_agent(self, cancelled: bool = False) -> None:
        if self._agent is not None:
            value: AgentValue = {"type": "agent", "messageId": self.message_id,
                                 "content": str(self._agent_texts)}
            _sign(value, self.who)
            if cancelled:
                value["cancelled"] = True
            elif (cut := truncation(self.finish)) is not None:
                value["status"] = "truncated"  # Timbal's message status: cut by the provider
                value["finishReason"] = cut
            i, self._agent, self._agent_texts = self._agent, None, Fragments()
            await self.write_value(i, value)

    async def close(self, cancelled: bool = False) -> None:
        """Complete every open message with a set frame (partial content when cancelled)."""
        await self._close_thinking()
        await self._close_agent(cancelled)
        for call in self.ordered_calls():
            value = call_value(call, self.message_id, self.who)
            if cancelled:
                value["cancelled"] = True
            await self.write_value(call.i, value)

    async def write_value(self, i: str, value: TurnValue) -> None:
        """Set a value of this turn (its own, or a server tool's result): written to the sink,
        and kept for the model's view of the turn (`model_view.turn_messages`)."""
        self.values.append(value)
        await self.sink.emit(timbal.set_value(i, value, now_ms()))

    @property
    def text(self) -> str:
        """All the turn's text so far."""
        return str(self._texts)

    @property
    def started(self) -> bool:
        """Whether the turn wrote anything yet (a message started or set)."""
        return bool(self._agent is not None or self._thinking is not None or self.calls
                    or self._waiting or self.values)

    def output_text(self) -> str:
        """Everything the model wrote in this turn (text, reasoning, tool arguments), for a
        count of its tokens when the provider reported none."""
        thinking = [v["content"] for v in self.values if v["type"] == "thinking"]
        if self._thinking is not None:
            thinking.append(str(self._thinking[1]))
        return "".join([*thinking, self.text, *(c.arguments for c in self.ordered_calls())])

    def ordered_calls(self) -> list[_Call]:
        return [self.calls[index] for index in sorted(self.calls)]


def _sign(value: StartMeta | TurnValue, who: Authorship) -> None:
    """Put who wrote a message on its start metadata or value."""
    if "sender" in who:
        value["sender"] = who["sender"]
    if "subagentRunId" in who:
        value["subagentRunId"] = who["subagentRunId"]


def call_value(call: _Call, message_id: str, who: Authorship | None = None
               ) -> ToolCallValue | ComponentValue:
    """A call's stored value: its arguments as the model wrote them (`{}` when they were not
    a JSON object: such a call is answered with an error, never run)."""
    arguments = parsed_arguments(call.arguments)
    value: ToolCallValue | ComponentValue
    if call.kind == "component":
        assert call.component_id is not None
        value = {"type": "x-component", "messageId": message_id,
                 "componentId": call.component_id, "name": call.name,
                 "toolCallId": call.tool_call_id, "props": arguments}
    else:
        value = {"type": "tool_call", "messageId": message_id, "toolCallId": call.tool_call_id,
                 "name": call.name, "arguments": arguments}
    _sign(value, who or {})
    return value


def context_tools(components: list[Component], shown: set[str],
                  requested: list[ClientTool]) -> list[ClientTool]:
    """The `context_tools` of the components shown in the thread: client tools offered only
    while such a component is there (a name the request declares itself is not repeated)."""
    declared = {t.name for t in requested}
    return [t for c in components if c.name in shown for t in c.context_tools
            if t.name not in declared]


def exhausted_tools(run: RunInput) -> set[str]:
    """Client tools that reached their `maxCalls` on this thread: no longer offered or run;
    and client tools named after a server tool that asks first: such a client tool is the
    client's way of answering the approval (the Tambo client runs the tool it registered under
    the pending call's name), never a tool of its own."""
    return {t.name for t in run.client_tools
            if t.max_calls is not None and run.call_counts.get(t.name, 0) >= t.max_calls
            or (t.name in run.server_tools and run.server_tools[t.name].approval)}


def model_tools(run: RunInput) -> list[dict[str, Any]]:
    tools = []
    exhausted = exhausted_tools(run)
    for tool in run.client_tools:
        if tool.name in exhausted or tool.name in run.subagents:
            continue
        tools.append(_function(tool.name, tool.description, _labelled(run, tool.input_schema)))
    for spec in run.server_tools.values():
        if spec.name not in run.subagents:
            tools.append(_function(spec.name, spec.description,
                                   _labelled(run, spec.parameters)))
    for sub in run.subagents.values():
        tools.append(_function(sub.name, sub.description or f"Delegate a task to {sub.name}",
                               TASK_SCHEMA))
    for component in run.components:
        description = f"Show the {component.name} component to the user. {component.description}"
        tools.append(_function(COMPONENT_TOOL_PREFIX + component.name, description.strip(),
                               component.props_schema))
    return tools


TASK_SCHEMA = {"type": "object", "required": ["task"], "properties": {"task": {
    "type": "string", "description": "The task, with everything the agent needs to know to do "
                                     "it: it does not see this conversation"}}}


def _labelled(run: RunInput, schema: Any, required: bool = True) -> Any:
    """A tool's schema as the model gets it (`required=False`: as its arguments are checked):
    with Tambo's status messages on a Tambo run."""
    if not run.status_messages:
        return schema
    return status_messages.with_status_messages(schema, required)


def _function(name: str, description: str, schema: Any) -> dict[str, Any]:
    parameters = schema if isinstance(schema, dict) and schema else {"type": "object",
                                                                      "properties": {}}
    return {"type": "function",
            "function": {"name": name, "description": description or name,
                         "parameters": parameters}}


def model_tool_choice(run: RunInput) -> str | dict[str, Any] | None:
    if run.force_component:
        return {"type": "function",
                "function": {"name": COMPONENT_TOOL_PREFIX + run.force_component}}
    choice = run.tool_choice
    if isinstance(choice, dict) and "name" in choice:
        return {"type": "function", "function": {"name": choice["name"]}}
    return choice


@dataclass
class _Progress:
    """What one run of the loop has used and been through so far."""

    tool_choice: Any
    shown: set[str]
    output_tokens: int = 0
    invalid_reported: bool = False  # the model was told once of arguments it cut or broke
    context_retried: bool = False  # a context-length error was retried with a shorter history


# What the model is told when its answer was cut by its `max_tokens` and the operator asked
# for it to go on (`on_truncation="continue"`); sent, not stored in the thread.
CONTINUE = {"role": "user", "content": "Your answer was cut off by its length limit. Continue "
                                       "exactly where it stopped, without repeating anything."}


async def run_agent(model: Model, run: RunInput, sink: FrameSink) -> Outcome:
    """Drive the model until it answers, needs the client, or runs out of steps."""
    messages = list(run.history)
    components = {c.name for c in run.components}
    progress = _Progress(model_tool_choice(run), set(run.shown_components))
    requested = list(run.client_tools)
    for _ in range(run.max_steps):
        run.client_tools = requested + context_tools(run.components, progress.shown, requested)
        client_tools = {t.name for t in run.client_tools} - exhausted_tools(run)
        tools = model_tools(run)
        turn = Turn(sink, components, set(run.server_tools), client_tools, run.on_model,
                    set(run.subagents), run.authorship())
        sent = run.context.fitted(messages, tools).messages if run.context else messages
        request = ModelRequest(messages=sent, tools=tools, tool_choice=progress.tool_choice,
                               max_tokens=call_max_tokens(run, progress.output_tokens),
                               temperature=run.temperature, model=run.model,
                               reasoning=run.reasoning)
        if not await _streamed(model, run, request, turn, progress):
            continue  # refused as too long: once more, with a shorter history
        calls = turn.ordered_calls()
        for call in calls:
            run.call_counts[call.name] = run.call_counts.get(call.name, 0) + 1
        progress.shown |= {c.name for c in calls if c.kind == "component"}
        rejected = await _rejected_calls(run, turn, progress)
        pending = [_pending(run, c, turn.message_id) for c in calls
                   if c.tool_call_id not in rejected and (c.kind == "client"
                                                          or _asks_first(run, c))]
        ran_tools = bool(rejected) or any(
            c.kind in ("server", "subagent", "unknown") and not _asks_first(run, c)
            for c in calls)
        progress.output_tokens += await _run_tools(run, turn, sink, progress.output_tokens,
                                                   pending, rejected)
        # What the model sees of this turn from now on, as the thread's history shows it.
        messages.extend(turn_messages(turn.values))
        if pending:
            return Outcome(pending, turn.text, progress.output_tokens)
        cut = truncation(turn.finish)
        if cut == "length" and not calls and run.on_truncation == "continue":
            messages.append(dict(CONTINUE))
        elif not ran_tools:
            return Outcome(text=turn.text, output_tokens=progress.output_tokens,
                           truncated={"reason": cut, "messageId": turn.message_id}
                           if cut else None)
        if run.max_output_tokens is not None and progress.output_tokens >= run.max_output_tokens:
            raise ModelError("OUTPUT_TOKEN_LIMIT",
                             f"The run used its {run.max_output_tokens} output tokens before "
                             "the model answered", "server_error", False)
        if progress.tool_choice == "required" or isinstance(progress.tool_choice, dict):
            progress.tool_choice = "auto"  # a forced call is satisfied; forcing again loops
    raise ModelError("MAX_STEPS_EXCEEDED",
                     f"The run stopped after {run.max_steps} model calls without an answer",
                     "server_error", False)


async def _streamed(model: Model, run: RunInput, request: ModelRequest, turn: Turn,
                    progress: _Progress) -> bool:
    """Stream one call into `turn` and close its messages; False when the provider refused it
    as longer than its window before it said anything, and the run's budget was shrunk for
    one more try (`context_window.shrunk`)."""
    try:
        progress.output_tokens += await stream_turn(model, request, turn, run.hooks)
    except ModelError as error:
        said_nothing = not turn.started
        await turn.close(cancelled=True)
        if (error.code == "LLM_CONTEXT_WINDOW_EXCEEDED" and said_nothing
                and not progress.context_retried):
            progress.context_retried = True
            run.context = shrunk(run.context, run.model, request, error.window)
            log.warning("model %s refused %d messages as longer than its window%s; trying "
                        "once more with %d input tokens at most", run.model or "?",
                        len(request.messages),
                        f" ({error.window} tokens)" if error.window else "",
                        run.context.available)
            return False
        raise
    except asyncio.CancelledError:
        await turn.close(cancelled=True)
        raise
    await turn.close()
    return True


async def _rejected_calls(run: RunInput, turn: Turn, progress: _Progress) -> set[str]:
    """The turn's calls whose arguments cannot run (`tool_arguments`), each answered with an
    error result the model and the client see; the model is told once per run, a second
    time ends the run (`TOOL_ARGUMENTS_INVALID`). The ids of the calls rejected."""
    rejected: set[str] = set()
    for call in turn.ordered_calls():
        error = arguments_error(call.arguments, _schema_of(run, call), truncation(turn.finish))
        if error is None:
            continue
        log.warning("model %s called %s with arguments it cannot run: %s", run.model or "?",
                    call.name, error)
        if progress.invalid_reported:
            raise ModelError("TOOL_ARGUMENTS_INVALID",
                             f"The model called {call.name} with arguments that cannot run, "
                             f"again: {error}", "server_error", True)
        rejected.add(call.tool_call_id)
        told = f"{error}. Call {call.name} again with complete, valid arguments."
        await turn.write_value(new_id(), result_value(turn.message_id, call.tool_call_id,
                                                      call.name, error=told,
                                                      who=run.authorship()))
    progress.invalid_reported |= bool(rejected)
    return rejected


def _schema_of(run: RunInput, call: _Call) -> Any:
    """The JSON Schema `call`'s arguments must match (None: only JSON is checked)."""
    if call.kind == "component":
        return next((c.props_schema for c in run.components if c.name == call.name), None)
    if call.kind == "client":
        return next((_labelled(run, t.input_schema, False) for t in run.client_tools
                     if t.name == call.name), None)
    if call.kind == "subagent":
        return TASK_SCHEMA
    spec = run.server_tools.get(call.name)
    return _labelled(run, spec.parameters, False) if spec is not None else None


def _asks_first(run: RunInput, call: _Call) -> bool:
    spec = run.server_tools.get(call.name)
    if call.kind != "server" or spec is None or not spec.approval:
        return False
    if call.name in run.allowed_tools:
        return False
    rule = spec.approval_rule
    return rule is None or rule.asks(parsed_arguments(call.arguments))


def _pending(run: RunInput, call: _Call, message_id: str) -> PendingToolCall:
    """A call the run stops for: a client tool's, or one waiting for approval."""
    arguments = parsed_arguments(call.arguments)
    entry: PendingToolCall = {"toolCallId": call.tool_call_id, "toolName": call.name,
                             "arguments": json.dumps(arguments), "input": arguments}
    if call.kind == "server":
        entry["approval"] = approvals.request(call.name, message_id, run.approval_ttl)
        spec = run.server_tools.get(call.name)
        if spec is not None and spec.approval_rule is not None:
            entry["approval"]["rule"] = spec.approval_rule.text  # why this call asked
    return entry


def _question(run: RunInput, call_id: str, name: str, arguments: dict[str, Any],
              message_id: str, question: elicitation.InputRequired,
              answers: list[dict[str, Any]]) -> PendingToolCall:
    """A call paused by a question its tool asked (`answers`: those it was given so far)."""
    request = approvals.request(name, message_id, run.approval_ttl)
    request["reason"] = elicitation.REASON
    request["message"] = question.message[:2000]
    request["responseSchema"] = question.schema
    request["answers"] = answers
    return {"toolCallId": call_id, "toolName": name, "arguments": json.dumps(arguments),
            "input": arguments, "approval": request}


async def resolve_approvals(run: RunInput, answers: list[approvals.Answer],
                            sink: FrameSink,
                            on_edited: Callable[[approvals.Answer], None] | None = None
                            ) -> list[PendingToolCall]:
    """Before a resumed run's first model call: run each approved call (once: its answer was
    taken by this run alone, under the thread's lock) and answer the others with an error;
    call again each tool whose question was answered. Returns the calls that asked another
    question (the run pauses again at once).

    A call approved with edited arguments runs with them if the tool's schema takes them (else
    it gets an error result and does not run), and `on_edited` is told before it runs, to
    rewrite the stored call: the thread, and the model's history, read what really ran."""
    pending: list[PendingToolCall] = []
    for answer in answers:
        output, error = None, approvals.denial(answer)  # type: tuple[Any, str | None]
        arguments, edited = answer.arguments, answer.edited
        if answer.decision == "approved" and edited is not None:
            spec = run.server_tools.get(answer.name)
            problem = arguments_error(json.dumps(edited),
                                      spec.parameters if spec is not None else None)
            if problem is not None:
                answer = replace(answer, decision="denied")
                error = approvals.edit_refused(answer, problem)
            else:
                arguments = edited
                if on_edited is not None:
                    on_edited(answer)
        if answer.decision in ("approved", "answered"):
            try:
                output, error = await call_server_tool(run, answer.name, arguments,
                                                       answer.answers, answer.tool_call_id,
                                                       sink)
            except elicitation.InputRequired as question:
                pending.append(_question(run, answer.tool_call_id, answer.name,
                                         arguments, answer.message_id, question,
                                         list(answer.answers or [])))
                continue
        value = result_value(answer.message_id, answer.tool_call_id, answer.name, output, error,
                             who=run.authorship())
        await sink.emit(timbal.set_value(new_id(), value, now_ms()))
    return pending


async def _run_tools(run: RunInput, turn: Turn, sink: FrameSink, used: int,
                     pending: list[PendingToolCall], rejected: set[str]) -> int:
    """Run the turn's server tools and sub-agents, one after the other, each result written
    into the turn; the output tokens the sub-agents used. A tool that asks first is left for
    its approval; one that asked a question is added to `pending` (`engine/tools/elicitation.py`);
    a call `rejected` for its arguments is not run."""
    tokens = 0
    for call in turn.ordered_calls():
        if call.tool_call_id in rejected:
            continue
        if call.kind == "subagent":
            result, spent = await _run_subagent(run, call, turn.message_id, sink, used + tokens)
            tokens += spent
        elif call.kind in ("server", "unknown") and not _asks_first(run, call):
            try:
                result = await _run_server_tool(run, call, turn.message_id, sink)
            except elicitation.InputRequired as question:  # the user must answer first
                pending.append(_question(run, call.tool_call_id, call.name,
                                         parsed_arguments(call.arguments), turn.message_id,
                                         question, []))
                continue
        else:
            continue
        await turn.write_value(new_id(), result)
    return tokens


# A sub-agent's failure is its calling agent's tool error, except the run's own limits.
RUN_LEVEL_ERRORS = frozenset({"OUTPUT_TOKEN_LIMIT"})


async def _run_subagent(run: RunInput, call: _Call, message_id: str, sink: FrameSink,
                        used: int) -> tuple[ServerToolResultValue, int]:
    """The sub-agent's loop on the call's task, into the same sink; its answer as the call's
    result, and the output tokens it used (counted against the run's limit)."""
    tool = run.subagents[call.name]
    task = parsed_arguments(call.arguments).get("task")
    if not isinstance(task, str) or not task.strip():
        return _server_result(call, message_id, error=f"{tool.name} needs a `task` string",
                              sender=tool.name), 0
    invocation = new_id("sub_")
    started: SubagentStartedFrame = {"c": timbal.SUBAGENT_STARTED, "subagentRunId": invocation,
                                     "name": tool.name, "toolCallId": call.tool_call_id,
                                     "messageId": message_id}
    if tool.description:
        started["description"] = tool.description
    if run.subagent_run_id is not None:
        started["parentSubagentRunId"] = run.subagent_run_id
    await sink.emit(started)
    child = replace(tool.prepare(task, invocation), tool_timeout=run.tool_timeout,
                    status_budget=run.status_budget,
                    max_output_tokens=(None if run.max_output_tokens is None
                                       else max(1, run.max_output_tokens - used)))
    try:
        outcome = await run_agent(tool.model, child, sink)
    except ModelError as error:
        if error.code in RUN_LEVEL_ERRORS:
            raise
        failed: ErrorValue = {"type": "error", "content": error.message, "code": error.code,
                              "recoverable": True, "agentId": invocation, "sender": tool.name}
        await sink.emit(timbal.set_value(new_id(), failed, now_ms()))
        return _server_result(call, message_id, error=f"{tool.name} failed: {error.message}",
                              sender=tool.name), 0
    done: AgentCompleteValue = {"type": "agent_complete", "agentId": invocation,
                                "result": outcome.text, "sender": tool.name}
    await sink.emit(timbal.set_value(new_id(), done, now_ms()))
    return _server_result(call, message_id, outcome.text, sender=tool.name), outcome.output_tokens


async def stream_turn(model: Model, request: ModelRequest, turn: Turn, hooks: LoopHooks
                      ) -> int:
    """One model call streamed into `turn`, told to `hooks` as it goes; the output tokens it
    used. The deltas cross one generator, the adapter's: this loop is their only consumer.

    The call's outcome is the provider's (`stream_contract`): a stream that ended without a
    finish reason raises `LLM_STREAM_INCOMPLETE`; a complete call whose provider reported no
    usage is counted by the gateway (`estimated_usage`, with the server's tokenizer where it
    has one), and one cut off before its usage came (a cancel, a dropped stream, an error
    mid-answer) is estimated from what was sent and what streamed (`usage.estimate`). Both are
    marked estimated; nothing of it costs per chunk (the turn holds what streamed)."""
    call = hooks.model_call(request.model)
    output_tokens = 0
    error_code: str | None = None
    completed = reported = False
    try:
        # aclosing: a cancel that lands outside the stream (while a frame is saved) closes the
        # upstream now, before the partial answer is written, not when the generator is
        # collected.
        async with contextlib.aclosing(model.stream(request)) as deltas:
            async for delta in deltas:
                call.received(isinstance(delta, _CONTENT))
                if isinstance(delta, Usage):
                    reported = True
                    output_tokens += await _counted(call, hooks, delta)
                elif isinstance(delta, Served):
                    call.served(delta.model)
                await turn.feed(delta)
                call.handled()
        require_finish(turn.finish, request.model)
        if not reported:
            output_tokens += await _counted(call, hooks, await _estimated(model, request, turn))
            reported = True
        completed = True
    except ModelError as error:
        error_code = error.code
        raise
    finally:
        call.ended(error_code, completed)
        if not reported and turn.started:  # cut off: the gateway estimates it
            streamed = len(turn.output_text())
            await hooks.tokens_used(estimate(request_size(request), streamed))
    return output_tokens


async def _counted(call: Any, hooks: LoopHooks, usage: Usage) -> int:
    """Tell the hooks a call's usage (metrics, the run's record, its quota); its output."""
    call.usage(usage.input_tokens, usage.output_tokens)
    await hooks.tokens_used(usage)
    return usage.output_tokens


async def _estimated(model: Model, request: ModelRequest, turn: Turn) -> Usage:
    return await estimated_usage(model, request.model, request.messages, turn.output_text(),
                                 request.tools)


def request_size(request: ModelRequest) -> int:
    """Characters a model call sends (its messages' text and its tools), for an estimate."""
    size = 0
    for message in request.messages:
        content = message.get("content")
        size += len(content) if isinstance(content, str) else len(str(content or ""))
        size += len(str(message.get("tool_calls") or ""))
    return size + len(str(request.tools or ""))


_CONTENT = (TextDelta, ReasoningDelta, ToolCallDelta)


def call_max_tokens(run: RunInput, used: int) -> int | None:
    """A model call's `max_tokens`: the run's (the request's, capped by the agent's or
    `GATEWAY_MAX_TOKENS`: every run has one unless the operator turned the default off),
    never more than the run has left; the run's limit is enforced between calls from the
    usage the model reports, or the gateway counted."""
    if run.max_tokens is None or run.max_output_tokens is None:
        return run.max_tokens
    return max(1, min(run.max_tokens, run.max_output_tokens - used))


def _server_result(call: _Call, message_id: str, output: Any = None,
                   error: str | None = None, sender: str | None = None,
                   who: Authorship | None = None) -> ServerToolResultValue:
    """A tool's result; `sender` is its executor (the sub-agent that answered), else the
    calling agent's (`who`)."""
    return result_value(message_id, call.tool_call_id, call.name, output, error, sender, who)


def result_value(message_id: str, tool_call_id: str, name: str, output: Any = None,
                 error: str | None = None, sender: str | None = None,
                 who: Authorship | None = None) -> ServerToolResultValue:
    """A server tool's result (its output, or the error the model sees) as a Timbal value."""
    value: ServerToolResultValue = {"type": "tool_result", "messageId": message_id,
                                    "toolCallId": tool_call_id, "name": name,
                                    "status": "success" if error is None else "error"}
    _sign(value, who or {})
    if sender is not None:
        value["sender"] = sender
    if error is None:
        value["output"] = output
    else:
        value["error"] = error
    return value


async def _run_server_tool(run: RunInput, call: _Call, message_id: str, sink: FrameSink
                           ) -> ServerToolResultValue:
    output, error = await call_server_tool(run, call.name, parsed_arguments(call.arguments),
                                           tool_call_id=call.tool_call_id, sink=sink)
    # The gateway runs it on the calling agent's behalf.
    return _server_result(call, message_id, output, error, who=run.authorship())


async def call_server_tool(run: RunInput, name: str, arguments: dict[str, Any],
                           answers: list[dict[str, Any]] | None = None,
                           tool_call_id: str | None = None, sink: FrameSink | None = None
                           ) -> tuple[Any, str | None]:
    """Run one server tool: its output, or the error the model sees (then the output is
    None). `answers`: to the questions it asks (`engine/tools/elicitation.py`); one it asks without
    an answer raises `InputRequired`. `tool_call_id`: the model's call, which the tool's
    context names (`ToolContext.tool_call_id`, its idempotency key). `sink`: where the
    statuses it reports go (`engine/tools/status.py`); deleted again when it returns."""
    spec = run.server_tools.get(name)
    if spec is None:
        return None, f"Tool {name} is not available in this run"
    given = elicitation.Answers(list(answers or []))
    arguments = status_messages.without_status_messages(arguments)
    status = (tool_status.ToolStatus(sink, tool_call_id, run.authorship(), run.status_budget)
              if sink is not None and tool_call_id is not None else None)
    try:
        return await _call_with(spec, arguments, given, run.tool_timeout, tool_call_id,
                                status), None
    except elicitation.InputRequired:
        raise
    except TimeoutError:
        return None, f"Tool {name} timed out after {run.tool_timeout:g} s"
    except ToolError as exc:  # a failing tool is a result the model sees, not a crashed run
        return None, str(exc)[:2000]
    except Exception:
        incident = uuid.uuid4().hex[:12]
        log.exception("server tool %s failed (error %s)", name, incident)
        return None, f"Tool {name} failed (error {incident})"
    finally:
        if status is not None:
            await status.clear()


async def _call_with(spec: ServerToolSpec, arguments: dict[str, Any],
                     answers: elicitation.Answers, timeout: float,
                     tool_call_id: str | None = None,
                     status: tool_status.ToolStatus | None = None) -> Any:
    """The tool's call in a task of its own, bound to its answers and to its call's context;
    a question it asked and could not have answered pauses the run even if the tool swallowed
    the signal (an MCP server told `cancel` may answer with an error)."""
    async def call() -> Any:
        elicitation.bind(answers)
        tool_status.bind(status)
        if tool_call_id is not None:
            bind_tool_call(tool_call_id)
        return await spec.call(arguments)

    async with asyncio.timeout(timeout):
        try:
            output = await asyncio.create_task(call())
        except elicitation.InputRequired:
            raise
        except Exception:
            if answers.asked is not None:
                raise answers.asked from None
            raise
    if answers.asked is not None:
        raise answers.asked
    return output
