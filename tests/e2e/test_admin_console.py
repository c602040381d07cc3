"""The operator console at `/admin`, in Chromium, against a real gateway with managed keys, at
1024 and 390 px: the page asks for an admin key (a client key does not open it), then runs
the gateway: a thread waiting for approval approved in place (the tool runs, once), a failed
run's error beside its conversation and stored log, a key made with limits that then works and
is revoked to 401, usage whose CSV export is what `gateway usage` prints for the same window,
a schedule and a delivered webhook on the Schedules tab, and the models' prices. Nothing wider than the window, no control off-screen. Screenshots go to
test-artifacts/admin/."""

from __future__ import annotations

import contextlib
import io
import json
import shlex
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.cli.main import main
from tests.conftest import artifacts_dir, scripted_env
from tests.support.approval_tools import times_sent
from tests.support.gateway_server import GatewayServer
from tests.support.inprocess_app import environment, root_log_kept
from tests.support.receiver import PostReceiver
from tests.support.run_stream import message, wait_for
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import run_events

from .harness import Browser, require_tools

pytestmark = pytest.mark.timeout(300)

TOOLS = Path(__file__).resolve().parents[1] / "support" / "approval_tools.py"
PRICES = {"openai/scripted": {"input": 2.0, "output": 8.0}}
USAGE = {"prompt_tokens": 100, "completion_tokens": 10}


def shown(result: dict[str, Any], origin: str, refused: bool = False) -> dict[str, Any]:
    """The page's text, once we know it made no request elsewhere, logged no error (but a
    refusal the step expects), and fits its window."""
    foreign = [r["url"] for r in result["requests"] if not r["url"].startswith(origin + "/")]
    assert not foreign, f"the console reached outside the gateway: {foreign}"
    errors = [e for e in result["errors"]
              if not (refused and ("status of 401" in e or "status of 403" in e))]
    assert not errors, f"browser errors: {errors}"
    layout = result["page"]["layout"]
    assert not layout["overflowX"], f"the page is wider than {layout['width']} px"
    assert not layout["offscreen"], f"controls outside the window: {layout['offscreen']}"
    return result["page"]


def cli(server: GatewayServer, *args: str) -> str:
    out = io.StringIO()
    with environment(server.env), contextlib.redirect_stdout(out), root_log_kept():
        assert main(list(args)) == 0
    return out.getvalue()


def create_key(server: GatewayServer, *flags: str) -> str:
    return cli(server, "keys", "create", "--project", "ops", *flags).strip().splitlines()[-1]


@pytest.fixture(scope="module")
def console_gateway(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
                    ) -> Iterator[tuple[GatewayServer, dict[str, str]]]:
    require_tools()
    server = GatewayServer(tmp_path_factory.mktemp("admin-gateway"), scripted_env(
        scripted_model, GATEWAY_TOOLS=str(TOOLS), GATEWAY_MODEL_PRICES=json.dumps(PRICES),
        GATEWAY_KEY_CACHE_SECONDS="1",
        GATEWAY_WEBHOOK_SECRET="whsec-console-0123456789-0123456789-abc",
        GATEWAY_WEBHOOK_ALLOWED_HOSTS="127.0.0.1"))
    keys = {"admin": create_key(server, "--admin"), "client": create_key(server)}
    try:
        server.start(timeout=240)  # a loaded CI machine starts a process slowly
        yield server, keys
    finally:
        server.stop()


def client_run(server: GatewayServer, key: str, user: str, scripted_model: ScriptedModel,
               *turns: list[dict[str, Any]]) -> tuple[str, str, Any]:
    scripted_model.enqueue(*turns)
    with httpx.Client(base_url=server.url, timeout=30) as http:
        events = run_events(http, "POST", "/v1/threads/runs", headers={"x-api-key": key},
                            json={"message": message(f"hi from {user}"),
                                  "thread": {"userKey": user}})
    return events[0].data["threadId"], events[0].data["runId"], events[-1]


def status_with(server: GatewayServer, key: str) -> int:
    return httpx.get(f"{server.url}/v1/threads", params={"userKey": "u"},
                     headers={"x-api-key": key}, timeout=30).status_code


