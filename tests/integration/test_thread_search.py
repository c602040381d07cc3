"""Thread search from outside: `GET /v1/threads` narrowed by metadata, name prefix, status,
agent and time ranges, with a count; scoped to the caller's user as the plain list is, and
bounded (a malformed or excessive filter is refused, never dropped)."""

from __future__ import annotations

import uuid

import httpx


def _thread(client: httpx.Client, user: str, metadata: dict[str, object] | None = None,
            name: str | None = None) -> str:
    thread_id = client.post("/v1/threads", json={"userKey": user, "metadata": metadata}
                            ).json()["id"]
    if name is not None:
        client.patch(f"/v1/threads/{thread_id}", json={"name": name})
    return str(thread_id)


def _ids(client: httpx.Client, user: str, **params: object) -> list[str]:
    answer = client.get("/v1/threads", params={"userKey": user, **params})
    assert answer.status_code == 200, answer.text
    return [t["id"] for t in answer.json()["threads"]]


def test_metadata_filter_returns_only_those_threads(client: httpx.Client):
    user = f"search-{uuid.uuid4().hex[:8]}"
    x1 = _thread(client, user, {"project": "x", "team": "red"})
    x2 = _thread(client, user, {"project": "x", "team": "blue"})
    _thread(client, user, {"project": "y"})
    _thread(client, user, {"project": 5})
    _thread(client, user)
    _thread(client, "someone-else", {"project": "x"})  # another user's: never listed

    assert _ids(client, user, **{"metadata.project": "x"}) == [x2, x1]
    assert _ids(client, user, **{"metadata.project": "x", "metadata.team": "red"}) == [x1]
    assert _ids(client, user, **{"metadata.project": "z"}) == []
    # Only string values match: the number 5 is not the text "5".
    assert _ids(client, user, **{"metadata.project": "5"}) == []

    counted = client.get("/v1/threads", params={"userKey": user, "metadata.project": "x",
                                                "count": "true", "limit": 1}).json()
    assert counted["count"] == 2 and counted["countCapped"] is False
    assert counted["hasMore"] is True and len(counted["threads"]) == 1
    rest = client.get("/v1/threads", params={"userKey": user, "metadata.project": "x",
                                             "limit": 1, "cursor": counted["nextCursor"]}).json()
    assert [t["id"] for t in rest["threads"]] == [x1] and rest["hasMore"] is False
    assert "count" not in rest


def test_name_prefix_status_agent_and_ranges(client: httpx.Client):
    user = f"search-{uuid.uuid4().hex[:8]}"
    trip = _thread(client, user, name="Trip to Rome")
    _thread(client, user, name="trip lowercase")
    _thread(client, user, name="100%_off")
    plain = _thread(client, user)

    assert _ids(client, user, namePrefix="Trip") == [trip]  # case-sensitive everywhere
    assert _ids(client, user, namePrefix="100%") != []  # LIKE's wildcards are plain text
    assert _ids(client, user, namePrefix="1%") == []
    assert _ids(client, user, namePrefix="100%_") != []
    assert len(_ids(client, user, status="idle")) == 4
    assert _ids(client, user, status="streaming") == []
    assert _ids(client, user, agent="no-such-agent") == []

    created = client.get(f"/v1/threads/{plain}", params={"userKey": user}).json()["createdAt"]
    assert _ids(client, user, createdAfter=created)[-1] == plain
    assert plain not in _ids(client, user, createdBefore=created)
    assert _ids(client, user, updatedAfter="2999-01-01T00:00:00Z") == []
    assert len(_ids(client, user, updatedBefore="2999-01-01")) == 4


def test_bad_filters_are_refused(client: httpx.Client):
    def refused(**params: object) -> None:
        answer = client.get("/v1/threads", params={"userKey": "search-bad", **params})
        assert answer.status_code == 400, answer.text
        assert answer.json()["code"] == "VALIDATION_ERROR"

    refused(**{"metadata.a b": "x"})
    refused(**{"metadata.": "x"})
    refused(**{f"metadata.k{i}": "v" for i in range(9)})
    refused(**{"metadata.k": "v" * 257})
    refused(status="done")
    refused(createdAfter="yesterday")
    refused(count="yes")
    refused(count="")
    refused(status="")
    refused(createdAfter="")
