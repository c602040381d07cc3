"""Bad input before a stream starts: problem+json with a stable code, and nothing changes."""

from __future__ import annotations

import base64
import json

import httpx
import pytest

PROBLEM_FIELDS = {"type", "title", "status", "detail", "code"}


def assert_problem(response: httpx.Response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert PROBLEM_FIELDS <= body.keys()
    assert body["status"] == status and body["code"] == code
    assert "Traceback" not in response.text
    return body


@pytest.mark.parametrize("body", [
    {},
    {"message": {"role": "user", "content": []}},
    {"message": {"role": "assistant", "content": "hi"}},
    {"message": {"role": "user", "content": [{"type": "video", "url": "x"}]}},
    {"message": {"role": "user", "content": "hi"}, "temperature": 7},
    {"message": {"role": "user", "content": "hi"}, "tools": [{"description": "no name"}]},
    [1, 2, 3],
])
def test_invalid_run_bodies_get_validation_error(client: httpx.Client, body):
    before = client.get("/v1/threads", params={"limit": 100}).json()["threads"]
    response = client.post("/v1/threads/runs", json=body)
    assert_problem(response, 400, "VALIDATION_ERROR")
    after = client.get("/v1/threads", params={"limit": 100}).json()["threads"]
    assert len(after) == len(before)


@pytest.mark.parametrize("body", [
    {"message": {"role": "user", "content": [
        {"type": "tool_result", "toolUseId": "call_nowhere", "content": "x"}]}},
    {"message": {"role": "user", "content": "hi"}, "previousRunId": "run_unknown"},
])
def test_refused_new_thread_run_leaves_no_thread(client: httpx.Client, body):
    before = client.get("/v1/threads", params={"limit": 100}).json()["threads"]
    response = client.post("/v1/threads/runs", json=body)
    assert response.status_code == 400
    assert response.json()["code"] in ("INVALID_TOOL_RESULT", "INVALID_PREVIOUS_RUN")
    after = client.get("/v1/threads", params={"limit": 100}).json()["threads"]
    assert [t["id"] for t in after] == [t["id"] for t in before]


@pytest.mark.sqlite_only  # refused before any store access
def test_malformed_json_gets_invalid_json(client: httpx.Client):
    response = client.post("/v1/threads/runs", content=b'{"message": ',
                           headers={"content-type": "application/json"})
    assert_problem(response, 400, "INVALID_JSON")


def test_unknown_thread_is_404(client: httpx.Client):
    assert_problem(client.get("/v1/threads/thr_nope"), 404, "THREAD_NOT_FOUND")
    response = client.post("/v1/threads/thr_nope/runs",
                           json={"message": {"role": "user", "content": "hi"}})
    assert_problem(response, 404, "THREAD_NOT_FOUND")


def test_a_not_found_answer_repeats_a_bounded_part_of_the_id(client: httpx.Client):
    """A 404 names the id it did not find, but never more than 100 characters of it: a path can
    carry kilobytes, and an error body never carries unbounded client input."""
    long_id = "x" * 5000
    shown = "x" * 100 + "..."
    thread = client.post("/v1/threads", json={}).json()["id"]
    answers = {
        "threadId": client.get(f"/v1/threads/{long_id}"),
        "runId": client.get(f"/v1/threads/{thread}/runs/{long_id}"),
        "messageId": client.get(f"/v1/threads/{thread}/messages/{long_id}"),
        "agent": client.post(f"/v1/agui/agents/{long_id}/run", json={}),
    }
    for field, response in answers.items():
        assert response.status_code == 404, response.text[:300]
        body = response.json()
        assert body[field] == shown
        assert shown in body["detail"] and long_id not in response.text
        assert len(response.text) < 1000
    timbal = client.post(f"/v1/timbal/threads/{long_id}/cancel")  # Timbal's error format
    assert timbal.status_code == 404 and long_id not in timbal.text
    assert len(timbal.text) < 1000


@pytest.mark.sqlite_only  # refused before any store access
def test_unknown_route_and_method(client: httpx.Client):
    assert_problem(client.get("/v1/nothing-here"), 404, "NOT_FOUND")
    assert_problem(client.put("/v1/threads"), 405, "METHOD_NOT_ALLOWED")


@pytest.mark.sqlite_only  # refused before any store access
def test_bad_pagination_parameters(client: httpx.Client):
    assert_problem(client.get("/v1/threads", params={"cursor": "%%%"}), 400, "INVALID_CURSOR")
    too_big = base64.urlsafe_b64encode(json.dumps([10 ** 30, "thr_1"]).encode()).decode()
    assert_problem(client.get("/v1/threads", params={"cursor": too_big}), 400, "INVALID_CURSOR")
    assert_problem(client.get("/v1/threads", params={"limit": "0"}), 400, "VALIDATION_ERROR")
    assert_problem(client.get("/v1/threads", params={"limit": "x"}), 400, "VALIDATION_ERROR")


@pytest.mark.sqlite_only  # refused before any store access
def test_empty_user_key_is_refused(client: httpx.Client):
    assert_problem(client.get("/v1/threads", params={"userKey": "  "}), 400, "VALIDATION_ERROR")


def test_a_nul_character_is_never_a_database_outage(client: httpx.Client):
    """PostgreSQL cannot store a NUL in text: a key, id or name holding one was answered 503
    DATABASE_UNAVAILABLE (retryable, as if the database were down). It is the request's fault:
    400 there (NUL_CHARACTER where the request's own scan sees it first, VALIDATION_ERROR where
    PostgreSQL refuses it); SQLite stores it (a NUL id names no thread: 404)."""
    thread = client.post("/v1/threads", json={}).json()["id"]
    answers = [client.get("/v1/threads/thr%00x"),
               client.get("/v1/threads", params={"userKey": "a\x00b"}),
               client.post("/v1/threads", json={"contextKey": "c\x00"}),
               client.patch(f"/v1/threads/{thread}", json={"name": "n\x00"})]
    for response in answers:
        assert response.status_code in (200, 201, 400, 404), response.text
        if response.status_code >= 400:
            assert response.json()["code"] in ("NUL_CHARACTER", "VALIDATION_ERROR",
                                               "THREAD_NOT_FOUND")
