"""The operator API that runs the gateway, as an operator uses it from the console (on the app
in-process: SQLite, or two apps on PostgreSQL + Redis): the project's keys (made with limits
and an agent, used, revoked), the threads waiting for a human (answered in place), a thread's
conversation, usage as CSV that `gateway usage --format csv` prints the same, prices for a model
without a public one, and a cut-off call's estimated usage. An admin key sees its own project
only; without one, nothing.
"""

from __future__ import annotations

import contextlib
import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.cli.main import main
from tests.conftest import scripted_env
from tests.support import engines
from tests.support.approval_tools import times_sent
from tests.support.inprocess_app import (
    InProcess,
    InProcessCluster,
    InProcessGateway,
    environment,
    root_log_kept,
)
from tests.support.run_stream import message, slow_turn, wait_for, wait_for_status
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import run_events

PROJECT, OTHER = "shop", "elsewhere"
USAGE = {"prompt_tokens": 100, "completion_tokens": 10}
TOOLS = Path(__file__).resolve().parents[1] / "support" / "approval_tools.py"
# The scripted model has no public price: the operator gives it one (USD per million tokens).
PRICES = {"openai/scripted": {"input": 2.0, "output": 8.0}}


def cli(gateway: InProcess, *args: str) -> str:
    out = io.StringIO()
    with environment(gateway.env), contextlib.redirect_stdout(out), root_log_kept():
        assert main(list(args)) == 0
    return out.getvalue()


def create_key(gateway: InProcess, project: str, *flags: str) -> str:
    return cli(gateway, "keys", "create", "--project", project, *flags).strip().splitlines()[-1]


