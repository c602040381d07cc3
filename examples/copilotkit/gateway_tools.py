"""A server tool for this example: the gateway runs it, the page only shows the call.

Start the gateway with `GATEWAY_TOOLS=examples/copilotkit/gateway_tools.py`. The weather is
made up (the example has no network to ask); what matters is where it runs: on the gateway,
whose AG-UI stream carries the call and its result (`TOOL_CALL_*`, `TOOL_CALL_RESULT`) for
CopilotKit to render.
"""

from gateway import server_tool

_SKIES = ["sunny", "cloudy", "rainy", "windy"]


@server_tool
def get_weather(city: str) -> dict:
    """Today's weather in a city."""
    seed = sum(map(ord, city.lower()))
    return {"city": city, "sky": _SKIES[seed % len(_SKIES)], "celsius": 8 + seed % 20}
