"""Server-side tools written as Python functions, loaded once at start-up.

`GATEWAY_TOOLS` names a module (`package.module`) or a file (`path/to/tools.py`). Every function
it lists in `TOOLS`, or marks with `@server_tool`, becomes a tool the model can call; its JSON
Schema comes from the type hints (through pydantic), and the model's arguments are validated
against the same schema before the function runs, so a bad call is an error result the model can
correct rather than a crash. Synchronous functions run in a worker thread so they never block
the event loop that streams every other run.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import inspect
import sys
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, ValidationError, create_model

from ..loop import ServerToolSpec, ToolError
from .approval_rules import predicate_rule
from .context import ToolContext, tool_context

__all__ = ["ToolContext", "ToolError", "load_python_tools", "server_tool", "spec_for",
           "tool_context"]

_MARK = "__gateway_tool__"


def server_tool(fn: Callable[..., Any] | None = None, *, name: str | None = None,
                description: str | None = None,
                approval: bool | Callable[[Mapping[str, Any]], Any] = False) -> Any:
    """Mark a function as a server tool (usable bare or with arguments). With `approval=True`
    a call to it pauses the run until a human approves it (docs/human-in-the-loop.md); with a
    predicate on the call's arguments (`approval=lambda args: args["amount"] > 100`), only
    the calls it is true for (or fails on) wait."""

    def mark(func: Callable[..., Any]) -> Callable[..., Any]:
        setattr(func, _MARK, {"name": name, "description": description, "approval": approval})
        return func

    return mark(fn) if fn is not None else mark


def spec_for(func: Callable[..., Any], name: str | None = None,
             description: str | None = None,
             approval: bool | Callable[[Mapping[str, Any]], Any] = False) -> ServerToolSpec:
    """Build a tool spec from a function's signature and docstring. A parameter annotated
    `ToolContext` is not an argument: it is given the run's context (`tool_context`)."""
    fields: dict[str, Any] = {}
    hints = _hints(func)
    context_params = [p for p, hint in hints.items() if hint is ToolContext]
    for param in inspect.signature(func).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or param.name in context_params:
            continue
        annotation = Any if param.annotation is inspect.Parameter.empty else param.annotation
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (annotation, default)
    arguments_model = create_model(f"{func.__name__}_arguments",
                                   __config__=ConfigDict(extra="forbid"), **fields)
    schema = arguments_model.model_json_schema()
    schema.pop("title", None)
    is_async = inspect.iscoroutinefunction(func)

    async def call(arguments: dict[str, Any]) -> Any:
        try:
            parsed = arguments_model.model_validate(arguments)
        except ValidationError as exc:
            raise ToolError(f"invalid arguments: {exc.errors(include_url=False)}") from None
        values = {key: getattr(parsed, key) for key in fields}
        values.update({param: tool_context() for param in context_params})
        if is_async:
            return await func(**values)
        return await asyncio.to_thread(func, **values)

    doc = inspect.getdoc(func) or ""
    return ServerToolSpec(name=name or func.__name__,
                          description=description or doc.split("\n\n")[0] or func.__name__,
                          parameters=schema, call=call, approval=bool(approval),
                          approval_rule=None if isinstance(approval, bool)
                          else predicate_rule(approval))


def _hints(func: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(func)
    except (NameError, TypeError):  # a hint that does not resolve is no context parameter
        return {}


def tool_specs(source: str | Callable[..., Any] | ServerToolSpec) -> list[ServerToolSpec]:
    """The tools one entry of an agent's `tools` names: `"package.module:name"` (a function, or
    a list of them), a module or file as `GATEWAY_TOOLS` takes, a function, or a spec."""
    if isinstance(source, ServerToolSpec):
        return [source]
    if callable(source):
        return [_marked_spec(source)]
    module_name, colon, attribute = source.rpartition(":")
    if not colon or "/" in attribute or "\\" in attribute:  # a module, or a file's path
        return list(load_python_tools(source).values())
    value = getattr(_import(module_name), attribute)
    functions = value if isinstance(value, (list, tuple)) else [value]
    for func in functions:
        if not callable(func):
            raise TypeError(f"{source} is not a function or a list of functions")
    return [_marked_spec(func) for func in functions]


def _marked_spec(func: Callable[..., Any]) -> ServerToolSpec:
    options = getattr(func, _MARK, {})
    approval = options.get("approval", False)
    return spec_for(func, options.get("name"), options.get("description"),
                    approval if callable(approval) else bool(approval))


def load_python_tools(target: str) -> dict[str, ServerToolSpec]:
    """Import the tools module and collect its tools; a broken module stops start-up loudly."""
    module = _import(target)
    functions: list[Callable[..., Any]] = list(getattr(module, "TOOLS", []))
    functions += [obj for obj in vars(module).values()
                  if callable(obj) and hasattr(obj, _MARK) and obj not in functions]
    specs: dict[str, ServerToolSpec] = {}
    for func in functions:
        spec = _marked_spec(func)
        if spec.name in specs:
            raise ValueError(f"two server tools are named {spec.name!r} in {target}")
        specs[spec.name] = spec
    if not specs:
        raise ValueError(f"{target} defines no tools: list them in TOOLS or use @server_tool")
    return specs


def _import(target: str) -> Any:
    path = Path(target)
    if target.endswith(".py") or path.is_file():
        spec = importlib.util.spec_from_file_location(f"gateway_tools_{path.stem}", path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load tools from {target}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    return importlib.import_module(target)
