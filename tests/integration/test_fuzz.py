"""Schema-driven fuzzing: schemathesis reads `openapi/openapi.json` and attacks a live gateway.

The gateway is a real process on loopback with API keys configured (so requests without a key
must be refused) and the scripted model behind litellm: a valid run request streams the model's
default echo turn, and schemathesis checks every SSE event against `TamboEvent`. Every
schemathesis check is on, with one replacement: a schema can say which requests are well formed
but not which ones the server's state allows (an opaque cursor that is not ours, a
`previousRunId` that is not the last run, a JSON Patch whose path does not exist). So instead of
`positive_data_acceptance` (any 400 for schema-valid input is a failure) this suite fails when
schema-valid input is refused *as invalid input* (`VALIDATION_ERROR`, `INVALID_JSON`), and lets a
documented, state-dependent code through; the response must still match the document.

Bounded: a fixed seed (`GATEWAY_FUZZ_SEED` to explore others), a number of examples per
operation and a timeout (generous: it stops a stuck run, it does not measure one, and a busy
machine takes several times a quiet one's 70-150 s); at least 1,000 requests must have been made.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from schemathesis.engine import Status
from schemathesis.engine import events as st_events

from tests.conftest import scripted_env
from tests.support.gateway_server import GatewayServer
from tests.support.scripted_model import ScriptedModel

# The schema the responses must match does not depend on the backend.
pytestmark = pytest.mark.sqlite_only

ROOT = Path(__file__).resolve().parents[2]
API_KEY = "fuzz-key"
MIN_REQUESTS = 1000
EXAMPLES_PER_OPERATION = 5
TIMEOUT_SECONDS = 900
# Rejections that only input the schema calls invalid may get.
SCHEMA_REJECTIONS = frozenset({"VALIDATION_ERROR", "INVALID_JSON"})


@schemathesis.check
def schema_valid_input_passes_validation(ctx: Any, response: Any, case: Any) -> bool | None:
    """Input generated as valid must never be refused as malformed."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or not 400 <= response.status_code < 500:
        return None
    try:
        body = response.json()
    except ValueError:  # not JSON
        body = None
    code = body.get("code") if isinstance(body, dict) else None
    if code in SCHEMA_REJECTIONS:
        raise AssertionError(f"schema-valid input was refused as {code}: {body.get('detail')}")
    return None


@pytest.fixture(scope="module")
def fuzz_gateway(scripted_model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[GatewayServer]:
    server = GatewayServer(tmp_path_factory.mktemp("fuzz-gateway"),
                           scripted_env(scripted_model, GATEWAY_API_KEYS=API_KEY))
    server.start()
    yield server
    server.stop()


def fuzz_config(base_url: str) -> schemathesis.Config:
    return schemathesis.Config.from_dict({
        "seed": int(os.environ.get("GATEWAY_FUZZ_SEED", "20261122")),
        "output": {"sanitization": {"enabled": False}},  # a loopback server and a test key
        "base-url": base_url,
        "headers": {"x-api-key": API_KEY},
        "continue-on-failure": True,
        "request-timeout": 30,
        # No example database: the seed alone decides what is generated.
        "generation": {"max-examples": EXAMPLES_PER_OPERATION, "mode": "all", "database": "none"},
        "checks": {"positive_data_acceptance": {"enabled": False}},
    })


def failures_of(recorder: Any) -> list[str]:
    found = []
    for checks in recorder.checks.values():
        for check in checks:
            if check.status == Status.FAILURE and check.failure_info is not None:
                failure = check.failure_info.failure
                found.append(f"{recorder.label}: {failure.title}: {failure.message}\n"
                             f"  {check.failure_info.code_sample}")
    return found


@pytest.mark.timeout(TIMEOUT_SECONDS)
def test_schemathesis_finds_no_server_error_and_no_schema_violation(
        fuzz_gateway: GatewayServer) -> None:
    schema = schemathesis.openapi.from_path(ROOT / "openapi" / "openapi.json",
                                            config=fuzz_config(fuzz_gateway.url))
    requests, failures, errors = 0, [], []
    for event in schemathesis.engine.from_schema(schema).execute():
        if isinstance(event, (st_events.ScenarioFinished, st_events.FuzzScenarioFinished)):
            requests += len(event.recorder.interactions)
            failures += failures_of(event.recorder)
        elif isinstance(event, (st_events.NonFatalError, st_events.FatalError)):
            errors.append(repr(getattr(event, "value", None) or event.exception))
    unique = sorted(set(failures))
    print(f"schemathesis made {requests} requests")
    assert not errors, "schemathesis could not run:\n" + "\n".join(errors)
    assert not unique, f"{len(unique)} failures in {requests} requests:\n" + "\n\n".join(unique)
    assert requests >= MIN_REQUESTS, f"only {requests} requests were generated"
    assert "Traceback" not in fuzz_gateway.log(), "the gateway logged a stack trace"
