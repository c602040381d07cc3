"""Signed-in users: `POST /oauth/token` with a real local identity provider (JWKS over HTTP),
then bearer tokens that act as the user's scope everywhere and never reach another user's
threads."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import jwt
import pytest

from tests.conftest import scripted_env
from tests.support.identity_provider import IdentityProvider
from tests.support.inprocess_app import InProcessGateway
from tests.support.run_stream import wait_for
from tests.support.scripted_model import ScriptedModel
from tests.support.sse import run_events, text_of

API_KEY = "app-key"
TOKEN_SECRET = "gateway-token-secret-for-tests-0123456789"
SHARED_SECRET = "shared-hs256-secret-for-tests-0123456789"
SHARED_ISSUER = "https://backend.example"
EXCHANGE = {"grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
            "subject_token_type": "urn:ietf:params:oauth:token-type:access_token"}


@pytest.fixture(scope="module")
def idp() -> Iterator[IdentityProvider]:
    provider = IdentityProvider().start()
    yield provider
    provider.stop()


@pytest.fixture(scope="module")
def outage_idps() -> Iterator[tuple[IdentityProvider, IdentityProvider, IdentityProvider]]:
    """Three more trusted issuers: one down, one that does not answer until released, and one
    in good health that no other test has asked yet."""
    providers = tuple(IdentityProvider().start() for _ in range(3))
    providers[0].down = True
    yield providers  # type: ignore[misc]
    for provider in providers:
        provider.stop()


@pytest.fixture(scope="module")
def app_gateway(scripted_model: ScriptedModel, idp: IdentityProvider,
                outage_idps: tuple[IdentityProvider, ...],
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessGateway]:
    issuers = ",".join(p.issuer for p in (idp, *outage_idps))
    server = InProcessGateway(tmp_path_factory.mktemp("signed-in"), scripted_env(
        scripted_model, GATEWAY_API_KEYS=f"{API_KEY}:shop,other-key:elsewhere",
        GATEWAY_OIDC_ISSUERS=issuers, GATEWAY_OIDC_AUDIENCE="test-app",
        GATEWAY_OAUTH_HS256_SECRET=SHARED_SECRET, GATEWAY_OAUTH_HS256_ISSUER=SHARED_ISSUER,
        GATEWAY_TOKEN_SECRET=TOKEN_SECRET, GATEWAY_TOKEN_TTL_SECONDS="600"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def http(app_gateway: InProcessGateway) -> Iterator[httpx.Client]:
    with app_gateway.client(timeout=30, headers={"x-api-key": API_KEY}) as client:
        yield client


def exchange(http: httpx.Client, subject_token: str) -> httpx.Response:
    # Form-encoded, as the React SDK sends it.
    return http.post("/oauth/token", data={**EXCHANGE, "subject_token": subject_token})


def bearer(http: httpx.Client, idp: IdentityProvider, subject: str) -> dict[str, str]:
    response = exchange(http, idp.token(subject))
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["token_type"] == "Bearer" and 0 < body["expires_in"] <= 600
    assert body["issued_token_type"] == "urn:ietf:params:oauth:token-type:access_token"
    return {"authorization": f"Bearer {body['access_token']}"}


def problem(response: httpx.Response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert body["code"] == code, body
    return body


def start_thread(http: httpx.Client, headers: dict[str, str], model: ScriptedModel,
                 text: str) -> tuple[str, str]:
    model.enqueue([{"content": f"reply to {text}"}])
    events = run_events(http, "POST", "/v1/threads/runs", headers={**headers,
                        "x-api-key": API_KEY},
                        json={"message": {"role": "user",
                                          "content": [{"type": "text", "text": text}]}})
    assert text_of(events) == f"reply to {text}"
    started = events[0].data
    return started["threadId"], started["runId"]


def test_signed_in_user_runs_and_lists_only_their_threads(http, idp, scripted_model):
    alice = bearer(http, idp, "alice")
    bob = bearer(http, idp, "bob")
    thread_a, _ = start_thread(http, alice, scripted_model, "hi from alice")
    thread_b, _ = start_thread(http, bob, scripted_model, "hi from bob")

    listed = http.get("/v1/threads", headers=alice).json()["threads"]
    assert [t["id"] for t in listed] == [thread_a]
    assert http.get(f"/v1/threads/{thread_a}", headers=alice).json()["messages"]
    # A userKey naming the same user as the token's scope would be ambiguous: only the token.
    problem(http.get("/v1/threads", params={"userKey": "bob"}, headers=alice), 400,
            "VALIDATION_ERROR")
    # Bob's thread is invisible to Alice, and a plain userKey cannot reach a signed-in thread.
    assert http.get(f"/v1/threads/{thread_b}", headers=alice).status_code == 404
    assert http.get(f"/v1/threads/{thread_a}", params={"userKey": "alice"}).status_code == 404
    # Nor the API key alone (the leniency for clients that send no userKey stops at them), nor
    # a userKey spelled like a signed-in scope.
    assert http.get(f"/v1/threads/{thread_a}").status_code == 404
    problem(http.get("/v1/threads", params={"userKey": "oauth:x:alice"}), 400,
            "VALIDATION_ERROR")


def test_a_bearer_gets_404_on_another_users_thread_on_every_endpoint(http, idp,
                                                                      scripted_model):
    owner = bearer(http, idp, "owner")
    intruder = bearer(http, idp, "intruder")
    thread_id, run_id = start_thread(http, owner, scripted_model, "private")
    message_id = http.get(f"/v1/threads/{thread_id}/messages",
                          headers=owner).json()["messages"][-1]["id"]
    run_body = {"message": {"role": "user", "content": [{"type": "text", "text": "x"}]},
                "previousRunId": run_id}
    calls = [
        ("GET", f"/v1/threads/{thread_id}", None),
        ("PATCH", f"/v1/threads/{thread_id}", {"name": "stolen"}),
        ("GET", f"/v1/threads/{thread_id}/messages", None),
        ("GET", f"/v1/threads/{thread_id}/messages/{message_id}", None),
        ("GET", f"/v1/threads/{thread_id}/runs", None),
        ("GET", f"/v1/threads/{thread_id}/runs/{run_id}", None),
        ("POST", f"/v1/threads/{thread_id}/runs", run_body),
        ("DELETE", f"/v1/threads/{thread_id}/runs/{run_id}", None),
        ("GET", f"/v1/threads/{thread_id}/messages/{message_id}/suggestions", None),
        ("POST", f"/v1/threads/{thread_id}/messages/{message_id}/suggestions", {}),
        ("GET", f"/threads/{thread_id}/messages/{message_id}/suggestions", None),
        ("POST", f"/threads/{thread_id}/messages/{message_id}/suggestions", {}),
        ("POST", f"/threads/{thread_id}/generate-name", None),
        ("GET", f"/v1/threads/{thread_id}/components/c1/state", None),
        ("POST", f"/v1/threads/{thread_id}/components/c1/state", {"state": {}}),
        ("GET", f"/v1/agui/threads/{thread_id}/runs/{run_id}", None),
        ("DELETE", f"/v1/agui/threads/{thread_id}/runs/{run_id}", None),
        ("POST", "/v1/agui/agents/default/run", agui_run(thread_id)),
        ("GET", f"/v1/timbal/threads/{thread_id}", None),
        ("GET", f"/v1/timbal/threads/{thread_id}/runs/{run_id}", None),
        ("DELETE", f"/v1/threads/{thread_id}", None),
    ]
    for method, path, body in calls:
        response = http.request(method, path, json=body, headers={
            **intruder, "accept": "application/json"})
        problem(response, 404, "THREAD_NOT_FOUND")
    # The API key alone (public in a browser app) reaches none of it either, whatever the
    # dialect: not even the calls that are lenient for clients sending no user scope.
    for method, path, body in calls:
        response = http.request(method, path, json=body, headers={"accept": "application/json"})
        problem(response, 404, "THREAD_NOT_FOUND")
    # Nothing changed for the owner.
    thread = http.get(f"/v1/threads/{thread_id}", headers=owner).json()
    assert "name" not in thread and len(thread["messages"]) == 2
    assert scripted_model.pending() == 0  # the intruder's run never reached the model


def agui_run(thread_id: str) -> dict:
    """An AG-UI 1.0 `RunAgentInput` continuing `thread_id`."""
    return {"threadId": thread_id, "runId": f"r-{uuid.uuid4()}", "state": {}, "tools": [],
            "context": [], "forwardedProps": {},
            "messages": [{"id": f"m-{uuid.uuid4()}", "role": "user", "content": "x"}]}


def test_tokens_that_identify_no_one_get_the_documented_errors(http, idp, app_gateway):
    expired = problem(exchange(http, idp.token("carol", lifetime=-60)), 401, "TOKEN_EXPIRED")
    assert expired["error"] == "invalid_grant"
    forged = problem(exchange(http, idp.foreign_token("carol")), 401, "INVALID_TOKEN")
    assert "signature" in forged["detail"]
    problem(exchange(http, idp.token("carol", audience="another-app")), 401, "INVALID_TOKEN")
    problem(exchange(http, "not-a-jwt"), 401, "INVALID_TOKEN")
    problem(http.post("/oauth/token", data={**EXCHANGE, "grant_type": "password",
                                            "subject_token": idp.token("carol")}),
            400, "UNSUPPORTED_GRANT_TYPE")
    # Without the API key there is no project to sign the user into.
    with app_gateway.client() as keyless:
        problem(keyless.post("/oauth/token",
                             data={**EXCHANGE, "subject_token": idp.token("carol")}),
                401, "UNAUTHORIZED")

    # Gateway tokens: expired, signed with another key, or for another project.
    now = int(time.time())
    claims = {"iss": "gateway", "aud": "gateway-api", "sub": "oauth:x:carol",
              "project": "shop", "iat": now - 120}
    stale = jwt.encode({**claims, "exp": now - 60}, TOKEN_SECRET, algorithm="HS256")
    problem(http.get("/v1/threads", headers={"authorization": f"Bearer {stale}"}), 401,
            "TOKEN_EXPIRED")
    wrong = jwt.encode({**claims, "exp": now + 60}, "not-the-secret-" * 3, algorithm="HS256")
    problem(http.get("/v1/threads", headers={"authorization": f"Bearer {wrong}"}), 401,
            "INVALID_TOKEN")
    good = bearer(http, idp, "carol")
    problem(http.get("/v1/threads", headers={**good, "x-api-key": "other-key"}), 401,
            "INVALID_TOKEN")


def test_shared_secret_tokens_and_key_caching(http, idp):
    now = int(time.time())
    claims = {"sub": "dave", "aud": "test-app", "iss": SHARED_ISSUER, "exp": now + 60}
    response = exchange(http, jwt.encode(claims, SHARED_SECRET, algorithm="HS256"))
    assert response.status_code == 200, response.text
    # Whom it is for and who issued it are required, and checked: another system signing with
    # the same secret does not sign users in here.
    for changed in ({"aud": "another-app"}, {"iss": "https://other.example"}):
        token = jwt.encode({**claims, **changed}, SHARED_SECRET, algorithm="HS256")
        problem(exchange(http, token), 401, "INVALID_TOKEN")
    for missing in ("aud", "iss"):
        token = jwt.encode({k: v for k, v in claims.items() if k != missing}, SHARED_SECRET,
                           algorithm="HS256")
        assert missing in problem(exchange(http, token), 401, "INVALID_TOKEN")["detail"]
    # The gateway token never outlives the token it was exchanged for.
    assert response.json()["expires_in"] <= 60
    before = idp.jwks_requests
    for subject in ("erin", "frank", "grace"):
        bearer(http, idp, subject)
    assert idp.jwks_requests == before  # the key set is cached, not fetched per exchange


def test_an_unreachable_issuer_is_asked_once_then_refused_at_once(http, outage_idps):
    down = outage_idps[0]
    for _ in range(3):
        body = problem(exchange(http, down.token("heidi")), 401, "INVALID_TOKEN")
        assert "could not be reached" in body["detail"]
    assert down.discovery_requests == 1  # the failure is remembered for a few seconds


def test_an_issuer_that_does_not_answer_holds_up_only_its_own_users(http, app_gateway,
                                                                   outage_idps):
    _, hanging, healthy = outage_idps
    hanging.hold = threading.Event()
    waiting: list[httpx.Response] = []

    def exchange_for_ivan() -> None:
        with app_gateway.client(headers={"x-api-key": API_KEY}, timeout=60) as own:
            waiting.append(exchange(own, hanging.token("ivan")))

    stuck = threading.Thread(target=exchange_for_ivan)
    stuck.start()
    try:
        wait_for(lambda: hanging.discovery_requests == 1, timeout=30,
                 what="the exchange to ask the hanging issuer")
        # Its keys are not cached yet: the exchange fetches them while the other one waits.
        response = exchange(http, healthy.token("judy"))
        assert response.status_code == 200, response.text
        assert not waiting  # the first exchange is still waiting for its issuer
    finally:
        hanging.hold.set()
        stuck.join(timeout=60)
    assert waiting and waiting[0].status_code == 200


def test_listing_or_creating_threads_needs_a_user_scope(http):
    problem(http.get("/v1/threads"), 400, "USER_SCOPE_REQUIRED")
    problem(http.post("/v1/threads", json={}), 400, "USER_SCOPE_REQUIRED")
    problem(http.post("/v1/threads/runs", json={"message": {
        "role": "user", "content": [{"type": "text", "text": "hi"}]}}), 400,
        "USER_SCOPE_REQUIRED")
    created = http.post("/v1/threads", json={"userKey": "u-1"})
    assert created.status_code == 201
    # Thread fetch keeps working without a key (TamboClient sends none), within the project.
    assert http.get(f"/v1/threads/{created.json()['id']}").status_code == 200
    assert http.get(f"/v1/threads/{created.json()['id']}",
                    headers={"x-api-key": "other-key"}).status_code == 404
    thread = created.json()["id"]
    # Everything else about a user's thread needs the scope, as on the real server: the Tambo
    # clients send it there (in the query or the run body), and so must an AG-UI client.
    for method, path, body in [
            ("GET", f"/v1/threads/{thread}/runs", None),
            ("DELETE", f"/v1/threads/{thread}", None),
            ("POST", f"/v1/threads/{thread}/runs", {"message": {
                "role": "user", "content": [{"type": "text", "text": "hi"}]}}),
            ("GET", f"/v1/threads/{thread}/components/c1/state", None),
            ("POST", f"/v1/threads/{thread}/components/c1/state", {"state": {"a": 1}}),
            ("POST", "/v1/agui/agents/default/run", agui_run(thread))]:
        problem(http.request(method, path, json=body), 400, "USER_SCOPE_REQUIRED")
    # With it, the same calls reach the thread.
    runs = http.get(f"/v1/threads/{thread}/runs", params={"userKey": "u-1"})
    assert runs.status_code == 200 and runs.json()["runs"] == []
    # The calls the clients make without one keep working: renaming (TamboClient) and the
    # message list (@tambo-ai/react).
    assert http.patch(f"/v1/threads/{thread}", json={"name": "n"}).status_code == 200
    listed = http.get(f"/v1/threads/{thread}/messages")
    assert listed.status_code == 200 and listed.json()["messages"] == []
    # Another user's key is as good as a wrong thread id.
    problem(http.get(f"/v1/threads/{thread}/messages", params={"userKey": "u-2"}), 404,
            "THREAD_NOT_FOUND")


def test_token_exchange_is_refused_clearly_when_not_configured(tmp_path: Path):
    server = InProcessGateway(tmp_path / "gw").start()
    try:
        with server.client() as http:
            response = http.post("/oauth/token", headers={"x-api-key": "dev"},
                                 data={**EXCHANGE, "subject_token": "eyJ.a.b"})
        body = problem(response, 400, "TOKEN_EXCHANGE_DISABLED")
        assert "GATEWAY_OIDC_ISSUERS" in body["detail"]
    finally:
        server.stop()
