"""Server tools written as Python functions: schema from type hints, arguments validated before
the function runs, sync functions off the event loop, loading from a file."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from gateway import ToolError, server_tool
from gateway.engine.tools.python_tools import load_python_tools, spec_for


@server_tool
def lookup(order_id: str, verbose: bool = False) -> dict:
    """Look up an order.

    More text the model does not need."""
    return {"order_id": order_id, "verbose": verbose, "thread": threading.current_thread().name}


async def test_schema_comes_from_the_hints_and_arguments_are_checked() -> None:
    spec = spec_for(lookup)
    assert spec.description == "Look up an order."
    assert spec.parameters["required"] == ["order_id"]
    assert spec.parameters["properties"]["verbose"]["type"] == "boolean"
    assert spec.parameters["additionalProperties"] is False
    result = await spec.call({"order_id": "o-1"})
    assert result["order_id"] == "o-1" and result["thread"] != threading.main_thread().name
    for bad in ({}, {"order_id": 5}, {"order_id": "o", "extra": 1}):
        with pytest.raises(ToolError, match="invalid arguments"):
            await spec.call(bad)


def test_tools_load_from_a_file_and_a_file_without_tools_is_refused(tmp_path: Path) -> None:
    good = tmp_path / "tools.py"
    good.write_text("from gateway import server_tool\n\n"
                    "@server_tool(name='add_numbers')\n"
                    "def add(a: int, b: int) -> int:\n    '''Add.'''\n    return a + b\n")
    assert list(load_python_tools(str(good))) == ["add_numbers"]
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    with pytest.raises(ValueError, match="defines no tools"):
        load_python_tools(str(empty))
