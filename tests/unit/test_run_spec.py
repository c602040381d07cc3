"""The neutral run input: what a dialect's request becomes, and the snapshot a run keeps of it,
including the snapshots the gateway wrote before `RunSpec` (the Tambo request's camelCase
keys), which must read the same so that runs begun before an upgrade go on after it."""

from __future__ import annotations

import json

from gateway.dialects.tambo.input import keyed, run_spec
from gateway.protocol.run_spec import ClientTool, Component, RunSpec
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


def test_the_snapshot_is_neutral_json_and_reads_back() -> None:
    spec = run_spec(RunRequest.model_validate(BODY))
    snapshot = json.loads(json.dumps(spec.snapshot()))
    assert "client_tools" in snapshot and "tools" not in snapshot
    assert snapshot["client_tools"][0]["input_schema"] == {"type": "object"}
    assert not any(key[0].isupper() or any(c.isupper() for c in key) for key in snapshot)
    again = RunSpec.from_snapshot(snapshot)
    assert again.client_tools == spec.client_tools and again.components == spec.components
    assert (again.tool_choice, again.max_tokens, again.temperature, again.model,
            again.metadata) == (spec.tool_choice, 100, 0.5, spec.model, {"source": "test"})


def test_a_snapshot_written_before_run_spec_reads_the_same() -> None:
    new = RunSpec.from_snapshot(run_spec(RunRequest.model_validate(BODY)).snapshot())
    assert RunSpec.from_snapshot(OLD_SNAPSHOT) == new
    assert RunSpec.from_snapshot(None) == RunSpec.from_snapshot({}) == RunSpec()
    agui = RunSpec.from_snapshot({"runMetadata": {"agui": {"protocolVersion": "0.0.40"}}})
    assert agui.metadata == {"agui": {"protocolVersion": "0.0.40"}}


def test_an_idempotency_key_keeps_the_request_as_sent() -> None:
    request = RunRequest.model_validate(BODY)
    spec = keyed(run_spec(request), request, "key-1")
    assert spec.idempotency is not None and spec.idempotency.key == "key-1"
    assert spec.idempotency.request == request.model_dump(mode="json", exclude_none=True)
    assert "idempotency" not in spec.snapshot()


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
    assert protocol_version(row(agui_spec(body, set(), None).snapshot())) is None
    assert protocol_version(row({})) == "1.0"  # a run a Tambo client began


def test_a_components_context_tools_survive_the_runs_snapshot() -> None:
    from gateway.protocol.run_spec import ClientTool, Component, RunSpec

    spec = RunSpec(components=[Component("Card", context_tools=(ClientTool("refresh",
                                                                             max_calls=2),))])
    snapshot = json.loads(json.dumps(spec.snapshot()))  # stored as JSON on the run row
    assert RunSpec.from_snapshot(snapshot).components == spec.components
