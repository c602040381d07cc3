"""The caller's AG-UI thread list (`GET /v1/agui/threads`, issue 44 item 5): what a CopilotKit
runner answers `useThreads` with. Each user scope lists only its own threads, by the names the
client chose, newest first, one page at a time; a thread without a client's name (a Tambo
thread, or a branch's original) is not listed."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from tests.integration.test_agui import RUN, agui_input
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import run_events


def listed(client: httpx.Client, user_key: str | None, **params: Any) -> dict[str, Any]:
    query = {**params, **({"userKey": user_key} if user_key else {})}
    response = client.get("/v1/agui/threads", params=query)
    assert response.status_code == 200, response.text
    return response.json()


def named(page: dict[str, Any]) -> list[str]:
    return [t["threadId"] for t in page["threads"]]


def test_each_user_lists_only_their_own_named_threads_newest_first(
        client: httpx.Client, scripted_model: ScriptedModel):
    alice, bob = f"alice-{uuid.uuid4()}", f"bob-{uuid.uuid4()}"
    scripted_model.enqueue(*([{"content": "ok"}] for _ in range(5)))
    first, second, bobs = (agui_input(f"t-{uuid.uuid4()}") for _ in range(3))
    for body, owner in ((first, alice), (second, alice), (bobs, bob)):
        run_events(client, "POST", f"{RUN}?userKey={owner}", json=body)
    # A thread alice made on the Tambo endpoints has no AG-UI name: not in her AG-UI list.
    tambo = client.post("/v1/threads", json={"userKey": alice})
    assert tambo.status_code == 201
    # Regenerating the first answer branches the thread: the name moves to the branch, and the
    # original (kept under the gateway's id) is not listed a second time.
    look = first["messages"]
    run_events(client, "POST", f"{RUN}?userKey={alice}",
               json={**agui_input(second["threadId"], text="more")})
    run_events(client, "POST", f"{RUN}?userKey={alice}",
               json={**agui_input(first["threadId"]), "messages": look})

    page = listed(client, alice)
    assert named(page) == [first["threadId"], second["threadId"]]  # the branch is newest
    assert page["hasMore"] is False and page["nextCursor"] is None
    (thread,) = [t for t in page["threads"] if t["threadId"] == second["threadId"]]
    assert thread["agent"] == "default" and thread["running"] is False
    assert thread["createdAt"] <= thread["updatedAt"]
    assert named(listed(client, bob)) == [bobs["threadId"]]
    assert named(listed(client, f"carol-{uuid.uuid4()}")) == []

    # One page at a time, with the thread list's cursor and filters.
    one = listed(client, alice, limit=1)
    assert named(one) == [first["threadId"]] and one["hasMore"] is True
    assert named(listed(client, alice, limit=1, cursor=one["nextCursor"])) == [
        second["threadId"]]
    assert named(listed(client, alice, agent="default")) == named(page)
    assert named(listed(client, alice, agent="other")) == []


def test_the_list_needs_a_user_scope(client: httpx.Client):
    """Without one it would list threads of no one (as the Tambo list, `GET /v1/threads`)."""
    response = client.get("/v1/agui/threads")
    assert response.status_code == 400 and response.json()["code"] == "USER_SCOPE_REQUIRED"
    bad = client.get("/v1/agui/threads", params={"userKey": "a", "limit": "0"})
    assert bad.status_code == 400 and bad.json()["code"] == "VALIDATION_ERROR"

