"""JSON Schema from our wire types, the one way both `openapi/` and `schemas/` are produced.

Generated documents are checked in and compared byte for byte with a fresh generation (CI), so
the output must be canonical: sorted keys, two-space indent, a newline at the end.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import TypeAdapter
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


class WireSchema(GenerateJsonSchema):
    """Pydantic's generator, minus the noise client generators trip on.

    Field titles ("Threadid") are dropped: generators name types after titles. A discriminator
    whose mapping points at an inline schema (a nested discriminated union, such as CUSTOM events
    under `type`) is dropped too: OpenAPI requires the mapping to hold references, and `oneOf`
    with `const` tags already says everything.
    """

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def generate_definitions(self, inputs: Any) -> Any:
        mapping, defs = super().generate_definitions(inputs)
        for value in [*mapping.values(), *defs.values()]:
            _drop_inline_discriminators(value)
        return mapping, defs


def _drop_inline_discriminators(node: Any) -> None:
    if isinstance(node, dict):
        discriminator = node.get("discriminator")
        if isinstance(discriminator, dict) and not all(
                isinstance(v, str) for v in discriminator.get("mapping", {}).values()):
            del node["discriminator"]
        for value in node.values():
            _drop_inline_discriminators(value)
    elif isinstance(node, list):
        for value in node:
            _drop_inline_discriminators(value)


def definitions(types: Sequence[tuple[str, Any, JsonSchemaMode]], ref_template: str
                ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Schemas of named types sharing one set of definitions.

    Returns (name -> schema, which is usually a `$ref`; definition name -> schema).
    """
    inputs = [(name, mode, TypeAdapter(tp).core_schema) for name, tp, mode in types]
    mapping, defs = WireSchema(ref_template=ref_template).generate_definitions(inputs)
    return {name: mapping[(name, mode)] for name, _, mode in types}, dict(defs)


def standalone(tp: Any, title: str, description: str = "",
               mode: JsonSchemaMode = "serialization") -> dict[str, Any]:
    """A self-contained JSON Schema document (its definitions under `$defs`) for one type."""
    schema = TypeAdapter(tp).json_schema(mode=mode, schema_generator=WireSchema)
    _drop_inline_discriminators(schema)
    schema.update({"$schema": JSON_SCHEMA_DIALECT, "title": title})
    if description:
        schema["description"] = description
    return schema


def canonical(document: Any) -> str:
    """The one text form of a generated document."""
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
