"""Table rows made for a Core INSERT, without the ORM's attribute events.

`RunRow(id=..., ...)` sets each field through SQLModel's `__setattr__`, which goes through
SQLAlchemy's instrumented attribute (an event and a history record per field) and then
pydantic's, for each field, and a run's start builds four rows (thread, run, input, answer)
(docs/decisions/0023-rows-without-orm-events.md has the measurement). Table models are not
validated by SQLModel either way, so `made` builds the same object the way SQLAlchemy builds a
row it loads: a new instance from the class manager, its fields written into its `__dict__`
with the model's defaults for those not given. Such a row reads, compares and serialises as a
constructed one; an attribute set on it later goes through the usual events; added to a
session, its INSERT takes its values from the same `__dict__`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any, TypeVar

from sqlalchemy.orm import configure_mappers, instrumentation
from sqlmodel import SQLModel

M = TypeVar("M", bound=SQLModel)


@cache
def _defaults(model: type[SQLModel]) -> tuple[dict[str, Any], dict[str, Callable[[], Any]],
                                               frozenset[str]]:
    """The model's plain defaults, its default factories, and its required fields (first
    making sure SQLAlchemy has set up the model's attributes: no ORM query does it here)."""
    configure_mappers()
    plain: dict[str, Any] = {}
    factories: dict[str, Callable[[], Any]] = {}
    required = set()
    for name, field in model.model_fields.items():
        if field.default_factory is not None:
            factories[name] = field.default_factory  # type: ignore[assignment]
        elif field.is_required():
            required.add(name)
        else:
            plain[name] = field.default
    return plain, factories, frozenset(required)


def made(model: type[M], /, **values: Any) -> M:
    """A new `model` row with `values` (see the module's docstring); a required field left
    out, or a name the model does not have, is a `TypeError`."""
    plain, factories, required = _defaults(model)
    if not required <= values.keys() or not values.keys() <= model.model_fields.keys():
        missing = sorted(required - values.keys())
        unknown = sorted(values.keys() - model.model_fields.keys())
        raise TypeError(f"{model.__name__}: missing {missing}, unknown {unknown}")
    row: M = instrumentation.manager_of_class(model).new_instance()
    fields = row.__dict__
    fields.update(plain)
    for name, factory in factories.items():
        if name not in values:
            fields[name] = factory()
    fields.update(values)
    object.__setattr__(row, "__pydantic_fields_set__", set(values))
    return row
