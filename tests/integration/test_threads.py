"""The threads and messages REST surface, in the real clients' shapes."""

from __future__ import annotations

import re

import httpx

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def test_create_get_update_delete(client: httpx.Client):
    created = client.post("/v1/threads", json={"metadata": {"a": 1}, "userKey": "crud-user"})
    assert created.status_code == 201
    thread = created.json()
    assert thread["runStatus"] == "idle" and thread["metadata"] == {"a": 1}
    assert ISO.match(thread["createdAt"]) and ISO.match(thread["updatedAt"])

    fetched = client.get(f"/v1/threads/{thread['id']}", params={"userKey": "crud-user"}).json()
    assert fetched["id"] == thread["id"] and fetched["messages"] == []

    renamed = client.patch(f"/v1/threads/{thread['id']}", json={"name": "Trip"}).json()
    assert renamed["name"] == "Trip" and renamed["metadata"] == {"a": 1}

    assert client.get(f"/v1/threads/{thread['id']}", params={"userKey": "other"}).status_code == 404
    assert client.delete(f"/v1/threads/{thread['id']}", params={"userKey": "crud-user"}).status_code == 204
    assert client.get(f"/v1/threads/{thread['id']}").status_code == 404


def test_list_is_scoped_by_user_key_and_paginates(client: httpx.Client):
    ids = [client.post("/v1/threads", json={"userKey": "pager"}).json()["id"] for _ in range(5)]
    client.post("/v1/threads", json={"userKey": "someone-else"})

    seen, cursor = [], None
    while True:
        params = {"userKey": "pager", "limit": 2, **({"cursor": cursor} if cursor else {})}
        page = client.get("/v1/threads", params=params).json()
        seen += [t["id"] for t in page["threads"]]
        if not page["hasMore"]:
            assert "nextCursor" not in page
            break
        cursor = page["nextCursor"]
    assert seen == list(reversed(ids))  # newest first, each exactly once


def test_initial_messages_and_message_pagination(client: httpx.Client):
    system = {"role": "system", "content": [{"type": "text", "text": "Be brief."}]}
    refused = client.post("/v1/threads", json={"initialMessages": [system]})
    assert refused.status_code == 400 and refused.json()["code"] == "SYSTEM_PROMPT_NOT_ALLOWED"
    thread = client.post("/v1/threads", json={"initialMessages": [
        {"role": "user", "content": "zero"},
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "two"},
    ]}).json()
    listing = client.get(f"/v1/threads/{thread['id']}/messages", params={"limit": 2}).json()
    assert [m["role"] for m in listing["messages"]] == ["user", "user"]
    assert listing["hasMore"] is True
    rest = client.get(f"/v1/threads/{thread['id']}/messages",
                      params={"limit": 2, "cursor": listing["nextCursor"]}).json()
    assert [m["content"][0]["text"] for m in rest["messages"]] == ["two"]
    assert rest["hasMore"] is False

    newest = client.get(f"/v1/threads/{thread['id']}/messages", params={"order": "desc"}).json()
    assert [m["role"] for m in newest["messages"]] == ["assistant", "user", "user"]
    one = client.get(f"/v1/threads/{thread['id']}/messages/{newest['messages'][0]['id']}")
    assert one.json()["content"] == [{"type": "text", "text": "two"}]
    missing = client.get(f"/v1/threads/{thread['id']}/messages/nope")
    assert missing.status_code == 404 and missing.json()["code"] == "MESSAGE_NOT_FOUND"


def test_a_thread_id_alone_does_not_reveal_its_owner(client: httpx.Client):
    """The Tambo clients fetch, rename and name a thread without a user scope; those answers
    must not carry the owner's userKey (with it, the owner's other threads can be listed,
    read and deleted), nor generate-name's `contextKey` and `projectId`."""
    thread_id = client.post("/v1/threads", json={"userKey": "owner-secret"}).json()["id"]
    other_id = client.post("/v1/threads", json={"userKey": "owner-secret"}).json()["id"]

    fetched = client.get(f"/v1/threads/{thread_id}")
    renamed = client.patch(f"/v1/threads/{thread_id}", json={"name": "Named"})
    named = client.post(f"/threads/{thread_id}/generate-name")
    for answer in (fetched, renamed, named):
        assert answer.status_code == 200, answer.text
        assert "owner-secret" not in answer.text
        assert not {"userKey", "contextKey", "projectId"} & set(answer.json())
    assert fetched.json()["id"] == thread_id and named.json()["name"] == "Named"

    # The owner, naming their scope, still sees it; and their other thread stays theirs.
    own = client.get(f"/v1/threads/{thread_id}", params={"userKey": "owner-secret"}).json()
    assert own["userKey"] == "owner-secret"
    own_name = client.post(f"/threads/{thread_id}/generate-name",
                           params={"contextKey": "owner-secret"}).json()
    assert own_name["contextKey"] == "owner-secret" and own_name["projectId"]
    assert client.get(f"/v1/threads/{other_id}", params={"userKey": "owner-secret"}
                      ).status_code == 200
