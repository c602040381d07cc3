"""Headers every HTTP response carries, whatever its type: JSON, problem+json and streams (the
app in the test process)."""

from __future__ import annotations

import httpx
import pytest

from tests.support.gateway_server import DEFAULT_USER
from tests.support.scripted_model import ScriptedModel

# Headers the app adds to every response, whatever stored what.
pytestmark = pytest.mark.sqlite_only

MESSAGE = {"role": "user", "content": [{"type": "text", "text": "hello"}]}


def test_every_response_tells_browsers_not_to_sniff_its_type(client: httpx.Client,
                                                              scripted_model: ScriptedModel):
    """A body a client wrote into (a message, a thread name) is never taken for a page or a
    script, whatever the browser would guess from it."""
    scripted_model.enqueue([{"content": "<script>alert(1)</script>"}])
    with client.stream("POST", "/v1/threads/runs", headers={"accept": "text/event-stream"},
                       json={"message": MESSAGE, "thread": {"userKey": DEFAULT_USER}}) as sse:
        body = sse.read().decode()
    assert sse.headers["content-type"].startswith("text/event-stream")
    thread_id = body.split('"threadId":"', 1)[1].split('"', 1)[0]

    thread = client.get(f"/v1/threads/{thread_id}")
    assert thread.headers["content-type"].startswith("application/json")
    unknown = client.get("/v1/threads/thr_unknown")
    assert unknown.headers["content-type"].startswith("application/problem+json")
    log = client.get(f"/v1/timbal/threads/{thread_id}")
    assert log.headers["content-type"].startswith("application/x-ndjson")

    for response in (sse, thread, unknown, log):
        assert response.headers["x-content-type-options"] == "nosniff", response.request.url
