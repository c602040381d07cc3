"""Batch runs and bulk cancel from outside: a batch starts each run through the same door as a
run sent alone (a refused item does not refuse the others), and a bulk cancel reaches the
active runs of the caller's threads named by id or by metadata, never another user's."""

from __future__ import annotations

import uuid

import httpx

from gateway.client import Client
from tests.support.run_stream import wait_for_status
from tests.support.scripted_model import ScriptedModel


def _message(text: str) -> dict[str, object]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def test_a_batch_starts_each_run_and_answers_each(client: httpx.Client,
                                                  scripted_model: ScriptedModel):
    user = f"batch-{uuid.uuid4().hex[:8]}"
    existing = client.post("/v1/threads", json={"userKey": user}).json()["id"]
    scripted_model.enqueue([{"content": "one"}], [{"content": "two"}])
    answer = client.post("/v1/threads/runs/batch", params={"userKey": user}, json={"runs": [
        {"message": _message("first"), "threadMetadata": {"batch": "b1"}},
        {"message": _message("second"), "threadId": existing},
        {"message": _message("third"), "threadId": "thr_missing"},
    ]})
    assert answer.status_code == 200, answer.text
    runs = answer.json()["runs"]
    assert [r["index"] for r in runs] == [0, 1, 2]
    assert runs[1]["threadId"] == existing
    assert runs[2]["error"]["code"] == "THREAD_NOT_FOUND" and "runId" not in runs[2]
    for started in runs[:2]:
        ended = wait_for_status(client, started["threadId"], started["runId"], "completed")
        assert ended["status"] == "completed"
    listed = client.get("/v1/threads", params={"userKey": user, "metadata.batch": "b1"}).json()
    assert [t["id"] for t in listed["threads"]] == [runs[0]["threadId"]]


def test_a_batch_is_bounded(client: httpx.Client):
    too_many = {"runs": [{"message": _message(str(i))} for i in range(21)]}
    refused = client.post("/v1/threads/runs/batch", json=too_many)
    assert refused.status_code == 400 and refused.json()["code"] == "VALIDATION_ERROR"
    assert client.post("/v1/threads/runs/batch", json={"runs": []}).status_code == 400


def test_bulk_cancel_by_metadata_and_by_id(client: httpx.Client, scripted_model: ScriptedModel):
    user, other = f"bulk-{uuid.uuid4().hex[:8]}", f"bulk-other-{uuid.uuid4().hex[:8]}"
    slow = [{"content": "working "}, {"delay": 30}, {"content": "done"}]
    scripted_model.enqueue(slow, slow, slow)

    def start(who: str, tag: str) -> dict:
        started = client.post("/v1/threads/runs/batch", params={"userKey": who}, json={
            "runs": [{"message": _message("long"), "threadMetadata": {"job": tag}}]}).json()
        return started["runs"][0]

    mine, by_id, theirs = start(user, "nightly"), start(user, "other"), start(other, "nightly")
    for run in (mine, by_id, theirs):
        wait_for_status(client, run["threadId"], run["runId"], "running")

    cancelled = client.post("/v1/threads/runs/cancel", params={"userKey": user},
                            json={"metadata": {"job": "nightly"}})
    assert cancelled.status_code == 200, cancelled.text
    assert [r["runId"] for r in cancelled.json()["runs"]] == [mine["runId"]]
    assert wait_for_status(client, mine["threadId"], mine["runId"], "cancelled")
    # Another user's thread with the same metadata was not touched.
    assert client.get(f"/v1/threads/{theirs['threadId']}/runs/{theirs['runId']}",
                      headers={"accept": "application/json"}).json()["status"] == "running"

    by_ids = client.post("/v1/threads/runs/cancel", params={"userKey": user},
                         json={"threadIds": [by_id["threadId"], theirs["threadId"]]}).json()
    assert [r["runId"] for r in by_ids["runs"]] == [by_id["runId"]]
    wait_for_status(client, by_id["threadId"], by_id["runId"], "cancelled")
    client.post("/v1/threads/runs/cancel", params={"userKey": other},
                json={"threadIds": [theirs["threadId"]]})
    wait_for_status(client, theirs["threadId"], theirs["runId"], "cancelled")

    refused = client.post("/v1/threads/runs/cancel", params={"userKey": user}, json={})
    assert refused.status_code == 400
    bad_key = client.post("/v1/threads/runs/cancel", params={"userKey": user},
                          json={"metadata": {"a\"b": "x"}})
    assert bad_key.status_code == 400


def test_python_client_batch_and_cancel(python_client: Client, scripted_model: ScriptedModel):
    tag = uuid.uuid4().hex[:8]
    scripted_model.enqueue_for(f"quick {tag}", [{"content": "a"}])
    scripted_model.enqueue_for(f"long {tag}", [{"content": "working "}, {"delay": 30}])
    started = python_client.batch([{"message": f"quick {tag}"},
                                   {"message": f"long {tag}", "threadMetadata": {"tag": tag}}]
                                  )["runs"]
    assert all("runId" in r for r in started)
    slow = started[1]
    assert slow["status"] == "running"
    done = python_client.cancel_runs(metadata={"tag": tag})
    assert [r["runId"] for r in done["runs"]] == [slow["runId"]]
    listed = python_client.threads(metadata={"tag": tag}, count=True)
    assert listed["count"] == 1


def test_a_batch_with_a_bad_user_scope_is_refused_whole(gateway):
    """Refusals of the request itself are not items' errors: nothing starts. (Without a valid
    key: tests/integration/test_fuzz.py, whose gateway has keys.)"""
    body = {"runs": [{"message": _message("x")}]}
    with gateway.client(timeout=30, headers={"x-api-key": "test-key"}) as keyed:
        bad_scope = keyed.post("/v1/threads/runs/batch", json=body,
                               params={"userKey": " "})
        assert bad_scope.status_code == 400
