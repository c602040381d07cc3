"""The neutral run input: what a dialect's request becomes, and the row a run keeps of it
(`to_row` / `from_row`): every field reads back equal, and the rows older versions wrote (the
first snake_case snapshot, and before `RunSpec` the Tambo request's camelCase keys) read the
same, so that runs begun before an upgrade go on after it."""

from __future__ import annotations

import dataclasses
import json

from gateway.dialects.tambo.input import keyed, run_spec
from gateway.protocol.run_spec import (
    ClientTool,
    Component,
    Idempotency,
    RunSpec,
    SeedMessage,
    ToolResult,
    UserInput,
)
from gateway.protocol.tambo import RunRequest

BODY = {
    "message": {"role": "user", "content": [{"type": "text", "text": "hi"}],
                "additionalContext": {"page": "checkout"}},
    "tools": [{"name": "get_time", "description": "The time.",
               "inputSchema": {"type": "object"}, "maxCalls": 2}],
    "availableComponents": [{"name": "Card", "propsSchema": {"type": "object"},
                             "stateSchema": {"type": "object"}}],
    "toolChoice": {"name": "get_time"}, "maxTokens": 100, "temperature": 0.5,
    "model": "openai/gpt-4o-mini", "runMetadata": {"source": "test"},
    "previousRunId": "run_1", "onDisconnect": "cancel",
}
# What the gateway kept on a run row for BODY before RunSpec (request_snapshot's old output).
OLD_SNAPSHOT = {
    "availableComponents": [{"name": "Card", "description": "",
                             "propsSchema": {"type": "object"},
                             "stateSchema": {"type": "object"}}],
    "tools": [{"name": "get_time", "description": "The time.",
               "inputSchema": {"type": "object"}, "maxCalls": 2}],
    "toolChoice": {"name": "get_time"}, "maxTokens": 100, "temperature": 0.5,
    "runMetadata": {"source": "test"}, "model": "openai/gpt-4o-mini",
    "fingerprint": "0" * 64,
}


def test_a_tambo_request_becomes_a_run_spec() -> None:
    spec = run_spec(RunRequest.model_validate(BODY))
    assert spec.user is not None and spec.user.text == "hi"
    assert spec.user.context == {"page": "checkout"}
    assert spec.client_tools == [ClientTool("get_time", "The time.", {"type": "object"},
                                            max_calls=2)]
    assert spec.components == [Component("Card", "", {"type": "object"}, {"type": "object"})]
    assert (spec.tool_choice, spec.max_tokens, spec.previous_run_id, spec.on_disconnect) == (
        {"name": "get_time"}, 100, "run_1", "cancel")
    assert spec.idempotency is None


# What the gateway kept on a run row for BODY in its first snake_case shape (only what the
# run's task read).
FIRST_SNAPSHOT = {
    "run_spec": 1,
    "client_tools": [{"name": "get_time", "description": "The time.",
                      "input_schema": {"type": "object"}, "max_calls": 2}],
    "components": [{"name": "Card", "description": "", "props_schema": {"type": "object"},
                    "state_schema": {"type": "object"}}],
    "tool_choice": {"name": "get_time"}, "max_tokens": 100, "temperature": 0.5,
    "model": "openai/gpt-4o-mini", "metadata": {"source": "test"},
    "fingerprint": "0" * 64,
}


def test_the_row_is_neutral_json_and_reads_back() -> None:
    spec = run_spec(RunRequest.model_validate(BODY))
    row = json.loads(json.dumps(spec.to_row()))
    assert "client_tools" in row and "tools" not in row
    assert row["client_tools"][0]["input_schema"] == {"type": "object"}
    assert not any(key[0].isupper() or any(c.isupper() for c in key) for key in row)
    assert RunSpec.from_row(row) == spec


def test_rows_written_by_older_versions_read_the_same() -> None:
    """What the run's task reads (its tools, components, limits, model, metadata) is the same
    from a row of the first snake_case shape and from one written before `RunSpec`."""
    spec = run_spec(RunRequest.model_validate(BODY))
    task_reads = dataclasses.replace(RunSpec(), **{
        name: getattr(spec, name) for name in TASK_READS})
    assert RunSpec.from_row(FIRST_SNAPSHOT) == task_reads
    assert RunSpec.from_row(OLD_SNAPSHOT) == task_reads
    assert RunSpec.from_row(None) == RunSpec.from_row({}) == RunSpec()
    agui = RunSpec.from_row({"runMetadata": {"agui": {"protocolVersion": "0.0.40"}}})
    assert agui.metadata == {"agui": {"protocolVersion": "0.0.40"}}


TASK_READS = ("client_tools", "components", "tool_choice", "force_component", "max_tokens",
              "temperature", "model", "agent", "metadata")


