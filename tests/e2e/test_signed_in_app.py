"""The React example with signed-in users (`userToken`) in Chromium: a local identity provider
(a real HTTP server on loopback with a JWKS) signs the user in, the SDK exchanges the token at
`/oauth/token`, and everything after runs as that user: sending, listing threads, attaching an
image, dictating. Another user's browser cannot see the thread.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import scripted_env
from tests.support.gateway_server import GatewayServer
from tests.support.identity_provider import IdentityProvider
from tests.support.scripted_model import ScriptedModel

from .harness import Browser, build_app, require_tools, static_server
from .test_react_app import clean, stream_turn, streaming_requests

pytestmark = pytest.mark.timeout(300)

API_KEY = "web-key"
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")


@pytest.fixture(scope="module")
def idp() -> Iterator[IdentityProvider]:
    provider = IdentityProvider().start()
    yield provider
    provider.stop()


@pytest.fixture(scope="module")
def signed_in_gateway(scripted_model: ScriptedModel, idp: IdentityProvider,
                      tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayServer]:
    server = GatewayServer(tmp_path_factory.mktemp("signed-in-e2e"), scripted_env(
        scripted_model, GATEWAY_API_KEYS=f"{API_KEY}:web", GATEWAY_OIDC_ISSUERS=idp.issuer,
        GATEWAY_OIDC_AUDIENCE="test-app", GATEWAY_TRANSCRIPTION_MODEL="openai/whisper-1"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def signed_in_browser(signed_in_gateway: GatewayServer, idp: IdentityProvider, shots: Path,
                      tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    require_tools()
    dist = build_app(tmp_path_factory.mktemp("react-signed-in"), signed_in_gateway.url, "",
                     {"VITE_ID_TOKEN_URL": f"{idp.issuer}/token",
                      "VITE_GATEWAY_API_KEY": API_KEY})
    with static_server(dist) as url:
        driver = Browser(url, signed_in_gateway.url, shots / "signed-in-browser.log")
        yield driver
        driver.close()


def sign_in(browser: Browser, idp: IdentityProvider, user: str, **extra: Any) -> dict[str, Any]:
    idp.signed_in = user
    result = browser.step("open", until={"response": "/oauth/token"}, **extra)
    exchanges = [r for r in result["requests"] if r["path"] == "/oauth/token"
                 and r["method"] == "POST"]
    assert exchanges and exchanges[-1]["status"] == 200, result["requests"]
    return result


def test_signed_in_user_sends_lists_attaches_and_dictates_and_others_cannot_see_it(
        signed_in_browser: Browser, idp: IdentityProvider, scripted_model: ScriptedModel,
        shots: Path, tmp_path: Path) -> None:
    browser = signed_in_browser
    sign_in(browser, idp, "alice")

    # 1. Send: the run goes out with the bearer token and no userKey.
    scripted_model.enqueue(stream_turn({"content": "Hello, Alice."}))
    sent = browser.step("send", text="hi, I am signed in", until={"text": "Hello, Alice."},
                        screenshot=str(shots / "signed-in-1-sent.png"))
    page = clean(sent)
    thread_id = page["threadId"]
    run = next(r for r in sent["requests"] if r["path"] == "/v1/threads/runs")
    assert "userKey" not in run["query"] and '"userKey"' not in (run["body"] or "")

    # 2. Her thread list (GET /v1/threads with her token) holds the thread.
    listed = clean(browser.step("wait", until={"listed": thread_id}))
    assert listed["threads"] == [thread_id]

    # 3. Attach an image and send: the model receives it as an image part.
    image = tmp_path / "dot.png"
    image.write_bytes(PNG)
    attached = clean(browser.step("attach", file=str(image), until={"text": "dot.png"}))
    assert attached["attachments"] and "dot.png" in attached["attachments"][0]
    scripted_model.enqueue(stream_turn({"content": "A single dot."}))
    clean(browser.step("send", text="what is in the picture?", until={"text": "A single dot."},
                       screenshot=str(shots / "signed-in-2-image.png")))
    user_message = streaming_requests(scripted_model)[-1]["messages"][-1]
    assert user_message["role"] == "user"
    parts = user_message["content"]
    assert {"type": "text", "text": "what is in the picture?"} in parts
    images = [p for p in parts if p["type"] == "image_url"]
    assert len(images) == 1
    prefix = "data:image/png;base64,"
    assert images[0]["image_url"]["url"].startswith(prefix)
    assert base64.b64decode(images[0]["image_url"]["url"][len(prefix):]) == PNG

    # 4. Dictate: the fake microphone records, useTamboVoice posts it, the transcript is typed.
    scripted_model.enqueue_transcript("show me the weather in Oslo")
    clean(browser.step("click", selector='[data-testid="mic"]',
                       until={"text": "Stop dictation", "idle": False}))
    dictated = clean(browser.step("click", selector='[data-testid="mic"]',
                                  until={"input": "show me the weather in Oslo"}))
    assert dictated["input"] == "show me the weather in Oslo"
    heard = scripted_model.transcriptions[-1]
    assert heard["model"] == "whisper-1" and heard["size"] > 0
    assert heard["contentType"] == "audio/webm"

    # 5. Bob signs in on his own browser: no threads, and Alice's thread (even if his browser
    #    were told its id) is not found for him.
    bob = sign_in(browser, idp, "bob",
                  localStorage={"gateway-example:thread:signed-in": thread_id})
    later = browser.step("wait", until={"text": "No threads yet"},
                         screenshot=str(shots / "signed-in-3-other-user.png"))
    fetched = [r for r in bob["requests"] + later["requests"]
               if r["path"] == f"/v1/threads/{thread_id}" and r["method"] == "GET"]
    assert fetched and all(r["status"] == 404 for r in fetched), fetched
    assert later["page"]["threads"] == []
    assert not any("Hello, Alice." in m["text"] for m in later["page"]["messages"])
