"""Limits, quotas and managed keys, from outside: the gateway app, keys made with the real
`gateway keys` command, requests over HTTP.

On SQLite this is one app; with `GATEWAY_TEST_BACKEND=postgres` it is three apps (each with its
own engine, run manager and Redis client, as three processes have) dealt requests round robin,
sharing PostgreSQL and Redis, so each request lands on whichever app comes next and the limits
must hold across them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import jwt
import pytest

from tests.conftest import scripted_env
from tests.support import engines
from tests.support.gateway_server import gateway_command
from tests.support.inprocess_app import InProcess, InProcessCluster, InProcessGateway, processes
from tests.support.run_stream import message, open_stream, read_until, slow_turn
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import SseEvent

RUN_MAX_SECONDS = 6  # the held runs below end by it, which frees their slots
PROJECT = "shop"
# Users signed in by the app's backend (HS256), exchanged for gateway tokens with a key.
USER_SECRET = "limits-shared-user-secret-0123456789"
USER_ISSUER = "https://shop.example"


def keys_command(env: dict[str, str], workdir: Path, *args: str) -> str:
    result = gateway_command(["keys", *args], env, workdir, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def create_key(gateway: InProcess, *limits: str) -> str:
    out = keys_command(env_of(gateway), gateway.workdir, "create", "--project", PROJECT,
                       *limits)
    return out.strip().splitlines()[-1]


def env_of(gateway: InProcess) -> dict[str, str]:
    return gateway.env


@pytest.fixture(scope="module")
def gateway(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[InProcess]:
    workdir = tmp_path_factory.mktemp("limits")
    env = scripted_env(scripted_model, GATEWAY_RUN_MAX_SECONDS=str(RUN_MAX_SECONDS),
                       GATEWAY_KEY_CACHE_SECONDS="1", GATEWAY_OAUTH_HS256_SECRET=USER_SECRET,
                       GATEWAY_OAUTH_HS256_ISSUER=USER_ISSUER, GATEWAY_OIDC_AUDIENCE="shop-app",
                       GATEWAY_TOKEN_SECRET="limits-gateway-token-secret-0123456789")
    server = (InProcessCluster(workdir, env, size=3) if engines.ENGINES is not None
              else InProcessGateway(workdir, env))
    # A managed key exists before the first start: no development mode, ever.
    create_key(server)
    server.start()
    yield server
    server.stop()


def client(gateway: InProcess, key: str,
           server: InProcessGateway | None = None) -> httpx.Client:
    return (server or gateway).client(timeout=30, headers={"x-api-key": key})


def stream(http: httpx.Client, method: str, url: str, **kwargs: object):
    """`open_stream` with this client's key (it sends the suite's default key otherwise)."""
    return open_stream(http, method, url, headers={"x-api-key": http.headers["x-api-key"]},
                       **kwargs)


def run(http: httpx.Client, body: dict[str, object]) -> list[SseEvent]:
    with stream(http, "POST", "/v1/threads/runs", json=body) as (_, events):
        return list(events)


def run_body(text: str = "go", user: str = "buyer", **extra: object) -> dict[str, object]:
    return {"message": message(text), "thread": {"userKey": user},
            "onDisconnect": "continue", **extra}


def test_a_key_limited_to_two_concurrent_runs_gets_429_on_the_third_from_any_process(
        gateway: InProcess, scripted_model: ScriptedModel) -> None:
    key = create_key(gateway, "--max-concurrent-runs", "2")
    scripted_model.enqueue(slow_turn(400, 0.05), slow_turn(400, 0.05))  # 20 s each
    held = []
    with client(gateway, key) as http:
        for _ in range(2):
            with stream(http, "POST", "/v1/threads/runs", json=run_body()) as (_, events):
                seen = read_until(events, lambda seen: len(seen) >= 3)
            held.append((seen[0].data["threadId"], seen[0].data["runId"]))
        # The third, on every process in turn (round robin behind the proxy).
        for server in processes(gateway):
            with client(gateway, key, server) as direct:
                third = direct.post("/v1/threads/runs", json=run_body())
            assert third.status_code == 429, third.text
            assert third.headers["content-type"] == "application/problem+json"
            assert third.json()["code"] == "TOO_MANY_CONCURRENT_RUNS"
            assert third.json()["limitScope"] == "apiKey"
            assert int(third.headers["Retry-After"]) >= 1
        # The two end by the run wall time: one RUN_ERROR each, and their slots come back.
        for ids in held:
            with stream(http, "GET", "/v1/threads/{}/runs/{}".format(*ids)) as (_, events):
                events = list(events)
            errors = [e for e in events if e.type == "RUN_ERROR"]
            assert len(errors) == 1 and events[-1].type == "RUN_ERROR"
            assert errors[0].data["code"] == "RUN_TIME_LIMIT"
            thread = http.get(f"/v1/threads/{ids[0]}", params={"userKey": "buyer"}).json()
            assert thread["runStatus"] == "idle"
        again = run(http, run_body())
        assert again[-1].type == "RUN_FINISHED"
    metrics = "".join(s.client().get("/metrics").text for s in processes(gateway))
    assert 'gateway_refusals_total{code="TOO_MANY_CONCURRENT_RUNS"}' in metrics


def test_runs_per_minute_and_the_daily_token_budget_answer_429(
        gateway: InProcess) -> None:
    per_minute = create_key(gateway, "--runs-per-minute", "1")
    budget = create_key(gateway, "--daily-tokens", "1")
    for key, code in ((per_minute, "RATE_LIMITED"), (budget, "TOKEN_BUDGET_EXCEEDED")):
        within_one_minute()
        with client(gateway, key) as http:
            first = run(http, run_body())
            assert first[-1].type == "RUN_FINISHED"
            refused = http.post("/v1/threads/runs", json=run_body())
        assert refused.status_code == 429 and refused.json()["code"] == code, refused.text
        assert int(refused.headers["Retry-After"]) >= 1


def within_one_minute(margin: float = 10.0) -> None:
    """Past the last `margin` seconds of the clock's minute: runs per minute are counted in
    the minute they start in, so a first run in one minute and the next in the following
    one are both within the limit (CI once saw the second start 14 ms into a new minute)."""
    left = 60 - time.time() % 60
    if left < margin:
        time.sleep(left + 0.1)


def signed_in(gateway: InProcess, key: str, user: str) -> dict[str, str]:
    """The headers of a user signed in with `key` (`TamboProvider userToken=...`)."""
    now = int(time.time())
    subject_token = jwt.encode({"sub": user, "aud": "shop-app", "iss": USER_ISSUER,
                                "exp": now + 600}, USER_SECRET, algorithm="HS256")
    with client(gateway, key) as http:
        response = http.post("/oauth/token", data={
            "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
            "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
            "subject_token": subject_token})
    assert response.status_code == 200, response.text
    return {"x-api-key": key, "authorization": f"Bearer {response.json()['access_token']}"}


def test_a_signed_in_user_is_held_to_the_keys_own_limits(
        gateway: InProcess) -> None:
    key = create_key(gateway, "--runs-per-minute", "1")
    headers = signed_in(gateway, key, "ann")
    body = {"message": message("go"), "onDisconnect": "continue"}
    within_one_minute()
    with gateway.client(timeout=30) as http:
        with open_stream(http, "POST", "/v1/threads/runs", json=body,
                         headers=headers) as (_, events):
            assert list(events)[-1].type == "RUN_FINISHED"
        refused = http.post("/v1/threads/runs", json=body, headers=headers)
        # Without the API key too (a bearer token alone names its key).
        alone = http.post("/v1/threads/runs", json=body,
                          headers={"authorization": headers["authorization"]})
    for response in (refused, alone):
        assert response.status_code == 429, response.text
        assert (response.json()["code"], response.json()["limitScope"]) == ("RATE_LIMITED",
                                                                             "apiKey")


def test_revoking_a_key_ends_the_tokens_exchanged_with_it(
        gateway: InProcess) -> None:
    key = create_key(gateway)
    headers = signed_in(gateway, key, "bea")
    token_only = {"authorization": headers["authorization"]}
    for server in processes(gateway):
        with server.client(timeout=30) as http:
            assert http.get("/v1/threads", headers=token_only).status_code == 200
    listing = keys_command(env_of(gateway), gateway.workdir, "list", "--project", PROJECT)
    key_id = next(line.split("\t")[0] for line in listing.splitlines()
                  if line.split("\t")[2] == key[:8] + "...")
    keys_command(env_of(gateway), gateway.workdir, "revoke", "--project", PROJECT, key_id)
    from tests.support.run_stream import wait_for

    for server in processes(gateway):  # within GATEWAY_KEY_CACHE_SECONDS (1 s here)
        with server.client(timeout=30) as http:
            wait_for(lambda http=http: http.get("/v1/threads", headers=token_only).status_code
                     == 401, timeout=10, what="the revoked key's token to be refused")
            refused = http.get("/v1/threads", headers=token_only)
    assert refused.json()["code"] == "INVALID_TOKEN"
    assert "revoked" in refused.json()["detail"]


def test_requests_over_a_limit_are_refused_before_anything_starts(
        gateway: InProcess) -> None:
    key = create_key(gateway)
    deep = b'{"message": ' + b"[" * 100 + b"]" * 100 + b"}"
    with client(gateway, key) as http:
        too_deep = http.post("/v1/threads/runs", content=deep,
                             headers={"content-type": "application/json"})
        too_long = http.post("/v1/threads/runs", json=run_body("x" * 200_001, "refused"))
        too_many = http.post("/v1/threads/runs", json=run_body(
            user="refused", tools=[{"name": f"t{n}"} for n in range(129)]))
        too_big = http.post("/v1/threads/runs", json=run_body(  # the model cannot be sent it
            user="refused", tools=[{"name": "t", "inputSchema": {"maximum": 2 ** 64}}]))
        # Read as NaN and infinity, which PostgreSQL refuses to store (it answered 503).
        not_json, too_far = (http.post("/v1/threads/runs", content=json.dumps(
            run_body(user="refused", metadata={"x": 0})).replace(": 0}", number).encode(),
            headers={"content-type": "application/json"}) for number in (": NaN}", ": 1e400}"))
        # PostgreSQL stores no NUL character (400 there), so it is refused on SQLite alike.
        nul = http.post("/v1/threads/runs", json=run_body("a\x00b", "refused"))
        nul_user = http.get("/v1/threads", params={"userKey": "a\x00b"})
        threads = http.get("/v1/threads", params={"userKey": "refused"}).json()["threads"]
    for response, status, code in ((too_deep, 400, "JSON_TOO_DEEP"),
                                   (nul, 400, "NUL_CHARACTER"),
                                   (nul_user, 400, "NUL_CHARACTER"),
                                   (too_long, 413, "MESSAGE_TOO_LARGE"),
                                   (too_many, 400, "TOO_MANY_TOOLS"),
                                   (too_big, 400, "INTEGER_OUT_OF_RANGE"),
                                   (not_json, 400, "INVALID_JSON"),
                                   (too_far, 400, "NUMBER_OUT_OF_RANGE")):
        assert response.status_code == status, response.text
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["code"] == code
    assert threads == []  # nothing was created by the refused requests


def test_keys_list_never_shows_a_key_and_revoke_stops_it_in_every_process(
        gateway: InProcess) -> None:
    key = create_key(gateway, "--expires", "30d")
    listing = keys_command(env_of(gateway), gateway.workdir, "list", "--project", PROJECT)
    assert key not in listing and key[:8] in listing
    key_id = next(line.split("\t")[0] for line in listing.splitlines()
                  if line.split("\t")[2] == key[:8] + "...")
    for server in processes(gateway):
        with client(gateway, key, server) as http:
            assert http.get("/v1/threads", params={"userKey": "u"}).status_code == 200
    keys_command(env_of(gateway), gateway.workdir, "revoke", "--project", PROJECT, key_id)
    from tests.support.run_stream import wait_for

    for server in processes(gateway):  # within GATEWAY_KEY_CACHE_SECONDS (1 s here)
        with client(gateway, key, server) as http:
            wait_for(lambda: http.get("/v1/threads", params={"userKey": "u"}).status_code
                     == 401, timeout=10, what="the revoked key to be refused")
    with gateway.client() as http:
        unknown = http.get("/v1/threads", params={"userKey": "u"},
                           headers={"x-api-key": "gwk_not-a-key"})
    assert unknown.status_code == 401 and unknown.json()["code"] == "UNAUTHORIZED"


def _latest_message(http: httpx.Client, thread_id: str, user: str) -> str:
    messages = http.get(f"/v1/threads/{thread_id}/messages", params={"userKey": user}).json()
    return messages["messages"][-1]["id"]


SUGGESTIONS: dict = {"steps": [{"content": '[{"title": "More", "detailedSuggestion": "More?"}]'}],
                     "stream": False}


def test_names_and_suggestions_are_metered_like_runs(
        gateway: InProcess, scripted_model: ScriptedModel) -> None:
    """A key whose runs are refused (per minute, or its token budget spent) gets the same 429
    for suggestions and thread names: they call the model too."""
    per_minute = create_key(gateway, "--runs-per-minute", "1")
    budget = create_key(gateway, "--daily-tokens", "1")
    for key, code in ((per_minute, "RATE_LIMITED"), (budget, "TOKEN_BUDGET_EXCEEDED")):
        within_one_minute()
        with client(gateway, key) as http:
            first = run(http, run_body(user="metered"))
            assert first[-1].type == "RUN_FINISHED"
            thread_id = first[0].data["threadId"]
            message_id = _latest_message(http, thread_id, "metered")
            scripted_model.enqueue(SUGGESTIONS, SUGGESTIONS)
            for _ in range(4):
                suggested = http.post(
                    f"/v1/threads/{thread_id}/messages/{message_id}/suggestions",
                    json={"userKey": "metered"})
                assert suggested.status_code == 429, suggested.text
                assert suggested.json()["code"] == code
                assert int(suggested.headers["Retry-After"]) >= 1
            named = http.post(f"/threads/{thread_id}/generate-name",
                              params={"contextKey": "metered"})
            assert named.status_code == 429 and named.json()["code"] == code, named.text


def test_the_tokens_of_suggestions_count_against_the_daily_budget(
        gateway: InProcess, scripted_model: ScriptedModel) -> None:
    key = create_key(gateway, "--daily-tokens", "1000000")
    with client(gateway, key) as http:
        first = run(http, run_body(user="spender"))
        thread_id = first[0].data["threadId"]
        message_id = _latest_message(http, thread_id, "spender")
        scripted_model.enqueue({**SUGGESTIONS, "steps": [
            *SUGGESTIONS["steps"], {"usage": {"prompt_tokens": 1_000_000}}]})
        path = f"/v1/threads/{thread_id}/messages/{message_id}/suggestions"
        assert http.post(path, json={"userKey": "spender"}).status_code == 201
        refused = http.post("/v1/threads/runs", json=run_body(user="spender"))
    assert refused.status_code == 429 and refused.json()["code"] == "TOKEN_BUDGET_EXCEEDED"


def test_a_key_gets_429_on_its_tenth_new_thread(gateway: InProcess) -> None:
    """Creating a thread is a start: a key limited to 9 per minute makes 9 threads, each for
    a new user scope (rotating `userKey`s do not escape the key's limit), and not a 10th."""
    key = create_key(gateway, "--runs-per-minute", "9")
    within_one_minute(20)
    with client(gateway, key) as http:
        for n in range(9):
            made = http.post("/v1/threads", json={"userKey": f"user-{n}"})
            assert made.status_code == 201, made.text
        tenth = http.post("/v1/threads", json={"userKey": "user-9"})
    assert tenth.status_code == 429, tenth.text
    assert tenth.headers["content-type"] == "application/problem+json"
    assert tenth.json()["code"] == "RATE_LIMITED" and tenth.json()["limitScope"] == "apiKey"
    assert int(tenth.headers["Retry-After"]) >= 1


def test_a_fork_counts_as_a_start_and_one_more_per_64_kib_it_copies(
        gateway: InProcess) -> None:
    """A fork copying about 150 KB counts as 1 + 2 starts: with the run that made the thread,
    a key limited to 4 per minute has none left for one more empty thread."""
    key = create_key(gateway, "--runs-per-minute", "4")
    within_one_minute(20)
    with client(gateway, key) as http:
        events = run(http, run_body("x" * 150_000))
        assert events[-1].type == "RUN_FINISHED"
        thread_id = events[0].data["threadId"]
        messages = http.get(f"/v1/threads/{thread_id}/messages",
                            params={"userKey": "buyer"}).json()["messages"]
        forked = http.post(f"/v1/threads/{thread_id}/fork",
                           json={"messageId": messages[0]["id"], "userKey": "buyer"})
        assert forked.status_code == 201, forked.text
        refused = http.post("/v1/threads", json={"userKey": "buyer"})
    assert refused.status_code == 429 and refused.json()["code"] == "RATE_LIMITED", refused.text
