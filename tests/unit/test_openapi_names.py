"""The OpenAPI document names each schema after its model, so two models of one name would
share one schema: the later replaces the earlier, silently (the AG-UI thread list's first
`ThreadList` replaced the Tambo list's). Every model an operation takes or answers has a name
of its own."""

from __future__ import annotations

from pydantic import BaseModel

from gateway.openapi.document import all_operations


def test_no_two_operation_models_share_a_name() -> None:
    named: dict[str, type[BaseModel]] = {}
    for op in all_operations():
        for model in (op.body, op.result, op.error_model):
            if not (isinstance(model, type) and issubclass(model, BaseModel)):
                continue
            first = named.setdefault(model.__name__, model)
            assert first is model, (f"{model.__module__}.{model.__name__} and "
                                    f"{first.__module__}.{first.__name__} share a schema name")
