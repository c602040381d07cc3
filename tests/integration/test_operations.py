"""What an operator relies on, seen from outside a real gateway process: Prometheus metrics,
JSON logs with request and run ids, `/ready`, the CORS allow-list, the body size limit, and a
model that cannot be reached reported as such (to the client and, once, in the log)."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import scripted_env
from tests.support.fork_server import ForkedProcess, fork_server
from tests.support.gateway_server import USER, GatewayServer, free_port
from tests.support.run_stream import message, open_stream, read_until, slow_text, slow_turn, texts
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import run_events, text_of

# One process's metrics, log lines, CORS and body limit: the backend does not change them (test_ready.py checks /ready against PostgreSQL and Redis).
pytestmark = pytest.mark.sqlite_only

ALLOWED = "http://app.example"
BODY_LIMIT = 4096
SECRET = "sk-test-secret-key-1234"  # scripted_env's model API key


def http(server: GatewayServer, **headers: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, event_hooks=USER, timeout=30,
                        headers={"x-api-key": "test-key", **headers})


@pytest.fixture(scope="module")
def ops(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[GatewayServer]:
    server = GatewayServer(tmp_path_factory.mktemp("ops"), scripted_env(
        # With a key: development mode would refuse every origin but loopback ones.
        scripted_model, GATEWAY_API_KEYS="test-key", GATEWAY_LOG_FORMAT="json",
        GATEWAY_CORS_ORIGINS=ALLOWED,
        GATEWAY_MAX_BODY_BYTES=str(BODY_LIMIT)),
        args=("--log-level", "info"))  # uvicorn's start-up and access lines too
    server.start()
    yield server
    server.stop()


def scrape(client: httpx.Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of `/metrics` by name and labels."""
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(response.text)
            for s in family.samples}


def json_lines(server: GatewayServer) -> list[dict]:
    """The process's log: every line must be one JSON object."""
    return [json.loads(line) for line in server.log_path.read_text().splitlines() if line.strip()]


def test_metrics_count_a_run_its_tokens_and_time_to_first_token(
        ops: GatewayServer, scripted_model: ScriptedModel):
    scripted_model.enqueue(slow_turn(30, 0.05))
    with http(ops) as client:
        before = scrape(client)
        with open_stream(client, "POST", "/v1/threads/runs",
                         json={"message": message("count")}) as (_, events):
            seen = read_until(events, lambda seen: texts(seen) >= 5)
            during = scrape(client)
            seen += list(events)
        assert text_of(seen) == slow_text(30)
        after = scrape(client)

    assert during[("gateway_active_runs", ())] >= 1
    assert during[("gateway_active_subscribers", ())] >= 1
    assert during[("gateway_runs_started_total", ())] == before[("gateway_runs_started_total", ())] + 1
    ended = ("gateway_runs_ended_total", (("code", ""), ("status", "completed")))
    assert after[ended] == before.get(ended, 0) + 1
    assert after[("gateway_tokens_streamed_total", ())] >= before[
        ("gateway_tokens_streamed_total", ())] + 30
    ttft = ("gateway_time_to_first_token_seconds_count", ())
    assert after[ttft] == before[ttft] + 1
    assert after[("gateway_active_runs", ())] == 0
    # HTTP requests by route template and status, and the model's tokens (as it reported
    # them, not chunks) by agent and model.
    posted = ("gateway_http_requests_total", (("method", "POST"), ("route", "/v1/threads/runs"),
                                              ("status", "200")))
    # A request is counted once its response has gone out, which the client may see a moment
    # before the server's middleware gets to count it: scrape again until it is there.
    deadline = time.monotonic() + 10
    while after.get(posted, 0) <= before.get(posted, 0) and time.monotonic() < deadline:
        with http(ops) as client:
            after = scrape(client)
    assert after[posted] == before.get(posted, 0) + 1
    scraped = ("gateway_http_requests_total", (("method", "GET"), ("route", "/metrics"),
                                               ("status", "200")))
    assert after[scraped] >= 2

    def output_tokens(samples: dict) -> dict[str, float]:
        return {dict(labels)["model"]: value for (name, labels), value in samples.items()
                if name == "gateway_model_tokens_total" and dict(labels)["kind"] == "output"
                and dict(labels)["agent"] == "default"}
    assert sum(output_tokens(after).values()) > sum(output_tokens(before).values())
    # One model call: its tokens per second and the gateway's own time per token.
    for per_call in ("gateway_model_tokens_per_second", "gateway_added_latency_per_token_seconds"):
        assert after[(f"{per_call}_count", ())] == before.get((f"{per_call}_count", ()), 0) + 1
        assert after[(f"{per_call}_sum", ())] > before.get((f"{per_call}_sum", ()), 0)
    # Database latency, by store operation: the run's start (one transaction with its new
    # thread) was timed while it ran, its end after.
    started = ("gateway_database_operation_seconds_count",
               (("operation", "start_run_on_new_thread"),))
    finished = ("gateway_database_operation_seconds_count", (("operation", "finish_run"),))
    assert during[started] >= before.get(started, 0) + 1
    assert after[finished] >= before.get(finished, 0) + 1
    if "GATEWAY_REDIS_URL" in ops.env:  # the run's live tail went through Redis
        appended = ("gateway_redis_operation_seconds_count", (("operation", "append"),))
        assert after[appended] > before.get(appended, 0)


