"""`POST /oauth/token`: RFC 8693 token exchange, as `TamboProvider userToken=...` calls it.

The body is form-encoded (`grant_type`, `subject_token`, `subject_token_type`); the answer is an
OAuth token response. Refusals are problem+json with the OAuth `error` field as well (RFC 6749
5.2), and the statuses the real server uses: 400 for a malformed request, 401 for a subject
token that identifies no one. The SDK surfaces either as the provider's auth state "error".
"""

from __future__ import annotations

from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..auth.identity import TokenRejected
from ..protocol.problems import ApiError, Problem
from ..protocol.tambo import TokenResponse, wire
from .context import caller, services

TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
SUBJECT_TOKEN_TYPES = ("urn:ietf:params:oauth:token-type:access_token",
                       "urn:ietf:params:oauth:token-type:id_token",
                       "urn:ietf:params:oauth:token-type:jwt")
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
MAX_FORM_BYTES = 64 * 1024


def _refused(kind: Problem, oauth_error: str, detail: str) -> ApiError:
    return ApiError(kind, detail, error=oauth_error, error_description=detail)


async def exchange_token(request: Request) -> Response:
    who = caller(request)
    if who.signed_in_scope is not None:
        raise _refused(Problem.VALIDATION_ERROR, "invalid_request",
                       "Exchange the identity provider's token with the API key, not with a "
                       "gateway access token")
    raw = await request.body()
    if len(raw) > MAX_FORM_BYTES:
        raise ApiError(Problem.PAYLOAD_TOO_LARGE, "The token request is too large")
    try:
        form = {k: v[-1] for k, v in parse_qs(raw.decode("utf-8"), strict_parsing=False).items()}
    except UnicodeDecodeError:
        form = {}
    if form.get("grant_type") != TOKEN_EXCHANGE:
        raise _refused(Problem.UNSUPPORTED_GRANT_TYPE, "unsupported_grant_type",
                       f"Invalid grant_type. Must be '{TOKEN_EXCHANGE}'")
    if form.get("subject_token_type") not in SUBJECT_TOKEN_TYPES:
        raise _refused(Problem.VALIDATION_ERROR, "invalid_request",
                       "Invalid subject_token_type. Must be one of: "
                       + ", ".join(SUBJECT_TOKEN_TYPES))
    subject_token = form.get("subject_token", "").strip()
    if not subject_token:
        raise _refused(Problem.VALIDATION_ERROR, "invalid_request", "subject_token is required")
    identity = services(request).identity
    if not identity.configured:
        raise _refused(Problem.TOKEN_EXCHANGE_DISABLED, "invalid_request",
                       "Sign-in with user tokens is not enabled on this gateway: set "
                       "GATEWAY_OIDC_ISSUERS and GATEWAY_OIDC_AUDIENCE, or "
                       "GATEWAY_OAUTH_HS256_SECRET")
    try:
        user = await identity.verify_subject_token(subject_token)
    except TokenRejected as exc:
        raise _refused(Problem.TOKEN_EXPIRED if exc.expired else Problem.INVALID_TOKEN,
                       "invalid_grant", f"Invalid OAuth subject token: {exc.reason}") from None
    token, lifetime = identity.issue(who.project, user, who.key_id)
    body = TokenResponse(access_token=token, token_type="Bearer", expires_in=lifetime,
                         issued_token_type=ACCESS_TOKEN_TYPE)
    return JSONResponse(wire(body), headers={"Cache-Control": "no-store"})


routes = [Route("/oauth/token", exchange_token, methods=["POST"])]
