"""What an app on the real `@tambo-ai/client` sees when a gateway process is at capacity.

The process refuses a new run with 503 `OVERLOADED` and `Retry-After` before any event
(tests/integration/test_overload.py checks the response itself). The client does not retry
(`maxRetries` is 0 in both Tambo clients), so the app gets the run's rejection, naming the
code, and its thread state shows no run streaming; once capacity frees, the same client's
next run answers. The refusal is the process's own, before the store: SQLite only.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import scripted_env
from tests.support.gateway_server import GatewayServer
from tests.support.node import have_node, run_scenario
from tests.support.scripted_model import ScriptedModel

pytestmark = [pytest.mark.skipif(not have_node(), reason="node and npm are needed"),
              pytest.mark.sqlite_only]


@pytest.fixture(scope="module")
def one_run_gateway(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
                    ) -> Iterator[GatewayServer]:
    """A gateway process that carries one run at a time."""
    server = GatewayServer(tmp_path_factory.mktemp("one-run"),
                           scripted_env(scripted_model, GATEWAY_MAX_ACTIVE_RUNS="1"))
    server.start()
    yield server
    server.stop()


def test_a_refused_run_reaches_the_app_as_a_rejection_and_the_next_run_answers(
        one_run_gateway: GatewayServer, scripted_model: ScriptedModel) -> None:
    scripted_model.enqueue([{"content": "Once "}, {"slow": {"count": 400, "interval": 0.05}}],
                           [{"content": "Admitted."}])
    result = run_scenario("overloaded", one_run_gateway.url)

    assert "crash" not in result, result
    refused = result["refused"]
    assert refused["runIds"] == [] and refused["eventTypes"] == []  # not one event
    rejection = refused["rejected"]
    assert rejection["status"] == 503 and rejection["code"] == "OVERLOADED", rejection
    assert "at capacity" in rejection["message"], rejection  # what the app can show
    assert refused["streamingRunId"] is None  # nothing left streaming in the app's state

    held = result["held"]
    assert held["eventTypes"][-1] == "RUN_ERROR" and held["lastRunCancelled"] is True

    after = result["after"]
    assert after["rejected"] is None and after["error"] is None, after
    assert after["status"] == "idle"
    assert "".join(b.get("text", "") for b in after["messages"][-1]["content"]) == "Admitted."
