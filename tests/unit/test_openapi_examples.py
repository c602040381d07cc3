"""Every operation of the OpenAPI document shows a request and a response example, and every
example is valid against the schema next to it (so `/docs` never shows a shape the server does
not accept or send)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from gateway.openapi.document import build

DOCUMENT = build()
OPERATIONS = [(path, method, op) for path, methods in DOCUMENT["paths"].items()
              for method, op in methods.items()]


def _errors(schema: dict[str, Any], value: Any) -> list[str]:
    root = {**schema, "components": DOCUMENT["components"]}
    return [f"{list(e.absolute_path)}: {e.message}"
            for e in Draft202012Validator(root).iter_errors(value)]


def _sse_events(text: str) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for block in text.split("\n\n"):
        if not block:
            continue
        fields = dict(line.split(": ", 1) for line in block.split("\n"))
        events.append((fields["id"], json.loads(fields["data"])))
    return events


@pytest.mark.parametrize("path, method, op", OPERATIONS, ids=[o["operationId"]
                                                              for _, _, o in OPERATIONS])
def test_operation_has_valid_examples(path: str, method: str, op: dict[str, Any]) -> None:
    body = op.get("requestBody", {}).get("content", {}).get("application/json")
    if body is not None:
        assert "example" in body, f"{op['operationId']}: no request example"
        assert not _errors(body["schema"], body["example"]), _errors(body["schema"],
                                                                     body["example"])
    for param in op["parameters"]:
        if param["in"] == "path":
            assert "example" in param, f"{op['operationId']}: no example for {param['name']}"
    shown = 0
    for status, response in op["responses"].items():
        for media, content in response.get("content", {}).items():
            if int(status) >= 400 or media in ("application/json", "text/html"):
                assert "example" in content, f"{op['operationId']} {status} {media}: no example"
            if "example" not in content:
                continue
            shown += 1
            if media == "text/event-stream":
                events = _sse_events(content["example"])
                assert [int(i) for i, _ in events] == list(range(1, len(events) + 1))
                sse_message = content["schema"]["$ref"].rsplit("/", 1)[-1]
                event_schema = DOCUMENT["components"]["schemas"][sse_message]["properties"][
                    "data"]["contentSchema"]
                for _, event in events:
                    assert not _errors(event_schema, event), (event, _errors(event_schema, event))
            else:
                problems = _errors(content["schema"], content["example"])
                assert not problems, f"{op['operationId']} {status}: {problems}"
    if op["operationId"] != "deleteThread":
        assert shown, f"{op['operationId']}: no response example"


def test_summaries_are_plain_text() -> None:
    """API reference viewers show an operation's summary as it is (only descriptions are
    markdown), so a backtick there is shown literally."""
    marked = [op["operationId"] for _, _, op in OPERATIONS if "`" in op.get("summary", "")]
    assert marked == []

