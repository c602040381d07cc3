"""Edit and regenerate on the AG-UI endpoint (issue 44): a client that re-sends a history which
leaves the thread's gets a branch, which its `threadId` then names; the model sees only that
branch, and the old one stays under the gateway's id (docs/agui.md, "Edit and regenerate")."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from tests.integration.test_agui import RUN, agui_input, connect_events
from tests.support.run_stream import gateway_ids
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import run_events, text_of


def user(text: str, message_id: str | None = None) -> dict[str, Any]:
    return {"id": message_id or f"m-{uuid.uuid4()}", "role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"id": f"a-{uuid.uuid4()}", "role": "assistant", "content": text}


def run(client: httpx.Client, thread_id: str, messages: list[dict[str, Any]], **extra: Any
        ) -> tuple[dict[str, Any], str]:
    body = {**agui_input(thread_id), "messages": messages, **extra}
    return body, text_of(run_events(client, "POST", RUN, json=body))


def snapshot_messages(client: httpx.Client, thread_id: str) -> list[tuple[str, str]]:
    events = connect_events(client, agui_input(thread_id))
    return [(m["role"], m.get("content")) for m in events[1].data["messages"]]


def sent_to_model(model: ScriptedModel) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in model.requests[-1]["messages"]]


def test_regenerating_the_first_answer_leaves_one_question_and_one_answer(
        client: httpx.Client, scripted_model: ScriptedModel):
    scripted_model.enqueue([{"content": "First answer."}], [{"content": "Second answer."}])
    thread_id, look = f"t-{uuid.uuid4()}", user("look")
    first, _ = run(client, thread_id, [look])
    old_thread = gateway_ids(client, first)[0]
    run(client, thread_id, [look])  # regenerate: the same history, ending at its message

    assert sent_to_model(scripted_model) == [("user", "look")]
    assert snapshot_messages(client, thread_id) == [("user", "look"),
                                                    ("assistant", "Second answer.")]
    # The old branch is kept, under the gateway's id.
    old = client.get(f"/v1/threads/{old_thread}/messages").json()["messages"]
    assert [m["content"][0].get("text") for m in old] == ["look", "First answer."]


def test_editing_an_earlier_message_branches_before_it(
        client: httpx.Client, scripted_model: ScriptedModel):
    scripted_model.enqueue([{"content": "A."}], [{"content": "B."}], [{"content": "C."}])
    thread_id, first = f"t-{uuid.uuid4()}", user("one")
    run(client, thread_id, [first])
    answer = assistant("A.")
    run(client, thread_id, [first, answer, user("two")])
    # The user edits "two" into "three": the client drops what followed and re-sends.
    edited, text = run(client, thread_id, [first, answer, user("three")])

    assert text == "C."
    assert sent_to_model(scripted_model) == [("user", "one"), ("assistant", "A."),
                                             ("user", "three")]
    assert snapshot_messages(client, thread_id) == [
        ("user", "one"), ("assistant", "A."), ("user", "three"), ("assistant", "C.")]
    branch = gateway_ids(client, edited)[0]
    forked = client.get(f"/v1/threads/{branch}").json()["forkedFrom"]
    earlier = client.get(f"/v1/threads/{forked['threadId']}/messages").json()["messages"]
    assert [m["content"][0].get("text") for m in earlier] == ["one", "A.", "two", "B."]


def test_a_client_that_sends_only_its_new_message_goes_on_from_the_end(
        client: httpx.Client, scripted_model: ScriptedModel):
    scripted_model.enqueue([{"content": "A."}], [{"content": "B."}])
    thread_id = f"t-{uuid.uuid4()}"
    run(client, thread_id, [user("one")])
    run(client, thread_id, [user("two")])
    assert sent_to_model(scripted_model) == [("user", "one"), ("assistant", "A."),
                                             ("user", "two")]


def test_parent_run_id_naming_an_earlier_run_branches_after_it(
        client: httpx.Client, scripted_model: ScriptedModel):
    scripted_model.enqueue([{"content": "A."}], [{"content": "B."}], [{"content": "C."}])
    thread_id = f"t-{uuid.uuid4()}"
    first, _ = run(client, thread_id, [user("one")])
    run(client, thread_id, [user("two")])
    run(client, thread_id, [user("three")], parentRunId=first["runId"])
    assert sent_to_model(scripted_model) == [("user", "one"), ("assistant", "A."),
                                             ("user", "three")]
    assert [m for m in snapshot_messages(client, thread_id) if m[0] == "user"] == [
        ("user", "one"), ("user", "three")]
