"""Server tools for the component state tests (`GATEWAY_TOOLS=tests/support/component_tools.py`).

`load_users` is the proposal's example 5.6: a slow data fetch that streams rows into the table
component the model has just rendered, through the same state path the REST route uses.
"""

from __future__ import annotations

from gateway import run_components, server_tool


@server_tool
async def load_users(count: int) -> str:
    """Load `count` users into the Table component on screen."""
    components = run_components()
    table = await components.latest("Table")
    if table is None:
        return "There is no Table component to fill."
    await components.update(table.component_id,
                            state={"loading": True, "rows": [], "totalCount": count})
    for number in range(1, count + 1):
        await components.update(table.component_id, patch=[
            {"op": "add", "path": "/rows/-", "value": {"id": number, "name": f"user {number}"}}])
    _, revision = await components.update(
        table.component_id, patch=[{"op": "replace", "path": "/loading", "value": False}])
    return f"Loaded {count} users (revision {revision})."
