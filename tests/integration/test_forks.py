"""Forks over HTTP (`POST /v1/threads/{id}/fork`): the fork's history, origin and components,
the original untouched, regenerate and edit as a fork plus a run, and refused fork points."""

from __future__ import annotations

import httpx

from tests.integration.test_component_state import TABLE, render_table, state_url, stored
from tests.integration.test_pauses import paused_run
from tests.support.gateway_server import DEFAULT_USER
from tests.support.run_stream import message, started_ids
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import run_events


def texts(thread: dict) -> list[tuple[str, str]]:
    return [(m["role"], "".join(b.get("text", "") for b in m["content"] if b["type"] == "text"))
            for m in thread["messages"]]


def two_exchanges(client: httpx.Client, scripted_model: ScriptedModel) -> dict:
    scripted_model.enqueue([{"content": "One."}], [{"content": "Two."}])
    first = run_events(client, "POST", "/v1/threads/runs", json={
        "message": message("first"), "thread": {"userKey": DEFAULT_USER}})
    thread_id, run_id = started_ids(first)
    run_events(client, "POST", f"/v1/threads/{thread_id}/runs",
               json={"message": message("second"), "previousRunId": run_id})
    return client.get(f"/v1/threads/{thread_id}").json()


def fork(client: httpx.Client, thread_id: str, message_id: str) -> httpx.Response:
    return client.post(f"/v1/threads/{thread_id}/fork",
                       json={"messageId": message_id, "userKey": DEFAULT_USER})


def test_a_fork_has_the_history_up_to_the_message_and_runs_on_its_own(
        client: httpx.Client, scripted_model: ScriptedModel):
    original = two_exchanges(client, scripted_model)
    answer = original["messages"][1]

    response = fork(client, original["id"], answer["id"])

    assert response.status_code == 201, response.text
    forked = response.json()
    assert forked == client.get(f"/v1/threads/{forked['id']}",
                                params={"userKey": DEFAULT_USER}).json()
    assert forked["id"] != original["id"]
    assert forked["forkedFrom"] == {"threadId": original["id"], "messageId": answer["id"]}
    assert (forked["userKey"], forked["runStatus"]) == (DEFAULT_USER, "idle")
    assert "lastCompletedRunId" not in forked
    assert texts(forked) == [("user", "first"), ("assistant", "One.")]
    assert client.get(f"/v1/threads/{original['id']}").json() == original  # untouched

    # Edit: the second message with new text, on the fork; the model sees only the fork.
    scripted_model.enqueue([{"content": "Edited."}])
    events = run_events(client, "POST", f"/v1/threads/{forked['id']}/runs",
                        json={"message": message("second, edited")})
    assert events[-1].type == "RUN_FINISHED"
    sent = scripted_model.requests[-1]["messages"]
    assert [m["content"] for m in sent if m["role"] != "system"] == [
        "first", "One.", "second, edited"]
    assert texts(client.get(f"/v1/threads/{forked['id']}").json())[-1] == (
        "assistant", "Edited.")
    assert client.get(f"/v1/threads/{original['id']}").json() == original


def test_a_fork_copies_its_components_with_their_state_as_of_the_fork_point(
        client: httpx.Client, scripted_model: ScriptedModel):
    thread_id, component_id, run_id = render_table(client, scripted_model, TABLE)

    def set_page(page: int) -> None:
        assert client.post(state_url(thread_id, component_id), json={
            "state": {"page": page}, "userKey": DEFAULT_USER}).status_code == 200

    def next_exchange(text: str, previous: str) -> str:
        scripted_model.enqueue([{"content": f"Re: {text}."}])
        events = run_events(client, "POST", f"/v1/threads/{thread_id}/runs",
                            json={"message": message(text), "previousRunId": previous})
        assert events[-1].type == "RUN_FINISHED", events[-1]
        return started_ids(events)[1]

    # The table's state as of each answer: page 2 (set twice), then 4, then 5 and 6.
    set_page(1)
    set_page(2)
    run_id = next_exchange("next", run_id)
    set_page(3)
    set_page(4)
    next_exchange("and next", run_id)
    set_page(5)
    set_page(6)
    original = client.get(f"/v1/threads/{thread_id}").json()
    answers = [m["id"] for m in original["messages"] if m["role"] == "assistant"]

    copies = []
    for answer, page in zip(answers, (2, 4, 6), strict=True):
        forked = fork(client, thread_id, answer).json()
        (block,) = [b for m in forked["messages"] for b in m["content"]
                    if b["type"] == "component"]
        assert block["id"] != component_id
        assert (block["name"], block["props"], block["state"]) == (
            "Table", {"title": "Users"}, {"page": page}), answer
        assert stored(client, forked["id"], block["id"])[0] == {"page": page}
        copies.append((forked["id"], block["id"]))

    assert client.get(f"/v1/threads/{thread_id}").json() == original  # untouched
    assert stored(client, thread_id, component_id) == ({"page": 6}, 6)
    # A fork's component is its own: writing it changes neither the original nor a fork of it.
    first_fork, first_block = copies[0]
    assert client.post(state_url(first_fork, first_block), json={
        "state": {"page": 7}, "userKey": DEFAULT_USER}).status_code == 200
    assert stored(client, thread_id, component_id)[0] == {"page": 6}
    fork_of_fork = fork(client, first_fork, client.get(
        f"/v1/threads/{first_fork}").json()["messages"][-1]["id"]).json()
    (block,) = [b for b in fork_of_fork["messages"][-1]["content"] if b["type"] == "component"]
    assert block["state"] == {"page": 7}


def test_refused_fork_points(client: httpx.Client, scripted_model: ScriptedModel):
    thread_id, _ = paused_run(client, scripted_model)
    thread = client.get(f"/v1/threads/{thread_id}").json()
    call = thread["messages"][-1]  # the answer that called the client tool

    refused = fork(client, thread_id, call["id"])
    assert refused.status_code == 400
    assert (refused.json()["code"], refused.json()["unansweredToolCallIds"]) == (
        "INVALID_FORK_POINT", ["call_p1"])
    assert fork(client, thread_id, thread["messages"][0]["id"]).status_code == 201
    missing = fork(client, thread_id, "msg_nope")
    assert (missing.status_code, missing.json()["code"]) == (404, "MESSAGE_NOT_FOUND")
    other_user = client.post(f"/v1/threads/{thread_id}/fork",
                             json={"messageId": call["id"], "userKey": "someone-else"})
    assert other_user.status_code == 404
