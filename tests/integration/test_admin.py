"""The operator API (`/v1/admin/...`) as an operator sees it, on the app in-process (SQLite, or
two apps on PostgreSQL + Redis): an admin key lists the threads and runs of every user with
filters and pages, shows a failed run's error and its log, and sums usage by key, user, agent
and day to what the runs consumed; no other credential gets in, and an admin key runs nothing.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gateway.cli.main import main
from tests.conftest import scripted_env
from tests.support import engines
from tests.support.inprocess_app import (
    InProcess,
    InProcessCluster,
    InProcessGateway,
    environment,
    root_log_kept,
)
from tests.support.run_stream import message
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import run_events

PROJECT = "shop"
USAGE = {"prompt_tokens": 100, "completion_tokens": 10}


def create_key(gateway: InProcess, *flags: str) -> tuple[str, str]:
    """(key, key id) of a new managed key of the project, made as an operator makes one."""
    out = io.StringIO()
    with environment(gateway.env), contextlib.redirect_stdout(out), root_log_kept():
        assert main(["keys", "create", "--project", PROJECT, *flags]) == 0
    lines = out.getvalue().strip().splitlines()
    return lines[-1], next(word for word in lines[0].split() if word.startswith("key_"))


@pytest.fixture(scope="module")
def gateway(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[InProcess]:
    workdir = tmp_path_factory.mktemp("admin")
    server = (InProcessCluster(workdir, scripted_env(scripted_model))
              if engines.ENGINES is not None
              else InProcessGateway(workdir, scripted_env(scripted_model)))
    create_key(server)  # a managed key before the first start: no development mode
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def keys(gateway: InProcess) -> dict[str, tuple[str, str]]:
    return {"admin": create_key(gateway, "--admin"), "client": create_key(gateway)}


@pytest.fixture(scope="module")
def admin(gateway: InProcess, keys: dict[str, tuple[str, str]]) -> Iterator[httpx.Client]:
    with gateway.client(timeout=30, headers={"x-api-key": keys["admin"][0]}) as http:
        yield http


@pytest.fixture(scope="module")
def runs(gateway: InProcess, keys: dict[str, tuple[str, str]],
         scripted_model: ScriptedModel) -> dict[str, Any]:
    """Two users' runs by the client key: alice two (one failed), bob one."""
    ids: dict[str, Any] = {}
    with gateway.client(timeout=30, headers={"x-api-key": keys["client"][0]}) as http:
        for name, user, turn in (("alice", "alice", [{"content": "hi"}, {"usage": USAGE}]),
                                 ("bob", "bob", [{"content": "yo"}, {"usage": USAGE}]),
                                 ("failed", "alice", [{"error": 400, "message": "refused"}])):
            scripted_model.enqueue(turn)
            events = run_events(http, "POST", "/v1/threads/runs",
                                headers={"x-api-key": keys["client"][0]},
                                json={"message": message(name), "thread": {"userKey": user}})
            ids[name] = (events[0].data["threadId"], events[0].data["runId"], events[-1])
    return ids


def test_an_admin_key_lists_the_threads_of_two_users(
        admin: httpx.Client, runs: dict[str, Any]) -> None:
    body = admin.get("/v1/admin/threads").json()
    users = {t["id"]: t["userKey"] for t in body["threads"]}
    assert users[runs["alice"][0]] == "alice" and users[runs["bob"][0]] == "bob"
    assert body["hasMore"] is False
    only_bob = admin.get("/v1/admin/threads", params={"userKey": "bob"}).json()["threads"]
    assert [t["id"] for t in only_bob] == [runs["bob"][0]]
    assert only_bob[0]["agent"] == "default" and only_bob[0]["status"] == "idle"


def test_no_other_credential_opens_the_operator_api_and_an_admin_key_runs_nothing(
        gateway: InProcess, keys: dict[str, tuple[str, str]], admin: httpx.Client) -> None:
    with gateway.client(timeout=30) as anonymous:
        refused = anonymous.get("/v1/admin/threads")
        assert (refused.status_code, refused.json()["code"]) == (401, "UNAUTHORIZED")
        assert refused.headers["content-type"] == "application/problem+json"
        for key in (keys["client"][0], "gwk_made-up"):
            answer = anonymous.get("/v1/admin/usage", headers={"x-api-key": key})
            assert answer.status_code in (401, 403)
            assert answer.json()["code"] == ("ADMIN_KEY_REQUIRED" if key == keys["client"][0]
                                             else "UNAUTHORIZED")
    # The admin key, on the client API: refused before anything runs.
    for method, url, extra in (("GET", "/v1/threads?userKey=alice", {}),
                               ("POST", "/v1/threads/runs",
                                {"json": {"message": message("x"),
                                          "thread": {"userKey": "alice"}}})):
        answer = admin.request(method, url, **extra)
        assert (answer.status_code, answer.json()["code"]) == (403, "ADMIN_KEY_NOT_ALLOWED")
    assert keys["admin"][0] not in admin.get("/v1/admin/usage", params={"by": "key"}).text


