"""Model-backed helpers the clients call: thread names and follow-up suggestions.

`POST /threads/{id}/generate-name` is on the older, non-v1 path because that is where
`@tambo-ai/react` calls it (automatically, from a thread's second message); the v1 path is an
alias. Suggestions live in the message's metadata, so they need no table of their own.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..engine.assist import TRANSCRIPT_CHARS, generate_suggestions, generate_title
from ..engine.deltas import ModelError
from ..observability import metrics
from ..protocol.clock import iso_ms, new_id, now_ms
from ..protocol.problems import ApiError, Problem, echo
from ..protocol.tambo import NamedThread, Suggestion, SuggestionList, SuggestionsRequest, wire
from ..store.tables import MessageRow, ThreadRow
from .context import json_body, names_scope, services, thread_for
from .metered import metered, recent_history
from .render import thread_model


def _model_failed(exc: ModelError) -> ApiError:
    metrics.model_call_failed(exc.code)
    return ApiError(Problem[exc.code], exc.message, isRetryable=exc.retryable)


async def generate_name(request: Request) -> Response:
    """Name the thread from its conversation, once.

    A thread that already has a name keeps it: React 1.3 does not load names after a reload, so
    it asks again, and a name the user set with PATCH must not be replaced behind their back.
    """
    thread = await thread_for(request, scope_optional=True)
    svc = services(request)
    if not thread.name:
        history = await recent_history(svc.store, thread.id, TRANSCRIPT_CHARS)
        try:
            async with metered(request, thread.user_key) as usage:
                name = await generate_title(svc.model, history, usage)
        except ModelError as exc:
            raise _model_failed(exc) from None
        await svc.store.update_thread(thread.id, name=name, updated_ms=now_ms())
    updated = await svc.store.get_thread(thread.project_id, thread.id)
    assert updated is not None
    if not names_scope(request):  # the thread id alone: its name, not whose it is
        return JSONResponse(wire(thread_model(updated, NamedThread, owner=False)))
    return JSONResponse(wire(thread_model(updated, NamedThread, projectId=updated.project_id,
                                          contextKey=updated.user_key)))


async def _message(request: Request, user_key: str | None = None
                   ) -> tuple[ThreadRow, MessageRow]:
    # `TamboClient`'s suggestion calls (the older, non-v1 paths) name no user.
    thread = await thread_for(request, user_key,
                              scope_optional=not request.url.path.startswith("/v1/"))
    message_id = request.path_params["message_id"]
    row = await services(request).store.get_message(thread.id, message_id)
    if row is None:
        raise ApiError(Problem.MESSAGE_NOT_FOUND, f"Message {echo(message_id)} not found",
                       threadId=thread.id, messageId=echo(message_id))
    return thread, row


def _suggestions_response(request: Request, suggestions: list[Suggestion],
                          status_code: int = 200) -> Response:
    """The v1 paths answer with the list envelope; the older non-v1 paths, which
    `TamboClient.listSuggestions()` / `generateSuggestions()` call and `.map` over, with the
    bare array, as the real server does."""
    if request.url.path.startswith("/v1/"):
        return JSONResponse(wire(SuggestionList(suggestions=suggestions, hasMore=False)),
                            status_code=status_code)
    return JSONResponse([wire(s) for s in suggestions], status_code=status_code)


async def list_suggestions(request: Request) -> Response:
    """Stored suggestions; `[]` (never 404) once the message exists, as React expects."""
    _, row = await _message(request)
    stored = (row.meta or {}).get("suggestions", [])
    return _suggestions_response(request, [Suggestion.model_validate(s) for s in stored])


async def create_suggestions(request: Request) -> Response:
    body: SuggestionsRequest = await json_body(request, SuggestionsRequest)
    thread, row = await _message(request, body.userKey)
    svc = services(request)
    history = await recent_history(svc.store, row.thread_id, TRANSCRIPT_CHARS)
    components = [c.model_dump(exclude_none=True) for c in body.availableComponents]
    try:
        async with metered(request, thread.user_key) as usage:
            generated = await generate_suggestions(svc.model, history, components,
                                                   body.maxSuggestions, usage)
    except ModelError as exc:
        raise _model_failed(exc) from None
    created = iso_ms(now_ms())
    suggestions = [Suggestion(id=new_id("sug_"), messageId=row.id, title=s["title"],
                              detailedSuggestion=s["detailedSuggestion"],
                              description=s["detailedSuggestion"], createdAt=created)
                   for s in generated]
    await svc.store.save_message_meta(row.id, {**(row.meta or {}),
                                               "suggestions": [wire(s) for s in suggestions]})
    return _suggestions_response(request, suggestions, status_code=201)


routes = [
    Route("/threads/{thread_id}/generate-name", generate_name, methods=["POST"]),
    Route("/v1/threads/{thread_id}/generate-name", generate_name, methods=["POST"]),
]
for _prefix in ("/v1/threads", "/threads"):
    _path = _prefix + "/{thread_id}/messages/{message_id}/suggestions"
    routes += [Route(_path, list_suggestions, methods=["GET"]),
               Route(_path, create_suggestions, methods=["POST"])]