def test_json_logs_carry_the_request_id_and_the_run_id(
        ops: GatewayServer, scripted_model: ScriptedModel):
    scripted_model.enqueue([{"error": 500, "message": "upstream exploded"}])
    with http(ops, **{"X-Request-Id": "req-ops-42"}) as client:
        with open_stream(client, "POST", "/v1/threads/runs",
                         json={"message": message("fail")}) as (response, events):
            assert response.headers["x-request-id"] == "req-ops-42"
            seen = list(events)
        generated = client.get("/health", headers={"X-Request-Id": "bad id\twith spaces"})
    run_id = seen[0].data["runId"]
    assert [e.type for e in seen if e.type == "RUN_ERROR"] == ["RUN_ERROR"]
    assert seen[-1].data["code"] == "LLM_SERVER_ERROR"
    # An id that is not a plain token is replaced, not echoed.
    assert generated.headers["x-request-id"] != "bad id\twith spaces"
    assert len(generated.headers["x-request-id"]) == 32

    lines = json_lines(ops)
    failures = [line for line in lines if line.get("run_id") == run_id]
    assert len([f for f in failures if "model call failed" in f["message"]]) == 1
    failure = next(f for f in failures if "model call failed" in f["message"])
    assert failure["request_id"] == "req-ops-42"
    assert failure["level"] in ("WARNING", "ERROR")
    assert "LLM_SERVER_ERROR" in failure["message"] and "upstream exploded" in failure["message"]
    assert {"time", "logger"} <= set(failure)
    # The access line of the run request names its run; no line carries empty fields, ANSI
    # escapes or a library's sentinel objects.
    [access] = [line for line in lines if line["logger"] == "uvicorn.access"
                and "POST /v1/threads/runs" in line["message"] and line.get("run_id") == run_id]
    assert access["request_id"] == "req-ops-42"
    for line in lines:
        assert None not in line.values(), line
        assert "color_message" not in line and "\x1b" not in json.dumps(line), line
        assert "<object object" not in json.dumps(line), line


def test_ready_checks_the_database_and_health_stays_liveness(ops: GatewayServer):
    with http(ops) as client:
        ready = client.get("/ready")
        assert ready.status_code == 200
        checks = {"database": "ok", **({"redis": "ok"} if "GATEWAY_REDIS_URL" in ops.env else {})}
        assert ready.json() == {"status": "ready", "checks": checks}
        assert client.get("/health").json() == {"status": "ok"}


def test_cors_allow_list(ops: GatewayServer):
    with http(ops) as client:
        allowed = client.get("/health", headers={"Origin": ALLOWED})
        other = client.get("/health", headers={"Origin": "http://evil.example"})
        preflight = {"Access-Control-Request-Method": "POST",
                     "Access-Control-Request-Headers": "content-type,x-api-key"}
        allowed_pre = client.options("/v1/threads/runs", headers={"Origin": ALLOWED, **preflight})
        other_pre = client.options("/v1/threads/runs",
                                   headers={"Origin": "http://evil.example", **preflight})
    assert allowed.headers["access-control-allow-origin"] == ALLOWED
    assert "access-control-allow-origin" not in other.headers
    assert allowed_pre.status_code == 200
    assert allowed_pre.headers["access-control-allow-origin"] == ALLOWED
    assert other_pre.status_code == 400
    assert "access-control-allow-origin" not in other_pre.headers