@pytest.fixture(scope="module")
def gateway(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[InProcess]:
    workdir = tmp_path_factory.mktemp("admin-console")
    env = scripted_env(scripted_model, GATEWAY_TOOLS=str(TOOLS),
                       GATEWAY_MODEL_PRICES=json.dumps(PRICES), GATEWAY_KEY_CACHE_SECONDS="1")
    server = (InProcessCluster(workdir, env) if engines.ENGINES is not None
              else InProcessGateway(workdir, env))
    create_key(server, PROJECT)  # no development mode
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def keys(gateway: InProcess) -> dict[str, str]:
    return {"admin": create_key(gateway, PROJECT, "--admin"),
            "client": create_key(gateway, PROJECT),
            "other_admin": create_key(gateway, OTHER, "--admin")}


@pytest.fixture(scope="module")
def admin(gateway: InProcess, keys: dict[str, str]) -> Iterator[httpx.Client]:
    with gateway.client(timeout=30, headers={"x-api-key": keys["admin"]}) as http:
        yield http


def client_run(gateway: InProcess, key: str, scripted_model: ScriptedModel, user: str,
               *turns: list[dict[str, Any]]) -> tuple[str, str, list[str]]:
    """(thread, run, names of its CUSTOM events) of a run a client key starts for `user`."""
    scripted_model.enqueue(*turns)
    with gateway.client(timeout=30) as http:
        events = run_events(http, "POST", "/v1/threads/runs", headers={"x-api-key": key},
                            json={"message": message("hello"), "thread": {"userKey": user}})
    names = [e.data.get("name") for e in events if e.type == "CUSTOM"]
    return events[0].data["threadId"], events[0].data["runId"], names


def threads_status(gateway: InProcess, key: str) -> int:
    with gateway.client(timeout=30) as http:
        return http.get("/v1/threads", params={"userKey": "u"},
                        headers={"x-api-key": key}).status_code


def test_a_key_made_in_the_console_works_shows_its_use_and_is_revoked_to_401(
        gateway: InProcess, admin: httpx.Client) -> None:
    made = admin.post("/v1/admin/keys", json={
        "agent": "default", "maxConcurrentRuns": 1, "runsPerMinute": 30,
        "expiresAt": "2099-01-01T00:00:00Z"})
    assert made.status_code == 201, made.text
    body = made.json()
    key, key_id = body["key"], body["id"]
    assert key.startswith("gwk_") and body["prefix"] == key[:8] + "..."
    assert (body["kind"], body["agent"], body["state"]) == ("client", "default", "active")
    assert (body["maxConcurrentRuns"], body["runsPerMinute"], body["dailyTokens"]) == (1, 30,
                                                                                        None)
    assert body["expiresAt"].startswith("2099-01-01") and body["lastUsedAt"] is None

    assert threads_status(gateway, key) == 200

    def listed() -> dict[str, Any] | None:
        found = [k for k in admin.get("/v1/admin/keys").json()["keys"] if k["id"] == key_id]
        return found[0] if found and found[0]["lastUsedAt"] else None

    shown = wait_for(listed, timeout=10, what="the key's last use to be written down")
    assert "key" not in shown and key not in admin.get("/v1/admin/keys").text
    assert cli(gateway, "keys", "list", "--project", PROJECT).count(key_id) == 1

    revoked = admin.post(f"/v1/admin/keys/{key_id}/revoke")
    assert revoked.status_code == 200 and revoked.json()["state"] == "revoked"
    wait_for(lambda: threads_status(gateway, key) == 401, timeout=10,
             what="the revoked key to be refused")  # at once here; within 1 s on the others


def test_an_admin_key_can_make_another_admin_key_but_not_a_bound_one(
        admin: httpx.Client) -> None:
    other = admin.post("/v1/admin/keys", json={"admin": True})
    assert other.status_code == 201 and other.json()["kind"] == "admin"
    with httpx.Client(transport=admin._transport, base_url=admin.base_url,  # noqa: SLF001
                      headers={"x-api-key": other.json()["key"]}) as second:
        assert second.get("/v1/admin/keys").status_code == 200
    for body, code in (({"admin": True, "agent": "default"}, "VALIDATION_ERROR"),
                       ({"agent": "nobody"}, "AGENT_NOT_FOUND"),
                       ({"expiresAt": "2001-01-01"}, "VALIDATION_ERROR"),
                       ({"maxConcurrentRuns": -1}, "VALIDATION_ERROR")):
        refused = admin.post("/v1/admin/keys", json=body)
        assert refused.json()["code"] == code, (body, refused.text)


def test_nothing_of_one_project_reaches_another_projects_admin(
        gateway: InProcess, admin: httpx.Client, keys: dict[str, str],
        scripted_model: ScriptedModel) -> None:
    thread, run, _ = client_run(gateway, keys["client"], scripted_model, "ada",
                                [{"content": "hi"}, {"usage": USAGE}])
    mine = [k["id"] for k in admin.get("/v1/admin/keys").json()["keys"]]
    with gateway.client(timeout=30, headers={"x-api-key": keys["other_admin"]}) as other:
        theirs = other.get("/v1/admin/keys").json()["keys"]
        assert not {k["id"] for k in theirs} & set(mine)
        for key_id in mine[:2]:
            refused = other.post(f"/v1/admin/keys/{key_id}/revoke")
            assert (refused.status_code, refused.json()["code"]) == (404, "KEY_NOT_FOUND")
        for path, code in ((f"/v1/admin/threads/{thread}/messages", "THREAD_NOT_FOUND"),
                           (f"/v1/admin/runs/{run}", "RUN_NOT_FOUND")):
            answer = other.get(path)
            assert (answer.status_code, answer.json()["code"]) == (404, code)
        answered = other.post(f"/v1/admin/threads/{thread}/answers", json={
            "answers": [{"toolCallId": "call_x", "result": {"approved": True}}]})
        assert answered.json()["code"] == "THREAD_NOT_FOUND"
        for path in ("/v1/admin/waiting", "/v1/admin/threads", "/v1/admin/runs"):
            assert thread not in other.get(path).text and run not in other.get(path).text
        assert other.get("/v1/admin/usage", params={"by": "user"}).json()["groups"] == []


def test_nothing_of_the_operator_api_answers_without_an_admin_key(
        gateway: InProcess, keys: dict[str, str]) -> None:
    """Every route under /v1/admin/, each method: no key 401, a client key 403, before
    anything is read or done (the page itself, /admin, is public: it asks for the key)."""
    from gateway.api.admin import routes

    calls = [(method, route.path.replace("{thread_id}", "thr_x").replace("{run_id}", "run_x")
              .replace("{key_id}", "key_x"))
             for route in routes if route.path.startswith("/v1/admin/")
             for method in sorted(route.methods or ()) if method != "HEAD"]
    assert len(calls) >= 11
    with gateway.client(timeout=30) as http:
        for headers, status, code in (({}, 401, "UNAUTHORIZED"),
                                      ({"x-api-key": keys["client"]}, 403,
                                       "ADMIN_KEY_REQUIRED")):
            for method, path in calls:
                answer = http.request(method, path, headers=headers, json={})
                assert (answer.status_code, answer.json()["code"]) == (status, code), path


def test_a_paused_approval_is_listed_and_approved_from_the_console(
        gateway: InProcess, admin: httpx.Client, keys: dict[str, str],
        scripted_model: ScriptedModel) -> None:
    to = f"console-{time.monotonic_ns()}@example.com"
    call = {"tool_call": {"index": 0, "id": "call_mail", "name": "send_email",
                          "arguments": json.dumps({"to": to, "subject": "Invoice"})}}
    thread, run, custom = client_run(gateway, keys["client"], scripted_model, "grace", [call])
    assert "tambo.run.awaiting_input" in custom

    waiting = admin.get("/v1/admin/waiting").json()["threads"]
    [shown] = [t for t in waiting if t["id"] == thread]
    assert (shown["userKey"], shown["runId"], shown["agent"]) == ("grace", run, "default")
    [pending] = shown["calls"]
    assert (pending["toolCallId"], pending["toolName"], pending["kind"]) == (
        "call_mail", "send_email", "approval")
    assert "send_email" in pending["message"] and pending["expired"] is False
    assert pending["responseSchema"]["required"] == ["approved"]
    assert json.loads(pending["arguments"])["to"] == to

    scripted_model.enqueue([{"content": "Sent."}, {"usage": USAGE}])
    answered = admin.post(f"/v1/admin/threads/{thread}/answers", json={
        "answers": [{"toolCallId": "call_mail", "result": {"approved": True}}]})
    assert answered.status_code == 202, answered.text
    resumed = answered.json()["runId"]
    with gateway.client(timeout=30, headers={"x-api-key": keys["client"]},
                        params={"userKey": "grace"}) as http:
        wait_for_status(http, thread, resumed, "completed")
    assert times_sent(to) == 1
    assert thread not in admin.get("/v1/admin/waiting").text
    again = admin.post(f"/v1/admin/threads/{thread}/answers", json={
        "answers": [{"toolCallId": "call_mail", "result": {"approved": True}}]})
    assert (again.status_code, again.json()["code"]) == (409, "THREAD_NOT_WAITING")
    assert times_sent(to) == 1
    run_row = admin.get(f"/v1/admin/runs/{resumed}").json()
    assert run_row["apiKeyId"] is not None  # metered against the admin key

    conversation = admin.get(f"/v1/admin/threads/{thread}/messages").json()
    texts = [block.get("text") for m in conversation["messages"] for block in m["content"]]
    assert "hello" in texts and "Sent." in texts
    assert conversation["userKey"] == "grace" and conversation["hasMore"] is False


def test_a_denial_from_the_console_never_runs_the_tool(
        gateway: InProcess, admin: httpx.Client, keys: dict[str, str],
        scripted_model: ScriptedModel) -> None:
    to = f"denied-{time.monotonic_ns()}@example.com"
    call = {"tool_call": {"index": 0, "id": "call_no", "name": "send_email",
                          "arguments": json.dumps({"to": to, "subject": "Spam"})}}
    thread, _, _ = client_run(gateway, keys["client"], scripted_model, "grace", [call])
    scripted_model.enqueue([{"content": "Not sent."}])
    since = len(scripted_model.requests)
    answered = admin.post(f"/v1/admin/threads/{thread}/answers", json={"answers": [
        {"toolCallId": "call_no", "result": {"approved": False, "reason": "not today"}}]})
    assert answered.status_code == 202
    with gateway.client(timeout=30, headers={"x-api-key": keys["client"]},
                        params={"userKey": "grace"}) as http:
        wait_for_status(http, thread, answered.json()["runId"], "completed")
    assert times_sent(to) == 0
    sent = json.dumps([r for r in scripted_model.requests[since:] if r.get("stream")][0])
    assert "denied" in sent and "not today" in sent


def test_usage_csv_is_what_gateway_usage_prints_and_prices_come_from_the_setting(
        gateway: InProcess, admin: httpx.Client, keys: dict[str, str],
        scripted_model: ScriptedModel) -> None:
    client_run(gateway, keys["client"], scripted_model, "hopper",
               [{"content": "priced"}, {"usage": USAGE}])
    window = {"since": "2026-01-01T00:00:00Z", "until": "2099-01-01T00:00:00Z"}
    wide = admin.get("/v1/admin/usage", params={"by": "user", "format": "csv", **window})
    assert wide.json()["code"] == "VALIDATION_ERROR"  # more than 366 days
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 3600))
    until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
    for by in ("user", "day", "model"):
        csv = admin.get("/v1/admin/usage", params={"by": by, "format": "csv", "since": since,
                                                   "until": until})
        assert csv.headers["content-type"].startswith("text/csv")
        printed = cli(gateway, "usage", "--project", PROJECT, "--by", by, "--since", since,
                      "--until", until, "--format", "csv")
        assert csv.text == printed, by
    lines = csv.text.splitlines()
    assert lines[0] == "model,runs,calls,input,output,reasoning,cached,cost_usd,unpriced,estimated"
    [row] = [line.split(",") for line in lines[1:] if line.startswith("openai/scripted,")]
    report = admin.get("/v1/admin/usage", params={"by": "model", "since": since,
                                                  "until": until}).json()
    [group] = [g for g in report["groups"] if g["name"] == "openai/scripted"]
    assert group["unpriced"] == 0 and row[8] == "0"
    assert group["costUsd"] == pytest.approx((group["inputTokens"] * 2.0
                                              + group["outputTokens"] * 8.0) / 1e6)
    models = {m["model"]: m for m in admin.get("/v1/admin/models").json()["models"]}
    assert models["openai/scripted"]["source"] == "setting"
    assert (models["openai/scripted"]["inputPerMillion"],
            models["openai/scripted"]["outputPerMillion"]) == (2.0, 8.0)
    assert models["openai/scripted"]["configured"] is True


