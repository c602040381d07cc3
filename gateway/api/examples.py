"""A request and a response example per operation, for the OpenAPI document (and so `/docs`).

Written by hand so they read like a real session (one thread, one run, one component), and
checked by a test against the very schemas the document publishes, so an example can never
show a shape the server does not accept or send.
"""

from __future__ import annotations

import json
from typing import Any

THREAD = "thr_01JH8Z3Q4W5E6R7T8Y9V0W1X2Y"
RUN = "run_01JH8Z3R0A1B2C3D4E5F6G7H8J"
PREVIOUS_RUN = "run_01JH8Z2M9K8J7H6G5F4E3D2C1B"
USER_MESSAGE = "01JH8Z3R0B2C3D4E5F6G7H8J9K"
MESSAGE = "01JH8Z3R1C2D3E4F5G6H7J8K9M"
COMPONENT = "comp_01JH8Z3R2D3E4F5G6H7J8K9MN"
CALL = "call_weather_1"
USER_KEY = "user-1"
CREATED = "2026-01-05T10:00:00.000Z"
UPDATED = "2026-01-05T10:00:03.250Z"

PATH_PARAMS = {"threadId": THREAD, "runId": RUN, "messageId": MESSAGE,
               "componentId": COMPONENT, "agent": "default",
               "secret": "chs_q3Jv8c1mZ0xT5nW2bK7yR4pL9dF6hA1s"}
QUERY_PARAMS = {"userKey": USER_KEY, "contextKey": USER_KEY}

_THREAD = {"id": THREAD, "createdAt": CREATED, "updatedAt": UPDATED, "runStatus": "idle",
           "name": "Weather in Paris", "userKey": USER_KEY, "lastCompletedRunId": RUN,
           "pendingToolCallIds": []}
_USER = {"id": USER_MESSAGE, "role": "user", "runId": RUN, "createdAt": CREATED,
         "content": [{"type": "text", "text": "Show me the weather in Paris"}]}
_ASSISTANT = {
    "id": MESSAGE, "role": "assistant", "runId": RUN, "createdAt": UPDATED,
    "reasoning": ["The user wants a weather card for Paris."],
    "content": [{"type": "text", "text": "Here is the weather in Paris."},
                {"type": "component", "id": COMPONENT, "name": "WeatherCard",
                 "props": {"city": "Paris", "temperature": 21}, "state": {"pinned": False}}],
}
_SUGGESTIONS = {"suggestions": [{
    "id": "sug_01JH8Z3S4F5G6H7J8K9M0N1P2Q", "messageId": MESSAGE, "title": "Tomorrow?",
    "detailedSuggestion": "What will the weather be in Paris tomorrow?",
    "description": "What will the weather be in Paris tomorrow?", "createdAt": UPDATED}],
    "hasMore": False}
HTML = "<!doctype html><html lang=\"en\">...</html>"

# operationId -> {"request": body example, "response": success body example}. Operations on the
# beta path share their v1 twin's examples.
EXAMPLES: dict[str, dict[str, Any]] = {
    "health": {"response": {"status": "ok"}},
    "ready": {"response": {"status": "ready", "checks": {"database": "ok"}}},
    "metrics": {"response": "# HELP gateway_active_runs Runs executing in this process.\n"
                            "# TYPE gateway_active_runs gauge\ngateway_active_runs 1.0\n"},
    "openapi": {"response": {"openapi": "3.1.0",
                             "info": {"title": "Gateway API", "version": "0.1.0"},
                             "paths": {"/health": {"get": {"operationId": "health"}}}}},
    "playground": {"response": HTML},
    "docs": {"response": HTML},
    "listAgents": {"response": {
        "version": "0.1.0", "defaultAgent": "support", "audioFileTranscriptionEnabled": False,
        "models": ["gpt-4o-mini", "gpt-4o"],
        "agents": {"support": {"name": "support", "description": "Answers questions about "
                               "orders", "className": "HttpAgent"},
                   "billing": {"name": "billing", "description": "Explains invoices",
                               "className": "HttpAgent"}}}},
    "createThread": {"request": {"metadata": {"topic": "weather"}, "userKey": USER_KEY},
                     "response": {**{k: v for k, v in _THREAD.items()
                                     if k not in ("name", "lastCompletedRunId")},
                                  "metadata": {"topic": "weather"}}},
    "listThreads": {"response": {"threads": [_THREAD], "hasMore": True,
                                 "nextCursor": "WzE3Njc2MDcyMDAwMDAsInRociJd"}},
    "getThread": {"response": {**_THREAD, "messages": [_USER, _ASSISTANT]}},
    "updateThread": {"request": {"name": "Weather in Paris"}, "response": _THREAD},
    "forkThread": {"request": {"messageId": USER_MESSAGE, "userKey": USER_KEY},
                   "response": {**{k: v for k, v in _THREAD.items()
                                   if k not in ("name", "lastCompletedRunId")},
                                "id": "thr_01JH8Z4A5B6C7D8E9F0G1H2J3K",
                                "forkedFrom": {"threadId": THREAD, "messageId": USER_MESSAGE},
                                "messages": [{**_USER, "id": "01JH8Z4A6C7D8E9F0G1H2J3K4M",
                                              "runId": None}]}},
    "deleteThread": {},
    "generateThreadName": {"response": {**_THREAD, "projectId": "default",
                                        "contextKey": USER_KEY}},
    "listMessages": {"response": {"messages": [_USER, _ASSISTANT], "hasMore": False}},
    "getMessage": {"response": _ASSISTANT},
    "listSuggestions": {"response": _SUGGESTIONS},
    "createSuggestions": {"request": {"maxSuggestions": 1, "availableComponents": [
        {"name": "WeatherCard", "description": "The weather of a city."}]},
        "response": _SUGGESTIONS},
    # The beta paths answer with the bare list, as `TamboClient` reads them.
    "listSuggestionsBeta": {"response": _SUGGESTIONS["suggestions"]},
    "createSuggestionsBeta": {"request": {"maxSuggestions": 1},
                              "response": _SUGGESTIONS["suggestions"]},
    "exchangeToken": {
        "request": {"grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
                    "subject_token": "eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIn0.eyJzdWIiOiJ1MSJ9.c2ln",
                    "subject_token_type": "urn:ietf:params:oauth:token-type:access_token"},
        "response": {"access_token": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ1In0.c2ln",
                     "token_type": "Bearer", "expires_in": 900,
                     "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"}},
    "transcribeAudio": {"response": "What will the weather be in Paris tomorrow?"},
    "getComponentState": {"response": {"componentId": COMPONENT, "state": {"pinned": False},
                                       "revision": 0}},
    "updateComponentState": {
        "request": {"patch": [{"op": "replace", "path": "/pinned", "value": True}]},
        "response": {"componentId": COMPONENT, "state": {"pinned": True}, "revision": 1}},
}


def sse(events: list[dict[str, Any]]) -> str:
    """A run stream's text, as a client reads it: events numbered from 1."""
    return "".join(f"id: {n}\ndata: {json.dumps(event, separators=(',', ':'))}\n\n"
                   for n, event in enumerate(events, start=1))


T = 1767607200000  # CREATED in epoch milliseconds


def example_for(operation_id: str, examples: dict[str, dict[str, Any]] = EXAMPLES
                ) -> dict[str, Any]:
    """The examples of an operation (a `...Beta` alias shares its v1 operation's)."""
    return examples.get(operation_id) or examples.get(operation_id.removesuffix("Beta"), {})