def _assert_too_large(response: httpx.Response) -> None:
    assert response.status_code == 413
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == "PAYLOAD_TOO_LARGE"


def test_body_over_the_limit_by_content_length(ops: GatewayServer):
    body = json.dumps({"message": message("x" * BODY_LIMIT)})
    with http(ops) as client:
        threads_before = client.get("/v1/threads").json()
        _assert_too_large(client.post("/v1/threads/runs", content=body,
                                      headers={"content-type": "application/json"}))
        assert client.get("/v1/threads").json() == threads_before


def test_chunked_body_over_the_limit_is_refused_while_it_arrives(ops: GatewayServer):
    def chunks() -> Iterator[bytes]:
        yield b'{"message": {"role": "user", "content": [{"type": "text", "text": "'
        for _ in range(64):  # 64 KiB in all, far over the 4 KiB limit
            yield b"y" * 1024
        yield b'"}]}}'

    with http(ops) as client:
        response = client.post("/v1/threads/runs", content=chunks(),
                               headers={"content-type": "application/json"})
        _assert_too_large(response)
        assert "content-length" not in response.request.headers
        # A body under the limit still goes through.
        small = run_events(client, "POST", "/v1/threads/runs", json={"message": message("hi")})
        assert small[-1].type == "RUN_FINISHED"


def test_an_unreachable_model_is_llm_unreachable_and_logged_once(
        scripted_model: ScriptedModel, tmp_path: Path):
    port = free_port()  # nothing listens there
    env = scripted_env(scripted_model, GATEWAY_LOG_FORMAT="json",
                       GATEWAY_MODEL_API_BASE=f"http://127.0.0.1:{port}/v1")
    server = GatewayServer(tmp_path, env).start()
    try:
        with http(server) as client:
            events = run_events(client, "POST", "/v1/threads/runs",
                                json={"message": message("anyone there?")})
            metrics = scrape(client)
    finally:
        server.stop()
    errors = [e for e in events if e.type == "RUN_ERROR"]
    assert len(errors) == 1 and events[-1] is errors[0]
    assert errors[0].data["code"] == "LLM_UNREACHABLE"
    assert errors[0].data["isRetryable"] is True
    run_id = events[0].data["runId"]

    log = server.log_path.read_text()
    assert SECRET not in log
    failures = [line for line in json_lines(server) if "model call failed" in line["message"]]
    assert len(failures) == 1
    assert failures[0]["run_id"] == run_id
    assert f"127.0.0.1:{port}" in failures[0]["message"]
    assert "connection refused" in failures[0]["message"]
    assert metrics[("gateway_model_errors_total", (("code", "LLM_UNREACHABLE"),))] == 1


def test_logs_are_plain_text_in_a_terminal(tmp_path: Path):
    """`auto` (the default) writes text when stderr is a terminal: a person is reading it."""
    port = free_port()
    primary, secondary = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
    env["GATEWAY_DATABASE_URL"] = f"sqlite+aiosqlite:///{tmp_path / 'gateway.db'}"
    args = ["serve", "--host", "127.0.0.1", "--port", str(port)]
    forks = fork_server()  # forked as GatewayServer does: no second import of litellm
    process: subprocess.Popen[bytes] | ForkedProcess = (
        forks.spawn(args, env, tmp_path, Path(os.devnull), stderr=Path(os.ttyname(secondary)))
        if forks is not None and forks.can_fork(args, env) else
        subprocess.Popen([sys.executable, "-m", "gateway", *args], cwd=tmp_path, env=env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=secondary))
    output = b""
    try:
        deadline = time.monotonic() + 90
        while b"listening on" not in output and time.monotonic() < deadline:
            ready, _, _ = select.select([primary], [], [], 1)
            if ready:
                output += os.read(primary, 65536)
    finally:
        process.terminate()
        process.wait(timeout=30)
        os.close(secondary)
        os.close(primary)
    lines = [line for line in output.decode(errors="replace").splitlines() if line.strip()]
    listening = next(line for line in lines if "listening on" in line)
    assert f"INFO gateway: listening on http://127.0.0.1:{port}" in listening
    assert not any(line.lstrip().startswith("{") for line in lines)
