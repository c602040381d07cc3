"""OpenTelemetry traces from the gateway app (configured by the standard variables, read as it
starts) to an OTLP/HTTP receiver on loopback: the run's span and its model call's span, with the
run's ids, the model, the outcome and the token usage, the model call a child of the run,
decoded with the OTLP protobuf definitions."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.conftest import scripted_env
from tests.support.gateway_server import USER
from tests.support.inprocess_app import InProcessGateway
from tests.support.run_stream import message, started_ids, wait_for
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import run_events, text_of

# The spans' shape: what the backend stores does not reach them.
pytestmark = pytest.mark.sqlite_only


class OtlpReceiver:
    """The traces half of an OpenTelemetry collector: `POST /v1/traces` (protobuf), kept."""

    def __init__(self) -> None:
        self.spans: list[tuple[Any, Any]] = []  # (span, its resource)
        received = self.spans

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the http.server name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                export = ExportTraceServiceRequest.FromString(body)
                for resource_spans in export.resource_spans:
                    for scope in resource_spans.scope_spans:
                        received.extend((span, resource_spans.resource)
                                        for span in scope.spans)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def attributes(item: Any) -> dict[str, Any]:
    values = {}
    for attribute in item.attributes:
        kind = attribute.value.WhichOneof("value")
        values[attribute.key] = getattr(attribute.value, kind)
    return values


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver()
    yield receiver
    receiver.close()


def test_a_run_and_its_model_call_reach_the_collector(
        scripted_model: ScriptedModel, receiver: OtlpReceiver, tmp_path: Path):
    gateway = InProcessGateway(tmp_path, scripted_env(
        scripted_model, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url, OTEL_BSP_SCHEDULE_DELAY="200",
        OTEL_SERVICE_NAME="gateway-under-test")).start()
    scripted_model.enqueue({"steps": [{"content": "Traced "}, {"content": "answer."},
                                      {"usage": {"prompt_tokens": 11, "completion_tokens": 2}}],
                            "stream": True})
    try:
        with gateway.client(event_hooks=USER, timeout=30,
                            headers={"x-api-key": "test-key"}) as client:
            events = run_events(client, "POST", "/v1/threads/runs",
                                json={"message": message("trace me")})
        assert text_of(events) == "Traced answer."
        thread_id, run_id = started_ids(events)

        def run_span() -> Any:
            return next((span for span, _ in receiver.spans
                         if attributes(span).get("gateway.run.id") == run_id), None)

        run = wait_for(run_span, 30, what="the run's span at the collector")
        calls = wait_for(lambda: [span for span, _ in receiver.spans
                                  if span.parent_span_id == run.span_id], 30,
                         what="the model call's span")
    finally:
        gateway.stop()

    resource = next(resource for span, resource in receiver.spans if span is run)
    assert attributes(resource)["service.name"] == "gateway-under-test"
    assert run.name == "gateway.run"
    assert attributes(run) == {
        "gateway.run.id": run_id, "gateway.thread.id": thread_id,
        "gen_ai.operation.name": "invoke_agent", "gen_ai.request.model": "openai/scripted",
        "gateway.run.status": "completed",
        "gen_ai.usage.input_tokens": 11, "gen_ai.usage.output_tokens": 2}
    [call] = calls
    assert call.trace_id == run.trace_id
    assert call.name == "chat openai/scripted"
    assert attributes(call) == {
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "openai/scripted",
        "gen_ai.usage.input_tokens": 11, "gen_ai.usage.output_tokens": 2}
    assert run.start_time_unix_nano <= call.start_time_unix_nano
    assert call.end_time_unix_nano <= run.end_time_unix_nano


def test_a_failed_model_call_marks_both_spans(
        scripted_model: ScriptedModel, receiver: OtlpReceiver, tmp_path: Path):
    gateway = InProcessGateway(tmp_path, scripted_env(
        scripted_model, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=f"{receiver.url}/v1/traces",
        OTEL_BSP_SCHEDULE_DELAY="200")).start()
    scripted_model.enqueue({"steps": [{"error": 429, "message": "slow down"}], "stream": True})
    try:
        with gateway.client(event_hooks=USER, timeout=30,
                            headers={"x-api-key": "test-key"}) as client:
            events = run_events(client, "POST", "/v1/threads/runs",
                                json={"message": message("fail")})
        assert events[-1].type == "RUN_ERROR"
        _, run_id = started_ids(events)
        run = wait_for(lambda: next((span for span, _ in receiver.spans
                                     if attributes(span).get("gateway.run.id") == run_id), None),
                       30, what="the run's span")
        [call] = wait_for(lambda: [span for span, _ in receiver.spans
                                   if span.parent_span_id == run.span_id], 30,
                          what="the model call's span")
    finally:
        gateway.stop()
    for span in (run, call):
        assert attributes(span)["error.type"] == "LLM_RATE_LIMITED"
        assert span.status.code == span.status.STATUS_CODE_ERROR
    assert attributes(run)["gateway.run.status"] == "failed"
