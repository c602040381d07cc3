"""A request and a response example per operation, for the OpenAPI document (and so `/docs`).

Written by hand so they read like a real session (one thread, one run, one component), and
checked by a test against the very schemas the document publishes, so an example can never
show a shape the server does not accept or send.
"""

from __future__ import annotations

from typing import Any

from ..protocol.operations import (
    COMPONENT,
    CREATED,
    EXAMPLE_USER_KEY,
    MESSAGE,
    RUN,
    THREAD,
    UPDATED,
    USER_MESSAGE,
)

PATH_PARAMS = {"threadId": THREAD, "runId": RUN, "messageId": MESSAGE,
               "componentId": COMPONENT, "agent": "default", "keyId": "key_01JH8Z1A2B3C4D5E",
               "secret": "chs_q3Jv8c1mZ0xT5nW2bK7yR4pL9dF6hA1s",
               "cronId": "cron_01JH8Z4C5D6E7F8G9H0J1K2M3N"}
QUERY_PARAMS = {"userKey": EXAMPLE_USER_KEY, "contextKey": EXAMPLE_USER_KEY}

_THREAD = {"id": THREAD, "createdAt": CREATED, "updatedAt": UPDATED, "runStatus": "idle",
           "name": "Weather in Paris", "userKey": EXAMPLE_USER_KEY, "lastCompletedRunId": RUN,
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
_ADMIN_USAGE = {"calls": 1, "inputTokens": 120, "outputTokens": 30, "totalTokens": 150,
                "reasoningTokens": 0, "cachedInputTokens": 0, "costUsd": 0.000036,
                "unpriced": 0, "estimatedCalls": 0}
_ADMIN_KEY = {"id": "key_01JH8Z1A2B3C4D5E", "prefix": "gwk_q3Jv...", "kind": "client",
              "agent": "support", "state": "active", "createdAt": CREATED,
              "expiresAt": "2026-04-05T10:00:00.000Z", "revokedAt": None,
              "lastUsedAt": UPDATED, "maxConcurrentRuns": 2, "runsPerMinute": None,
              "dailyTokens": 200000}
_ADMIN_RUN = {"id": RUN, "threadId": THREAD, "userKey": EXAMPLE_USER_KEY, "agent": "default",
              "model": "gpt-4o-mini", "status": "completed", "apiKeyId": "key_01JH8Z1A2B3C4D5E",
              "createdAt": CREATED, "startedAt": CREATED, "finishedAt": UPDATED,
              "durationMs": 3250, "queuedMs": 0, "error": None, "usage": _ADMIN_USAGE}
_CRON_REQUEST = {"schedule": {"cron": "0 8 * * 1-5", "timezone": "Europe/Paris"},
                 "agent": "default", "userKey": EXAMPLE_USER_KEY,
                 "message": "Summarise yesterday's tickets", "metadata": {"team": "support"},
                 "webhook": "https://hooks.example.com/gateway"}
_CRON = {"id": "cron_01JH8Z4C5D6E7F8G9H0J1K2M3N", **_CRON_REQUEST, "createdAt": CREATED,
         "nextRunAt": "2026-01-06T07:00:00.000Z", "lastRunId": RUN, "runsStarted": 3}

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
    "adminConsole": {"response": HTML},
    "adminListThreads": {"response": {"threads": [{
        "id": THREAD, "name": "Weather in Paris", "userKey": EXAMPLE_USER_KEY, "agent": "default",
        "status": "idle", "currentRunId": None, "waiting": False, "lastRunError": None,
        "createdAt": CREATED,
        "updatedAt": UPDATED}], "hasMore": False}},
    "adminListRuns": {"response": {"runs": [_ADMIN_RUN], "hasMore": False}},
    "adminGetRun": {"response": {**_ADMIN_RUN, "firstTokenMs": 420, "frames": 14}},
    "adminRunFrames": {"response": {"frames": [
        {"seq": 1, "at": CREATED, "frame": {"c": "run.started", "threadId": THREAD,
                                            "runId": RUN}},
        {"seq": 2, "at": "2026-01-05T10:00:00.420Z", "frame": {
            "i": "01JH8Z3R1C2D3E4F5G6H7J8K9N", "a": "Here is"}}],
        "hasMore": True, "nextAfter": 2}},
    "adminUsage": {"response": {
        "project": "default", "by": "user", "since": "2025-12-06T10:00:00.000Z", "until": UPDATED,
        "groups": [{"name": EXAMPLE_USER_KEY, "runs": 1, **_ADMIN_USAGE}],
        "total": _ADMIN_USAGE}},
    "adminThreadMessages": {"response": {
        "id": THREAD, "name": "Weather in Paris", "userKey": EXAMPLE_USER_KEY,
        "agent": "default", "messages": [_USER, _ASSISTANT], "hasMore": False}},
    "adminWaiting": {"response": {"threads": [{
        "id": THREAD, "name": "Invoice for Ada", "userKey": EXAMPLE_USER_KEY,
        "agent": "default", "runId": RUN, "updatedAt": UPDATED,
        "calls": [{"toolCallId": "call_1", "toolName": "send_invoice",
                   "arguments": "{\"customer\": \"Ada\", \"amount_eur\": 120}",
                   "kind": "approval", "message": "Allow the tool send_invoice to run?",
                   "responseSchema": {"type": "object",
                                      "properties": {"approved": {"type": "boolean"},
                                                     "reason": {"type": "string"}},
                                      "required": ["approved"]},
                   "expiresAt": "2026-01-06T10:00:03.250Z", "expired": False}]}],
        "hasMore": False}},
    "adminAnswer": {"request": {"answers": [{"toolCallId": "call_1",
                                             "result": {"approved": True}}]},
                    "response": {"threadId": THREAD, "runId": "run_01JH8Z5A6B7C8D9E0F1G2H3J4K",
                                 "status": "running"}},
    "adminListKeys": {"response": {"keys": [_ADMIN_KEY], "defaults": {
        "maxConcurrentRuns": 100, "runsPerMinute": 600, "dailyTokens": 0},
        "agents": ["support", "billing"]}},
    "adminCreateKey": {"request": {"agent": "support", "maxConcurrentRuns": 2,
                                   "dailyTokens": 200000,
                                   "expiresAt": "2026-04-05T10:00:00Z"},
                       "response": {**_ADMIN_KEY, "lastUsedAt": None,
                                    "key": "gwk_q3Jv8c1mZr0XyKpLw9TfB2nHs5dA7eUo4iGvC6tQ1Yx"}},
    "adminRevokeKey": {"response": {**_ADMIN_KEY, "state": "revoked",
                                    "revokedAt": UPDATED}},
    "adminModels": {"response": {"models": [
        {"model": "openai/gpt-4o-mini", "source": "litellm", "inputPerMillion": 0.15,
         "outputPerMillion": 0.6, "cachedInputPerMillion": 0.075, "configured": True},
        {"model": "openai/llama", "source": "setting", "inputPerMillion": 0.2,
         "outputPerMillion": 0.6, "cachedInputPerMillion": None, "configured": True}]}},
    "docs": {"response": HTML},
    "createCron": {"request": _CRON_REQUEST, "response": _CRON},
    "adminListCrons": {"response": {"crons": [{
        "id": _CRON["id"], "userKey": EXAMPLE_USER_KEY, "agent": "default", "threadId": None,
        "schedule": _CRON_REQUEST["schedule"], "message": _CRON_REQUEST["message"],
        "webhookHost": "hooks.example.com", "createdAt": CREATED,
        "nextRunAt": _CRON["nextRunAt"], "lastRunId": RUN, "lastError": None,
        "runsStarted": 3}]}},
    "adminListWebhooks": {"response": {"deliveries": [{
        "runId": RUN, "threadId": THREAD, "host": "hooks.example.com", "state": "delivered",
        "attempts": 2, "lastStatus": 200, "lastError": None, "createdAt": CREATED,
        "doneAt": UPDATED, "nextAttemptAt": None}]}},
    "listCrons": {"response": {"crons": [_CRON]}},
    "listAgents": {"response": {
        "version": "0.1.0", "defaultAgent": "support", "audioFileTranscriptionEnabled": False,
        "models": ["gpt-4o-mini", "gpt-4o"],
        "agents": {"support": {"name": "support", "description": "Answers questions about "
                               "orders", "className": "HttpAgent"},
                   "billing": {"name": "billing", "description": "Explains invoices",
                               "className": "HttpAgent"}}}},
    "createThread": {"request": {"metadata": {"topic": "weather"}, "userKey": EXAMPLE_USER_KEY},
                     "response": {**{k: v for k, v in _THREAD.items()
                                     if k not in ("name", "lastCompletedRunId")},
                                  "metadata": {"topic": "weather"}}},
    "listThreads": {"response": {"threads": [_THREAD], "hasMore": True,
                                 "nextCursor": "WzE3Njc2MDcyMDAwMDAsInRociJd"}},
    "getThread": {"response": {**_THREAD, "messages": [_USER, _ASSISTANT]}},
    "updateThread": {"request": {"name": "Weather in Paris"}, "response": _THREAD},
    "forkThread": {"request": {"messageId": USER_MESSAGE, "userKey": EXAMPLE_USER_KEY},
                   "response": {**{k: v for k, v in _THREAD.items()
                                   if k not in ("name", "lastCompletedRunId")},
                                "id": "thr_01JH8Z4A5B6C7D8E9F0G1H2J3K",
                                "forkedFrom": {"threadId": THREAD, "messageId": USER_MESSAGE},
                                "messages": [{**_USER, "id": "01JH8Z4A6C7D8E9F0G1H2J3K4M",
                                              "runId": None}]}},
    "deleteThread": {},
    "generateThreadName": {"response": {**_THREAD, "projectId": "default",
                                        "contextKey": EXAMPLE_USER_KEY}},
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


def example_for(operation_id: str, examples: dict[str, dict[str, Any]] = EXAMPLES
                ) -> dict[str, Any]:
    """The examples of an operation (a `...Beta` alias shares its v1 operation's)."""
    return examples.get(operation_id) or examples.get(operation_id.removesuffix("Beta"), {})
