"""Every stored thing has a cap (docs/security.md, "Bounds and caps"): thread and run metadata,
a new thread's seeded messages, a component's state and the number of threads a user scope
holds, each refused with its own problem+json code before anything is written."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import scripted_env
from tests.integration.test_component_state import TABLE, render_table, state_url
from tests.support import engines
from tests.support.gateway_server import GatewayCluster, GatewayServer
from tests.support.scripted_model import ScriptedModel

BIG_METADATA = {"blob": "x" * (4 * 1024 * 1024)}  # 4 MiB
SEEDED = [{"role": "user", "content": "y" * 300_000} for _ in range(20)]


def refused(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == code


def test_metadata_over_the_cap_is_refused_wherever_it_is_stored(client: httpx.Client):
    user = {"userKey": "caps-metadata"}
    refused(client.post("/v1/threads", json={**user, "metadata": BIG_METADATA}),
            413, "METADATA_TOO_LARGE")
    thread_id = client.post("/v1/threads", json={**user, "metadata": {"a": 1}}).json()["id"]
    refused(client.patch(f"/v1/threads/{thread_id}", json={"metadata": BIG_METADATA}),
            413, "METADATA_TOO_LARGE")
    message = {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    refused(client.post("/v1/threads/runs", json={
        "message": message, "thread": {**user, "metadata": BIG_METADATA}}),
        413, "METADATA_TOO_LARGE")
    refused(client.post(f"/v1/threads/{thread_id}/runs", json={
        "message": message, **user, "runMetadata": BIG_METADATA}), 413, "METADATA_TOO_LARGE")
    # A message's metadata is stored with it, as the Timbal write path's always was.
    refused(client.post(f"/v1/threads/{thread_id}/runs", json={
        "message": {**message, "metadata": BIG_METADATA}, **user}), 413, "METADATA_TOO_LARGE")
    threads = client.get("/v1/threads", params=user).json()["threads"]
    assert [(t["id"], t["metadata"]) for t in threads] == [(thread_id, {"a": 1})]


def test_seeded_messages_over_the_cap_are_refused(client: httpx.Client):
    user = {"userKey": "caps-seeded"}
    refused(client.post("/v1/threads", json={**user, "initialMessages": SEEDED}),
            413, "MESSAGE_TOO_LARGE")
    many = [{"role": "user", "content": "hi"}] * 101
    refused(client.post("/v1/threads", json={**user, "initialMessages": many}),
            400, "TOO_MANY_INITIAL_MESSAGES")
    refused(client.post("/v1/threads/runs", json={
        "message": {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        "thread": {**user, "initialMessages": SEEDED}}), 413, "MESSAGE_TOO_LARGE")
    assert client.get("/v1/threads", params=user).json()["threads"] == []


def test_component_state_over_the_cap_is_refused(client: httpx.Client,
                                                 scripted_model: ScriptedModel):
    thread_id, component_id, _ = render_table(client, scripted_model, TABLE)
    url = state_url(thread_id, component_id)
    refused(client.post(url, json={"state": {"rows": ["r" * 1000] * 300}}),
            413, "STATE_TOO_LARGE")
    assert client.post(url, json={"state": {"rows": ["r"]}}).status_code == 200


@pytest.fixture(scope="module")
def capped(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[GatewayServer | GatewayCluster]:
    workdir = tmp_path_factory.mktemp("caps")
    env = scripted_env(scripted_model, GATEWAY_MAX_THREADS_PER_USER="2",
                       GATEWAY_MAX_THREADS_PER_PROJECT="6")
    server = (GatewayCluster(workdir, env) if engines.ENGINES is not None
              else GatewayServer(workdir, env))
    server.start()
    yield server
    server.stop()


def test_a_user_scope_holds_at_most_its_cap_of_threads(capped: GatewayServer | GatewayCluster):
    with httpx.Client(base_url=capped.url, timeout=30, headers={"x-api-key": "k"}) as http:
        first, second = (http.post("/v1/threads", json={"userKey": "hoarder"}) for _ in "12")
        assert first.status_code == second.status_code == 201
        third = http.post("/v1/threads", json={"userKey": "hoarder"})
        refused(third, 403, "THREAD_LIMIT_REACHED")
        assert third.json()["limitScope"] == "user"
        refused(http.post("/v1/threads/runs", json={
            "message": {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            "thread": {"userKey": "hoarder"}}), 403, "THREAD_LIMIT_REACHED")
        assert http.post("/v1/threads", json={"userKey": "someone-else"}).status_code == 201
        # Deleting one makes room again.
        http.delete(f"/v1/threads/{first.json()['id']}", params={"userKey": "hoarder"})
        assert http.post("/v1/threads", json={"userKey": "hoarder"}).status_code == 201


def test_a_project_holds_at_most_its_cap_of_threads(capped: GatewayServer | GatewayCluster):
    """Runs after the user-scope test (which leaves 3 threads): whoever creates them, the
    project's threads stop at its cap."""
    with httpx.Client(base_url=capped.url, timeout=30, headers={"x-api-key": "k"}) as http:
        answers = [http.post("/v1/threads", json={"userKey": f"crowd-{n}"}) for n in range(8)]
    created = [a for a in answers if a.status_code == 201]
    # Each process recounts every few seconds: with several, the ceiling may be passed by a few.
    processes = len(capped.servers) if isinstance(capped, GatewayCluster) else 1
    assert 1 <= len(created) <= 3 * processes
    refused(answers[-1], 403, "THREAD_LIMIT_REACHED")
    assert answers[-1].json()["limitScope"] == "project"
