"""OpenTelemetry traces: a span per run and, inside it, a span per model call.

Configured the way every OpenTelemetry SDK is, by the standard environment variables, read by
the SDK itself: tracing is on when `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or
`OTEL_EXPORTER_OTLP_ENDPOINT` is set (OTLP over HTTP/protobuf), with `OTEL_SERVICE_NAME`
(default `gateway`), `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_EXPORTER_OTLP_HEADERS`,
`OTEL_TRACES_SAMPLER` and the batch processor's `OTEL_BSP_*`; `OTEL_SDK_DISABLED=true` or
`OTEL_TRACES_EXPORTER=none` turn it off. Off, nothing is imported beyond the API and every
hook below is one `None` check: the per-token path never touches tracing.

The provider is this module's, not OpenTelemetry's global one: the gateway's spans go where
the operator said, whatever else in the process (litellm) does with the global provider.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from opentelemetry import trace

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

log = logging.getLogger(__name__)

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
SERVICE_NAME = "gateway"

_provider: TracerProvider | None = None
tracer: trace.Tracer | None = None


def wanted(environ: Mapping[str, str]) -> bool:
    """Whether the standard variables ask for traces."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return any(environ.get(name, "").strip() for name in ENDPOINT_VARIABLES)


def start(environ: Mapping[str, str] | None = None) -> bool:
    """Set up the exporter if the environment asks for it; True when traces are exported."""
    global _provider, tracer
    environ = os.environ if environ is None else environ
    if tracer is not None or not wanted(environ):
        return tracer is not None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    # Resource.create adds OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME over these.
    resource = Resource.create({"service.name": SERVICE_NAME}
                               if not environ.get("OTEL_SERVICE_NAME") else {})
    _provider = TracerProvider(resource=resource)
    _provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    tracer = _provider.get_tracer("gateway")
    log.info("exporting traces over OTLP/HTTP to %s",
             next(environ[name] for name in ENDPOINT_VARIABLES if environ.get(name)))
    return True


def stop() -> None:
    """Export what is left (at shutdown)."""
    global _provider, tracer
    if _provider is not None:
        _provider.shutdown()
    _provider = tracer = None


@contextlib.contextmanager
def run_span(run_id: str, thread_id: str, model: str | None) -> Iterator[None]:
    """The run's span, current for everything the run's task does (its model calls)."""
    if tracer is None:
        yield
        return
    attributes = {"gateway.run.id": run_id, "gateway.thread.id": thread_id,
                  "gen_ai.operation.name": "invoke_agent"}
    if model:
        attributes["gen_ai.request.model"] = model
    with tracer.start_as_current_span("gateway.run", kind=trace.SpanKind.INTERNAL,
                                      attributes=attributes, record_exception=False,
                                      set_status_on_exception=False):
        yield


def run_ended(status: str, code: str | None) -> None:
    """The run's outcome, on the current run span."""
    if tracer is None:
        return
    span = trace.get_current_span()
    span.set_attribute("gateway.run.status", status)
    if code:
        span.set_attribute("error.type", code)
    if status == "failed":
        span.set_status(trace.StatusCode.ERROR, code or status)


def model_span(model: str | None) -> trace.Span | None:
    """A model call's span, a child of the current run span (never made current: it lives in
    an async generator, which must not attach contexts across its yields). None when off."""
    if tracer is None:
        return None
    name = model or "model"
    return tracer.start_span(f"chat {name}", kind=trace.SpanKind.CLIENT, attributes={
        "gen_ai.operation.name": "chat", "gen_ai.request.model": name})


def model_ended(span: trace.Span, served: str | None, usage: tuple[int, int] | None,
                code: str | None) -> None:
    """Ends a model call's span; its served model and token usage go on the run span too
    (usage summed over the run's calls)."""
    run = trace.get_current_span()
    if served:
        span.set_attribute("gen_ai.response.model", served)
        run.set_attribute("gen_ai.response.model", served)
    if usage is not None:
        totals = getattr(run, "attributes", None) or {}
        for name, tokens in zip(("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"),
                                usage, strict=True):
            span.set_attribute(name, tokens)
            run.set_attribute(name, int(totals.get(name, 0)) + tokens)
    if code:
        span.set_attribute("error.type", code)
        span.set_status(trace.StatusCode.ERROR, code)
    span.end()