# A value unlike the default for every field of the spec and of the types it holds: a field
# added to one of them fails `test_every_field_of_the_spec_survives_its_row` until it is
# given a value here, and then until `to_row` and `from_row` keep it.
TOOL = ClientTool("get_time", "The time.", {"type": "object"}, {"type": "string"}, True, 2)
NESTED: dict[type, dict[str, object]] = {
    ClientTool: {"name": "t", "description": "d", "input_schema": {"type": "object"},
                 "output_schema": {"type": "string"}, "strict": True, "max_calls": 2},
    Component: {"name": "Card", "description": "A card.", "props_schema": {"type": "object"},
                "state_schema": {"type": "object"}, "context_tools": (TOOL,)},
    UserInput: {"blocks": [{"type": "text", "text": "hi"},
                           {"type": "resource", "resource": {"uri": "file:///a"}}],
                "context": {"page": "checkout"}, "metadata": {"sender": "ann"}, "id": "msg_1",
                "client_id": "m-1"},
    ToolResult: {"tool_call_id": "call_1", "blocks": [{"type": "text", "text": "12:00"}],
                 "is_error": True},
    SeedMessage: {"role": "user", "text": "Look", "blocks": [
        {"type": "text", "text": "Look"},
        {"type": "resource", "resource": {"mimeType": "image/png", "blob": "AA=="}}]},
    Idempotency: {"key": "key-1", "request": {"message": {"role": "user"}}},
}
EVERY_FIELD: dict[str, object] = {
    "user": UserInput(**NESTED[UserInput]),  # type: ignore[arg-type]
    "tool_results": [ToolResult(**NESTED[ToolResult])],  # type: ignore[arg-type]
    "context": {"page": "checkout"},
    "client_tools": [ClientTool(**NESTED[ClientTool])],  # type: ignore[arg-type]
    "components": [Component(**NESTED[Component])],  # type: ignore[arg-type]
    "tool_choice": {"name": "get_time"},
    "force_component": "Card",
    "max_tokens": 100,
    "temperature": 0.5,
    "model": "openai/gpt-4o-mini",
    "agent": "support",
    "previous_run_id": "run_1",
    "on_disconnect": "cancel",
    "metadata": {"source": "test"},
    "seed_messages": [SeedMessage(**NESTED[SeedMessage])],  # type: ignore[arg-type]
    "idempotency": Idempotency(**NESTED[Idempotency]),  # type: ignore[arg-type]
    "abandon_pending_tools": True,
    "multitask_strategy": "enqueue",
    "embed_resources": True,
    "state": {"language": "nb"},
    "status_messages": True,
    "webhook": "https://hooks.example.com/done",
}


def test_every_field_of_the_spec_survives_its_row() -> None:
    """`to_row` keeps, and `from_row` reads back, every field of `RunSpec` and of every type
    inside it: a field a new feature adds cannot go missing between a run's request and its
    task (a queued run, started later from its row, runs on what its row keeps)."""
    for kind, values in [(RunSpec, EVERY_FIELD), *NESTED.items()]:
        names = {f.name for f in dataclasses.fields(kind)}
        assert set(values) == names, f"give every field of {kind.__name__} a value here"
        for name, value in values.items():
            default = next(f for f in dataclasses.fields(kind) if f.name == name)
            assert value != (default.default if default.default is not dataclasses.MISSING
                             else default.default_factory()  # type: ignore[misc]
                             if default.default_factory is not dataclasses.MISSING else None)
    spec = RunSpec(**EVERY_FIELD)  # type: ignore[arg-type]
    row = json.loads(json.dumps(spec.to_row()))  # stored as JSON on the run row
    again = RunSpec.from_row(row)
    for name in EVERY_FIELD:
        assert getattr(again, name) == getattr(spec, name), f"RunSpec.{name} is not kept"
    assert again == spec


def test_an_idempotency_key_keeps_the_request_as_sent() -> None:
    request = RunRequest.model_validate(BODY)
    spec = keyed(run_spec(request), request, "key-1")
    assert spec.idempotency is not None and spec.idempotency.key == "key-1"
    assert spec.idempotency.request == request.model_dump(mode="json", exclude_none=True)


def test_an_agui_reconnect_reads_the_version_from_a_row_written_before_run_spec() -> None:
    from gateway.dialects.agui.input import GatewayRunInput
    from gateway.dialects.agui.input import run_spec as agui_spec
    from gateway.dialects.agui.routes import protocol_version
    from gateway.store.tables import RunRow

    def row(snapshot: dict[str, object]) -> RunRow:
        return RunRow(id="run_1", thread_id="thr_1", project_id="p", status="awaiting_input",
                      created_ms=0, request=snapshot)

    old = {"runMetadata": {"agui": {"forwardedProps": {}, "parentRunId": None,
                                    "protocolVersion": None}}}
    assert protocol_version(row(old)) is None  # a pre-1.0 client: still downgraded
    body = GatewayRunInput.model_validate({
        "threadId": "thr_1", "runId": "run_1", "state": {}, "context": [], "tools": [],
        "forwardedProps": {}, "messages": [{"id": "m1", "role": "user", "content": "hi"}]})
    assert protocol_version(row(dict(agui_spec(body, {}, None).to_row()))) is None
    assert protocol_version(row({})) == "1.0"  # a run a Tambo client began


def test_a_components_context_tools_survive_the_runs_snapshot() -> None:
    from gateway.protocol.run_spec import ClientTool, Component, RunSpec

    spec = RunSpec(components=[Component("Card", context_tools=(ClientTool("refresh",
                                                                             max_calls=2),))])
    row = json.loads(json.dumps(spec.to_row()))  # stored as JSON on the run row
    assert RunSpec.from_row(row).components == spec.components
