"""`openapi/` and `schemas/` are generated, so they must be fresh, complete and well formed.

If a test here fails after you changed a model, a route or an event: run `gateway openapi` (from
the repository root) and commit what it wrote.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from jsonschema import Draft202012Validator
from schemathesis.specs.openapi.definitions import OPENAPI_31_VALIDATOR

from gateway.app import create_app
from gateway.config import Settings
from gateway.openapi.document import build
from gateway.openapi.schema_gen import COMMAND, generated_files, route_mismatches, stale_files
from gateway.protocol.jsonschema import canonical
from gateway.protocol.tambo import NOT_BLANK, TokenExchangeRequest

ROOT = Path(__file__).resolve().parents[2]
# Pydantic constraint names that are not JSON Schema keywords: one in the output means a
# constraint was lost (it would be ignored by every validator and client generator).
PYDANTIC_ONLY = {"gt", "ge", "lt", "le", "min_length", "max_length", "multiple_of", "strict"}


def test_checked_in_documents_are_fresh() -> None:
    stale = stale_files(ROOT)
    assert not stale, f"stale generated files: {stale}; run `{COMMAND}` and commit the result"


def test_every_route_has_an_operation_and_every_operation_a_route() -> None:
    problems = route_mismatches(create_app(Settings()).routes)
    assert not problems, "\n".join(problems) + "\nadd or remove the entry in gateway/openapi/spec.py"


def test_generation_is_canonical_and_deterministic() -> None:
    first, second = generated_files(), generated_files()
    assert first == second
    for path, text in first.items():
        if not path.endswith(".json"):
            continue
        assert text == canonical(json.loads(text)), f"{path} is not in canonical form"
        assert text.endswith("}\n")


def test_the_document_is_valid_openapi_3_1() -> None:
    document = build()
    errors = [f"{list(e.instance_path)}: {e.message}"
              for e in OPENAPI_31_VALIDATOR.iter_errors(document)]
    assert not errors, "\n".join(errors[:20])
    for name, schema in document["components"]["schemas"].items():
        Draft202012Validator.check_schema(schema)
        leaked = _keys(schema) & PYDANTIC_ONLY
        assert not leaked, f"{name} has non-JSON-Schema keywords {leaked}"


def _keys(node: object, parent: str = "") -> set[str]:
    """Keywords used in a schema (property names under `properties` are not keywords)."""
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if parent != "properties":
                found.add(key)
            found |= _keys(value, key)
    elif isinstance(node, list):
        for value in node:
            found |= _keys(value)
    return found


def test_not_blank_means_what_str_strip_keeps() -> None:
    pattern = re.compile(NOT_BLANK)
    disagree = [hex(c) for c in range(0x110000)
                if bool(pattern.fullmatch(chr(c))) == chr(c).isspace()]
    assert not disagree


def test_a_subject_token_the_gateway_strips_to_nothing_is_documented_as_invalid() -> None:
    """`POST /oauth/token` strips the token and refuses a blank one (VALIDATION_ERROR): the
    document must say so, or a generated `subject_token=%1D` (U+001D, whitespace to Python)
    is schema-valid input refused as malformed (the fuzzer found it with seed 3)."""
    schema = TokenExchangeRequest.model_json_schema()["properties"]["subject_token"]
    assert schema["pattern"] == NOT_BLANK
    assert re.search(schema["pattern"], "\x1d") is None
    assert re.search(schema["pattern"], " eyJ.x.y\n") is not None