@pytest.mark.parametrize("width", [1024, 390])
def test_an_operator_runs_the_gateway_from_the_console(
        console_gateway: tuple[GatewayServer, dict[str, str]], scripted_model: ScriptedModel,
        width: int) -> None:
    server, keys = console_gateway
    origin, shots = server.url, artifacts_dir() / "admin"
    shots.mkdir(parents=True, exist_ok=True)
    ada, grace = f"ada-{width}", f"grace-{width}"
    to = f"invoice-{width}-{time.monotonic_ns()}@example.com"
    mail = {"tool_call": {"index": 0, "id": f"call_{width}", "name": "send_email",
                          "arguments": json.dumps({"to": to, "subject": "Invoice"})}}
    paused, _, _ = client_run(server, keys["client"], ada, scripted_model, [mail])
    failed_thread, failed_run, failed = client_run(server, keys["client"], grace, scripted_model,
                                                   [{"error": 400, "message": "refused"}])
    assert failed.type == "RUN_ERROR"

    page = Browser(f"{origin}/admin", origin, shots / f"browser-{width}.log",
                   script="playground.mjs")
    try:
        def step(action: str, name: str | None = None, refused: bool = False,
                 **args: Any) -> dict[str, Any]:
            if name:
                args["screenshot"] = str(shots / f"{width}-{name}.png")
            return shown(page.step(action, **args), origin, refused)

        step("open", "1-sign-in", refused=True, url=f"{origin}/admin", ready="#sign-in",
             width=width, height=844 if width < 500 else 768)
        # A client key does not open the console.
        step("fill", selector="#admin-key", value=keys["client"])
        refused = step("click", refused=True, selector="#sign-in button[type=submit]",
                       until={"selector": "#error", "text": "ADMIN_KEY_REQUIRED"})
        assert "ada" not in refused["text"]
        step("fill", selector="#admin-key", value=keys["admin"])
        listed = step("click", "2-threads", selector="#sign-in button[type=submit]",
                      until={"selector": "#threads tbody", "text": [ada, grace]})
        assert keys["admin"] not in listed["text"]

        # Waiting: the paused approval, approved in place.
        waiting = step("click", "3-waiting", selector='#tabs button[data-tab="waiting"]',
                       until={"selector": "#waiting", "text": [to, "Approve"]})
        assert "approval" in waiting["text"].lower() and "send_email" in waiting["text"]
        scripted_model.enqueue([{"content": "Invoice sent."}, {"usage": USAGE}])
        step("click", "4-approved", selector=f'#waiting [data-id="{paused}"] button.approve',
             until={"selector": f'#waiting [data-id="{paused}"]', "text": "Answered"})
        wait_for(lambda: times_sent(to) == 1, timeout=30, what="the approved tool to run")

        # The failed run: its error, its conversation beside its stored log.
        step("click", selector='#tabs button[data-tab="threads"]',
             until={"selector": "#threads tbody", "text": grace})
        step("click", selector=f'#threads tr[data-id="{failed_thread}"]',
             until={"selector": "#runs tbody", "text": [failed_run, failed.data["code"]]})
        run_view = step("click", "5-failed-run", selector=f'#runs tr[data-id="{failed_run}"]',
                        until={"selector": "#run-view",
                               "text": [failed.data["code"], '"c":"error"', f"hi from {grace}"]})
        assert "Conversation" in run_view["text"] and "Stored log" in run_view["text"]

        # Keys: a client key with limits, which works; revoked, it is refused.
        step("click", selector='#tabs button[data-tab="keys"]',
             until={"selector": "#keys tbody tr", "count": 2})
        step("fill", selector='#key-form [name="maxConcurrentRuns"]', value="2")
        step("fill", selector='#key-form [name="dailyTokens"]', value="50000")
        step("select", selector='#key-form [name="agent"]', value="default")
        made = step("click", "6-key-made", selector="#key-form button[type=submit]",
                    until={"selector": "#new-key-value", "text": "gwk_"})
        new_key = next(w for w in made["text"].split() if w.startswith("gwk_") and len(w) > 30)
        assert status_with(server, new_key) == 200
        listing = httpx.get(f"{origin}/v1/admin/keys", headers={"x-api-key": keys["admin"]},
                            timeout=30).json()
        [row] = [k for k in listing["keys"] if new_key.startswith(k["prefix"][:-3])
                 and k["maxConcurrentRuns"] == 2 and k["state"] == "active"]
        assert (row["agent"], row["dailyTokens"]) == ("default", 50000)
        step("click", selector="#new-key-close")
        step("click", selector='#tabs button[data-tab="keys"]',
             until={"selector": f'#keys tr[data-id="{row["id"]}"]', "text": "2"})
        step("click", selector=f'#keys tr[data-id="{row["id"]}"] button.revoke',
             until={"selector": f'#keys tr[data-id="{row["id"]}"]', "text": "Really revoke?"})
        step("click", "7-key-revoked", selector=f'#keys tr[data-id="{row["id"]}"] button.revoke',
             until={"selector": f'#keys tr[data-id="{row["id"]}"]', "text": "revoked"})
        wait_for(lambda: status_with(server, new_key) == 401, timeout=10,
                 what="the revoked key to be refused")

        # Usage by user: the CSV export is what `gateway usage` prints for the page's window.
        step("click", selector='#tabs button[data-tab="usage"]',
             until={"selector": "#usage-command", "text": "--since"})
        step("select", selector='#usage-filters [name="by"]', value="user")
        usage = step("click", "8-usage", selector="#usage-filters button[type=submit]",
                     until={"selector": "#usage tbody", "text": ada})
        exported = step("click", selector="#usage-csv",
                        until={"selector": "#usage-saved", "text": "saved usage-by-user.csv"})
        command = shlex.split(next(line for line in usage["text"].splitlines()
                                   if "./scripts/gateway usage" in line).split("The same as ")[-1])
        assert command[:2] == ["./scripts/gateway", "usage"]
        printed = cli(server, *command[1:], "--format", "csv")
        assert exported["downloads"] and exported["downloads"][-1] == printed
        assert f"\n{ada}," in printed.replace("\r", "")

        # Schedules: a client's schedule, and a run's webhook delivered to a receiver (shown by
        # its host, never the URL's token).
        receiver = PostReceiver()
        try:
            with httpx.Client(base_url=origin, timeout=30,
                              headers={"x-api-key": keys["client"]}) as http:
                cron = http.post("/v1/crons", json={
                    "schedule": {"cron": "0 8 * * 1-5", "timezone": "Europe/Paris"},
                    "userKey": ada, "message": "digest"}).json()
                events = run_events(http, "POST", "/v1/threads/runs", headers={
                    "x-api-key": keys["client"]}, json={
                        "message": message("hooked"), "thread": {"userKey": ada},
                        "webhook": receiver.base + "/hook?token=s3cret"})
            hooked_run = events[0].data["runId"]

            def recorded() -> bool:  # the receiver answers before the outcome is stored
                listing = httpx.get(f"{origin}/v1/admin/webhooks", timeout=30,
                                    headers={"x-api-key": keys["admin"]}).json()
                return any(d["runId"] == hooked_run and d["state"] == "delivered"
                           for d in listing["deliveries"])
            wait_for(recorded, what="the webhook to be delivered")
            shown_tab = step("click", "9-schedules", selector='#tabs button[data-tab="automation"]',
                             until={"selector": "#automation-tab",
                                    "text": [cron["id"], "0 8 * * 1-5", hooked_run,
                                             "delivered"]})
            assert "s3cret" not in shown_tab["text"] and "127.0.0.1" in shown_tab["text"]
        finally:
            receiver.close()

        # Settings: the scripted model is priced from GATEWAY_MODEL_PRICES.
        models = step("click", "10-prices", selector='#tabs button[data-tab="settings"]',
                      until={"selector": "#models tbody", "text": "openai/scripted"})
        assert "GATEWAY_MODEL_PRICES" in models["text"] and "$2" in models["text"]
    finally:
        page.close()
