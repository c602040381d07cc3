"""The operator console at `/admin`, in Chromium, against a real gateway with managed keys: the
page asks for an admin key, then shows two users' threads, and a failed run's error and stored
log. Screenshots go to test-artifacts/admin/."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gateway.cli.main import main
from tests.conftest import artifacts_dir, scripted_env
from tests.support.gateway_server import GatewayServer
from tests.support.inprocess_app import environment
from tests.support.run_stream import message
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import run_events

from .harness import Browser, require_tools

pytestmark = pytest.mark.timeout(300)


def shown(result: dict[str, Any], origin: str) -> dict[str, Any]:
    """The page's text, once we know it made no request elsewhere and logged no error but the
    refused first call (no key yet)."""
    foreign = [r["url"] for r in result["requests"] if not r["url"].startswith(origin + "/")]
    assert not foreign, f"the console reached outside the gateway: {foreign}"
    errors = [e for e in result["errors"] if "status of 401" not in e]
    assert not errors, f"browser errors: {errors}"
    return result["page"]


def create_key(server: GatewayServer, *flags: str) -> str:
    out = io.StringIO()
    with environment(server.env), contextlib.redirect_stdout(out):
        assert main(["keys", "create", "--project", "ops", *flags]) == 0
    return out.getvalue().strip().splitlines()[-1]


@pytest.fixture(scope="module")
def console_gateway(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
                    ) -> Iterator[tuple[GatewayServer, dict[str, str]]]:
    require_tools()
    server = GatewayServer(tmp_path_factory.mktemp("admin-gateway"), scripted_env(scripted_model))
    keys = {"admin": create_key(server, "--admin"), "client": create_key(server)}
    try:
        server.start(timeout=240)  # a loaded CI machine starts a process slowly
        yield server, keys
    finally:
        server.stop()


def test_an_operator_signs_in_and_sees_two_users_threads_and_a_failed_runs_error(
        console_gateway: tuple[GatewayServer, dict[str, str]],
        scripted_model: ScriptedModel) -> None:
    server, keys = console_gateway
    origin, shots = server.url, artifacts_dir() / "admin"
    shots.mkdir(parents=True, exist_ok=True)
    ids = {}
    with httpx.Client(base_url=origin, timeout=30) as http:
        for user, turn in (("ada", [{"content": "hello"}]),
                           ("grace", [{"error": 400, "message": "refused"}])):
            scripted_model.enqueue(turn)
            events = run_events(http, "POST", "/v1/threads/runs",
                                headers={"x-api-key": keys["client"]},
                                json={"message": message("hi"), "thread": {"userKey": user}})
            ids[user] = (events[0].data["threadId"], events[0].data["runId"], events[-1])
    thread_id, run_id, failed = ids["grace"]
    assert failed.type == "RUN_ERROR"
    code = failed.data["code"]

    page = Browser(f"{origin}/admin", origin, shots / "browser.log", script="playground.mjs")
    try:
        def step(action: str, name: str | None = None, **args: Any) -> dict[str, Any]:
            if name:
                args["screenshot"] = str(shots / f"{name}.png")
            return shown(page.step(action, **args), origin)

        step("open", "1-sign-in", url=f"{origin}/admin", ready="#sign-in")
        step("fill", selector="#admin-key", value=keys["admin"])
        listed = step("click", "2-threads", selector="#sign-in button[type=submit]",
                      until={"selector": "#threads tbody", "text": ["ada", "grace"]})
        assert thread_id in listed["text"] and ids["ada"][0] in listed["text"]
        step("click", selector=f'#threads tr[data-id="{thread_id}"]',
             until={"selector": "#runs tbody", "text": [run_id, code]})
        shown_run = step("click", "3-failed-run", selector=f'#runs tr[data-id="{run_id}"]',
                         until={"selector": "#run-view", "text": [code, '"c":"error"']})
        assert "grace" in shown_run["text"] and '"c":"error"' in shown_run["text"]
        assert keys["admin"] not in shown_run["text"]
    finally:
        page.close()
