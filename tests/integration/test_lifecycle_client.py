"""Cancel with the real `@tambo-ai/client` (`cancelRun`), in Node, against a real gateway."""

from __future__ import annotations

import httpx
import pytest

from tests.support.gateway_server import GatewayServer
from tests.support.node import have_node, run_scenario
from tests.support.run_stream import slow_turn
from tests.support.scripted_model import ScriptedModel

pytestmark = pytest.mark.skipif(not have_node(), reason="node/npm not installed")


def streamed(steps: list[dict]) -> dict:
    """A turn only the agent loop's streaming call takes (not a thread-name request)."""
    return {"steps": steps, "stream": True}


def test_cancel_run_from_the_tambo_client(gateway_process: GatewayServer,
                                          process_client: httpx.Client,
                                          scripted_model: ScriptedModel):
    gateway, client = gateway_process, process_client  # Node's client needs a port
    scripted_model.enqueue(
        streamed(slow_turn(400, 0.05)), streamed([{"content": "After the first cancel."}]),
        streamed(slow_turn(400, 0.05)), streamed([{"content": "After the second cancel."}]),
    )
    result = run_scenario("cancel", gateway.url,
                          MODEL_URL=scripted_model.base_url.removesuffix("/v1"))
    assert "crash" not in result, result

    # A new-thread run: the client only sent the DELETE; the gateway ended the stream.
    new = result["newThread"]
    assert new["eventTypes"][-1] == "RUN_ERROR", new
    assert new["lastRunCancelled"] is True, new
    # An existing-thread run: the client aborted its stream itself, and sent the DELETE.
    existing = result["existingThread"]
    assert existing["rejected"] is not None, existing
    for cancelled in (new, existing):
        # The scenario waits 10 s for the model to see its stream closed, half the 20 s the
        # turn would stream: seen, it was cut by the cancel (how soon is bench/'s to measure).
        assert cancelled["upstreamClosedMs"] is not None, "the model's stream was never closed"

    # After each cancel the thread is idle and takes the next run.
    assert result["afterNewThread"]["rejected"] is None, result["afterNewThread"]
    assert result["afterExistingThread"]["rejected"] is None, result["afterExistingThread"]
    assert result["afterExistingThread"]["eventTypes"][-1] == "RUN_FINISHED"

    thread_id = result["threadId"]
    runs = client.get(f"/v1/threads/{thread_id}/runs",
                      params={"userKey": "user-1"}).json()["runs"]
    assert [r["status"] for r in runs] == ["completed", "cancelled", "completed", "cancelled"]
    messages = client.get(f"/v1/threads/{thread_id}/messages").json()["messages"]
    texts = [b["text"] for m in messages if m["role"] == "assistant" for b in m["content"]]
    assert texts[1] == "After the first cancel." and texts[3] == "After the second cancel."
    assert [m.get("isCancelled", False) for m in messages if m["role"] == "assistant"] == [
        True, False, True, False]
