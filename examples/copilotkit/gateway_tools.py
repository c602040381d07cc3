"""Server tools for this example: the gateway runs them, the page only shows the calls.

Start the gateway with `GATEWAY_TOOLS=examples/copilotkit/gateway_tools.py`. The weather is
made up (the example has no network to ask); what matters is where it runs: on the gateway,
whose AG-UI stream carries the call and its result (`TOOL_CALL_*`, `TOOL_CALL_RESULT`) for
CopilotKit to render.

`send_invoice` needs the user's approval (`approval=True`): when the model calls it the run
stops before it runs, the page shows an Approve / Deny card (`useInterrupt`), and the tool runs
only once the user approves. Its "billing system" is a dict keyed by the call's idempotency
key, as a real one would be keyed by it (docs/human-in-the-loop.md, "Exactly once").
"""

from gateway import ToolContext, server_tool

_SKIES = ["sunny", "cloudy", "rainy", "windy"]
_INVOICES: dict[str, dict] = {}  # invoices sent, by the call's idempotency key


@server_tool
def get_weather(city: str) -> dict:
    """Today's weather in a city."""
    seed = sum(map(ord, city.lower()))
    return {"city": city, "sky": _SKIES[seed % len(_SKIES)], "celsius": 8 + seed % 20}


@server_tool(approval=True)
def send_invoice(ctx: ToolContext, customer: str, amount_eur: int) -> dict:
    """Send an invoice to a customer (the user approves it first)."""
    invoice = _INVOICES.setdefault(ctx.idempotency_key, {
        "number": f"INV-{len(_INVOICES) + 1:04d}", "customer": customer, "amountEur": amount_eur})
    return {"sent": True, **invoice}
