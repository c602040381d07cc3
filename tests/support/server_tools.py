"""Server tools used by the tests (loaded by a gateway with GATEWAY_TOOLS=<this file>)."""

import time

from gateway import ToolContext, server_tool


@server_tool
def add(a: int, b: int) -> dict:
    """Add two integers."""
    return {"sum": a + b}


@server_tool(description="Look up a city's population")
async def population(city: str) -> str:
    return f"{city} has 2,100,000 inhabitants"


@server_tool
def explode(reason: str = "because") -> None:
    """Always fails."""
    raise RuntimeError(f"tool exploded {reason}")


@server_tool
def sleepy() -> str:
    """Takes longer than the tool timeout."""
    time.sleep(5)
    return "late"


@server_tool(approval=True)
def place_order(item: str) -> str:
    """Place an order (asks a human first)."""
    return f"ordered {item}"


@server_tool
async def survey(sources: int, caller: ToolContext) -> str:
    """Search some sources, saying which one it is on (a `status` per source)."""
    for n in range(1, sources + 1):
        await caller.status(f"Searching source {n} of {sources}", state="searching")
    return f"searched {sources} sources"


@server_tool
async def set_language(language: str, caller: ToolContext) -> str:
    """Switch the conversation's language (the thread's shared state, `ctx.state`)."""
    state = await caller.state.update(patch=[{"op": "add", "path": "/language",
                                              "value": language}])
    return f"language is {state['language']}"