def test_runs_filter_by_status_user_and_agent_and_show_a_failed_runs_error_and_log(
        admin: httpx.Client, runs: dict[str, Any], keys: dict[str, tuple[str, str]]) -> None:
    thread_id, run_id, last = runs["failed"]
    assert last.type == "RUN_ERROR"
    failed = admin.get("/v1/admin/runs", params={"status": "failed"}).json()["runs"]
    assert [r["id"] for r in failed] == [run_id]
    assert failed[0]["error"]["code"] == last.data["code"]
    assert failed[0]["userKey"] == "alice" and failed[0]["threadId"] == thread_id
    alice = admin.get("/v1/admin/runs", params={"userKey": "alice"}).json()["runs"]
    assert {r["id"] for r in alice} == {runs["alice"][1], run_id}
    assert admin.get("/v1/admin/runs", params={"agent": "nobody"}).json()["runs"] == []
    done = admin.get(f"/v1/admin/runs/{runs['bob'][1]}").json()
    assert done["status"] == "completed" and done["apiKeyId"] == keys["client"][1]
    assert done["durationMs"] >= 0 and done["firstTokenMs"] >= 0
    assert done["usage"]["inputTokens"] == 100 and done["frames"] > 2

    frames, after = [], None
    while True:  # the log, two frames a page
        page = admin.get(f"/v1/admin/runs/{run_id}/frames",
                         params={"limit": 2, **({"after": after} if after else {})}).json()
        frames += page["frames"]
        if not page["hasMore"]:
            break
        after = page["nextAfter"]
    assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1))
    assert frames[-1]["frame"]["c"] == "error"
    missing = admin.get("/v1/admin/runs/run_nope")
    assert (missing.status_code, missing.json()["code"]) == (404, "RUN_NOT_FOUND")


def test_pages_of_runs_hold_every_run_once(admin: httpx.Client, runs: dict[str, Any]) -> None:
    seen, cursor = [], None
    while True:
        page = admin.get("/v1/admin/runs", params={"limit": 1, **(
            {"cursor": cursor} if cursor else {})}).json()
        seen += [r["id"] for r in page["runs"]]
        cursor = page.get("nextCursor")
        if not page["hasMore"]:
            break
    assert sorted(seen) == sorted(ids[1] for ids in runs.values())
    bad = admin.get("/v1/admin/runs", params={"cursor": "garbage"})
    assert (bad.status_code, bad.json()["code"]) == (400, "INVALID_CURSOR")
    wide = admin.get("/v1/admin/runs", params={"since": "2020-01-01T00:00:00Z"})
    assert (wide.status_code, wide.json()["code"]) == (400, "VALIDATION_ERROR")


def test_usage_by_key_user_agent_and_day_sums_the_runs_usage(
        admin: httpx.Client, runs: dict[str, Any], keys: dict[str, tuple[str, str]]) -> None:
    listed = admin.get("/v1/admin/runs").json()["runs"]
    per_user: dict[str, int] = {}
    for run in listed:
        if run["usage"] is not None:
            per_user[run["userKey"]] = per_user.get(run["userKey"], 0) + run["usage"][
                "inputTokens"]
    assert per_user == {"alice": 100, "bob": 100}

    def groups(by: str) -> dict[str | None, int]:
        report = admin.get("/v1/admin/usage", params={"by": by}).json()
        assert report["total"]["inputTokens"] == 200
        return {g["name"]: g["inputTokens"] for g in report["groups"]}

    assert groups("user") == per_user
    assert groups("key") == {keys["client"][1]: 200}
    assert groups("agent") == {"default": 200}
    [(day, tokens)] = groups("day").items()
    assert tokens == 200 and day == listed[0]["createdAt"][:10]
    unknown = admin.get("/v1/admin/usage", params={"by": "moon"})
    assert (unknown.status_code, unknown.json()["code"]) == (400, "VALIDATION_ERROR")


def test_the_console_page_is_served_with_the_playgrounds_policy(admin: httpx.Client) -> None:
    page = admin.get("/admin")
    assert page.status_code == 200 and "admin.js" in page.text
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert admin.get("/web/admin.js").status_code == 200
