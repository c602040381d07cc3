"""Ids a client chooses for a new thread (Tambo's `createThread`, the Timbal create) are names
within its project, as AG-UI's are: another project choosing the same one gets a thread of its
own, and learns nothing of the first (no squatting, no existence oracle across tenants). An id
that starts like one the gateway mints is refused. Key mode, two projects."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.conftest import scripted_env
from tests.support import engines
from tests.support.inprocess_app import InProcess, InProcessCluster, InProcessGateway
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import run_events

A, B = {"x-api-key": "ids-key-a"}, {"x-api-key": "ids-key-b"}


@pytest.fixture(scope="module")
def two_projects(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[InProcess]:
    workdir = tmp_path_factory.mktemp("thread-ids")
    env = scripted_env(scripted_model,
                       GATEWAY_API_KEYS="ids-key-a:project-a,ids-key-b:project-b")
    server = (InProcessCluster(workdir, env) if engines.ENGINES is not None
              else InProcessGateway(workdir, env)).start()
    yield server
    server.stop()


def run(text: str, previous: str | None = None) -> dict:
    body: dict = {"message": {"role": "user", "content": [{"type": "text", "text": text}]},
                  "userKey": "u1"}
    if previous is None:
        body["createThread"] = True
    else:
        body["previousRunId"] = previous
    return body


def texts(messages: dict) -> list[str]:
    return [c["text"] for m in messages["messages"] for c in m["content"] if "text" in c]


def test_two_projects_choosing_the_same_tambo_id_get_their_own_threads(
        two_projects: InProcess, scripted_model: ScriptedModel):
    chosen = f"my-chat-{uuid.uuid4().hex[:8]}"
    scripted_model.enqueue([{"content": "For B."}], [{"content": "For A."}],
                           [{"content": "B again."}])
    with two_projects.client(timeout=30) as http:
        first = run_events(http, "POST", f"/v1/threads/{chosen}/runs", json=run("b's"),
                           headers=B)
        assert first[-1].type == "RUN_FINISHED", first[-1]
        # Project A chooses the same id: a thread of its own, answered as any new one.
        second = run_events(http, "POST", f"/v1/threads/{chosen}/runs", json=run("a's"),
                            headers=A)
        assert second[-1].type == "RUN_FINISHED", second[-1]
        # Both go on reaching their own thread under the id they chose.
        again = run_events(http, "POST", f"/v1/threads/{chosen}/runs",
                           json=run("b's again", first[0].data["runId"]), headers=B)
        assert again[-1].type == "RUN_FINISHED", again[-1]
        seen_a = http.get(f"/v1/threads/{chosen}/messages", headers=A).json()
        seen_b = http.get(f"/v1/threads/{chosen}/messages", headers=B).json()
        timbal_a = http.get(f"/v1/timbal/threads/{chosen}", headers=A)
    assert texts(seen_a) == ["a's", "For A."]
    assert texts(seen_b) == ["b's", "For B.", "b's again", "B again."]
    assert timbal_a.status_code == 200 and "b's" not in timbal_a.text
    # A's run saw A's message only.
    assert "b's" not in str(scripted_model.requests[1]["messages"])


def test_a_timbal_uuid_another_project_holds_is_a_new_thread_too(two_projects: InProcess):
    chosen = str(uuid.uuid4())
    with two_projects.client(timeout=30) as http:
        made_b = http.post(f"/v1/timbal/threads/{chosen}", json={"userKey": "u1"}, headers=B)
        made_a = http.post(f"/v1/timbal/threads/{chosen}", json={"userKey": "u1"}, headers=A)
        read_a = http.get(f"/v1/timbal/threads/{chosen}", headers=A)
    assert made_b.status_code == 201, made_b.text
    assert made_a.status_code == 201, made_a.text
    assert read_a.status_code == 200