def test_a_cancelled_call_is_priced_from_an_estimate_and_says_so(
        gateway: InProcess, admin: httpx.Client, keys: dict[str, str],
        scripted_model: ScriptedModel) -> None:
    scripted_model.enqueue({"steps": slow_turn(400, 0.02), "stream": True})
    with gateway.client(timeout=30, headers={"x-api-key": keys["client"]},
                        params={"userKey": "turing"}) as http:
        started = http.post("/v1/threads", json={"userKey": "turing"}).json()["id"]
        with http.stream("POST", f"/v1/threads/{started}/runs",
                         json={"message": message("count slowly")},
                         headers={"accept": "text/event-stream"}) as stream:
            run_id = stream.headers["x-run-id"]
            for line in stream.iter_lines():
                if "t5 " in line:
                    break
            http.delete(f"/v1/threads/{started}/runs/{run_id}")
        wait_for_status(http, started, run_id, "cancelled")
        log = http.get(f"/v1/timbal/threads/{started}/runs/{run_id}").text
    run = wait_for(lambda: (r := admin.get(f"/v1/admin/runs/{run_id}").json())["usage"] and r,
                   timeout=10, what="the cancelled run's usage")
    usage = run["usage"]
    assert usage["estimatedCalls"] == 1 and usage["calls"] == 1
    assert usage["inputTokens"] > 0 and 0 < usage["outputTokens"] < 400
    assert usage["costUsd"] == pytest.approx((usage["inputTokens"] * 2.0
                                              + usage["outputTokens"] * 8.0) / 1e6)
    [terminal] = [json.loads(line) for line in log.splitlines() if '"run.cancelled"' in line]
    assert terminal["usage"][0]["estimatedCalls"] == 1


def test_development_mode_manages_no_keys(scripted_model: ScriptedModel,
                                          tmp_path_factory: pytest.TempPathFactory) -> None:
    """Without any key (development mode, loopback) the console reads, but no request without
    a key makes or lists keys: the first ones come from the command line."""
    server = InProcessGateway(tmp_path_factory.mktemp("admin-dev"), scripted_env(scripted_model))
    server.start()
    try:
        with server.client(timeout=30) as http:
            assert http.get("/v1/admin/threads").status_code == 200
            for method in ("GET", "POST"):
                refused = http.request(method, "/v1/admin/keys", json={})
                assert (refused.status_code, refused.json()["code"]) == (403,
                                                                         "ADMIN_KEY_REQUIRED")
                assert "keys create" in refused.json()["detail"]
    finally:
        server.stop()
