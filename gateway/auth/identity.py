"""Who a signed-in user is: identity-provider tokens in, gateway access tokens out.

An app that signs its users in with its own identity provider hands the provider's token to
`TamboProvider userToken=...`; the SDK exchanges it at `POST /oauth/token` for a gateway access
token and sends that as `Authorization: Bearer` from then on. The provider's token is checked
here (signature, expiry, issuer, audience); the gateway token binds the API key's project and
the user's scope, which is derived from the provider and the token's subject, so a browser can
never choose another user's scope (unlike `userKey`, which the browser sends as it likes).

Provider keys come from the issuer's OIDC discovery document (`jwks_uri`), fetched over HTTP
and cached; an unknown `kid` refreshes the cache once (keys rotate), at most every
`JWKS_REFRESH_SECONDS`, so a stream of forged tokens cannot hammer the provider.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import jwt

log = logging.getLogger(__name__)

GATEWAY_ISSUER = "gateway"
GATEWAY_AUDIENCE = "gateway-api"
ASYMMETRIC_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256",
                         "ES384", "ES512", "EdDSA"]
JWKS_TTL_SECONDS = 3600.0
JWKS_REFRESH_SECONDS = 30.0
FETCH_TIMEOUT_SECONDS = 10.0
JWKS_FAILURE_SECONDS = 10.0  # after a failed fetch, tokens of that issuer are refused at once
LEEWAY_SECONDS = 5  # clock skew between the provider and us
UNREACHABLE = "The token's issuer could not be reached to check it"


# The user scopes of signed-in users; a userKey cannot name one (it would impersonate them).
SIGNED_IN_PREFIX = "oauth:"
# The user scope of a Chorus connection's channel threads (`chorus:<connection id>`).
CHORUS_PREFIX = "chorus:"
# Scopes a credential fixes, never a client's `userKey`: a thread in one is seen only by the
# credential that owns it (`caller.visible`), never with the project's API key alone.
RESERVED_SCOPE_PREFIXES = (SIGNED_IN_PREFIX, CHORUS_PREFIX)


def is_signed_in_scope(user_key: str | None) -> bool:
    return user_key is not None and user_key.startswith(SIGNED_IN_PREFIX)


def is_reserved_scope(user_key: str | None) -> bool:
    """Whether `user_key` is a scope only a credential fixes (a signed-in user's, a Chorus
    connection's): a client naming one is refused, a thread in one is not the API key's."""
    return user_key is not None and user_key.startswith(RESERVED_SCOPE_PREFIXES)


def chorus_scope(connection_id: str) -> str:
    """The user scope of a Chorus connection's channel threads."""
    return CHORUS_PREFIX + connection_id


def signed_in_scope(provider: str, subject: str) -> str:
    """`oauth:<provider>:<subject>`, unambiguous: the subject's `%` and `:` are escaped, so the
    last `:` always ends the provider (an issuer URL, or `hs256:<iss>`, may hold any number of
    them) and two different (provider, subject) pairs never share a scope. Subjects without
    either character (nearly all) read as before."""
    return f"{SIGNED_IN_PREFIX}{provider}:{subject.replace('%', '%25').replace(':', '%3A')}"


class TokenRejected(Exception):
    """A token that does not identify anyone; `reason` is safe to show to the client."""

    def __init__(self, reason: str, expired: bool = False) -> None:
        super().__init__(reason)
        self.reason, self.expired = reason, expired


@dataclass(frozen=True)
class Identity:
    user_scope: str
    expires_at: int  # epoch seconds


@dataclass
class _Keys:
    keys: dict[str, Any] = field(default_factory=dict)
    fetched_at: float = 0.0


class JwksCache:
    """Signing keys of OIDC issuers, by issuer and `kid`.

    Each issuer has its own lock, so an issuer that does not answer holds up only the
    exchanges of its own users; and a failed fetch is remembered for `JWKS_FAILURE_SECONDS`,
    so those exchanges are refused at once meanwhile instead of each waiting for the timeout."""

    def __init__(self) -> None:
        self._keys: dict[str, _Keys] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._failed: dict[str, float] = {}  # issuer -> when its last fetch failed

    async def key(self, issuer: str, kid: str | None) -> Any:
        cached = self._keys.get(issuer)
        age = time.monotonic() - cached.fetched_at if cached is not None else None
        if age is None or age > JWKS_TTL_SECONDS or (
                cached is not None and _pick(cached.keys, kid) is None
                and age > JWKS_REFRESH_SECONDS):
            async with self._locks.setdefault(issuer, asyncio.Lock()):
                cached = self._keys.get(issuer)
                if cached is None or time.monotonic() - cached.fetched_at > JWKS_REFRESH_SECONDS:
                    self._keys[issuer] = cached = _Keys(await self._fetch(issuer),
                                                        time.monotonic())
        assert cached is not None
        key = _pick(cached.keys, kid)
        if key is None:
            raise TokenRejected("The token is signed with a key its issuer does not publish")
        return key

    async def _fetch(self, issuer: str) -> dict[str, Any]:
        failed = self._failed.get(issuer)
        if failed is not None and time.monotonic() - failed < JWKS_FAILURE_SECONDS:
            raise TokenRejected(UNREACHABLE)
        try:
            keys = await _fetch_keys(issuer)
        except TokenRejected:
            self._failed[issuer] = time.monotonic()
            raise
        self._failed.pop(issuer, None)
        return keys


def _pick(keys: dict[str, Any], kid: str | None) -> Any:
    if kid is not None:
        return keys.get(kid)
    return next(iter(keys.values())) if len(keys) == 1 else None


async def _fetch_keys(issuer: str) -> dict[str, Any]:
    discovery = issuer.rstrip("/") + "/.well-known/openid-configuration"
    try:
        async with httpx.AsyncClient(timeout=FETCH_TIMEOUT_SECONDS) as http:
            config = (await http.get(discovery)).raise_for_status().json()
            jwks = (await http.get(config["jwks_uri"])).raise_for_status().json()
        key_set = jwt.PyJWKSet.from_dict(jwks)
    except (httpx.HTTPError, KeyError, TypeError, ValueError, jwt.PyJWTError) as exc:
        log.warning("could not read the signing keys of %s: %s", issuer, exc)
        raise TokenRejected(UNREACHABLE) from None
    return {k.key_id or f"#{n}": k for n, k in enumerate(key_set.keys)}


class IdentityProviders:
    """Verifies identity-provider tokens and issues and verifies the gateway's own tokens."""

    def __init__(self, issuers: tuple[str, ...], audience: str | None,
                 shared_secret: str | None, token_secret: str | None, token_ttl: int,
                 shared_issuer: str | None = None) -> None:
        self.issuers = {issuer.rstrip("/"): issuer for issuer in issuers}
        self.audience = audience
        self.shared_secret, self.shared_issuer = shared_secret, shared_issuer
        self.token_secret = token_secret or secrets.token_urlsafe(32)
        self.token_ttl = token_ttl
        self.jwks = JwksCache()

    @property
    def configured(self) -> bool:
        return bool(self.issuers or self.shared_secret)

    async def verify_subject_token(self, token: str) -> Identity:
        """The user a provider's token names, or `TokenRejected`."""
        try:
            header = jwt.get_unverified_header(token)
            unverified = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            raise TokenRejected("The subject token is not a JWT") from None
        algorithm = header.get("alg")
        issuer = unverified.get("iss")
        required = {"require": ["exp", "sub", "iss", "aud"]}
        if algorithm == "HS256" and self.shared_secret and self.shared_issuer and self.audience:
            # The settings make sure both are set: a token must say whom it is for and who
            # issued it, or a token of another system sharing the secret would sign users in.
            claims = _decode(token, self.shared_secret, ["HS256"], self.audience,
                             self.shared_issuer, required)
            provider = f"hs256:{claims['iss']}"
        elif (algorithm in ASYMMETRIC_ALGORITHMS and isinstance(issuer, str)
              and issuer.rstrip("/") in self.issuers):
            key = await self.jwks.key(self.issuers[issuer.rstrip("/")], header.get("kid"))
            claims = _decode(token, key, [algorithm], self.audience, issuer, required)
            provider = issuer.rstrip("/")
        else:
            raise TokenRejected("The subject token is not from an identity provider this "
                                "gateway trusts")
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject.strip():
            raise TokenRejected("The subject token names no subject (sub)")
        return Identity(user_scope=signed_in_scope(provider, subject),
                        expires_at=int(claims["exp"]))

    def issue(self, project: str, identity: Identity,
              key_id: str | None = None) -> tuple[str, int]:
        """A gateway access token for the user in the project, and its lifetime in seconds;
        `key_id` names the API key it was exchanged with (its runs count against that key)."""
        now = int(time.time())
        lifetime = max(1, min(self.token_ttl, identity.expires_at - now))
        claims: dict[str, Any] = {"iss": GATEWAY_ISSUER, "aud": GATEWAY_AUDIENCE,
                                  "sub": identity.user_scope, "project": project, "iat": now,
                                  "exp": now + lifetime}
        if key_id is not None:
            claims["key"] = key_id
        return jwt.encode(claims, self.token_secret, algorithm="HS256"), lifetime

    def verify_access_token(self, token: str) -> tuple[str, str, str | None]:
        """(project, user scope, API key id) of a gateway access token, or `TokenRejected`."""
        claims = _decode(token, self.token_secret, ["HS256"], GATEWAY_AUDIENCE, GATEWAY_ISSUER,
                         {"require": ["exp", "sub", "project"]})
        key = claims.get("key")
        return str(claims["project"]), str(claims["sub"]), key if isinstance(key, str) else None


def looks_like_jwt(value: str) -> bool:
    return value.count(".") == 2 and value.startswith("eyJ")


def _decode(token: str, key: Any, algorithms: list[str], audience: str | None,
            issuer: str | None, options: dict[str, Any]) -> dict[str, Any]:
    checks: Any = {**options, "verify_aud": bool(audience)}
    try:
        return jwt.decode(token, key, algorithms=algorithms, audience=audience, issuer=issuer,
                          leeway=LEEWAY_SECONDS, options=checks)
    except jwt.ExpiredSignatureError:
        raise TokenRejected("The token has expired", expired=True) from None
    except jwt.InvalidAudienceError:
        raise TokenRejected("The token was issued for another audience") from None
    except jwt.InvalidIssuerError:
        raise TokenRejected("The token was issued by another issuer") from None
    except jwt.InvalidSignatureError:
        raise TokenRejected("The token's signature is not valid") from None
    except jwt.MissingRequiredClaimError as exc:
        raise TokenRejected(f"The token lacks the {exc.claim!r} claim") from None
    except jwt.PyJWTError:
        raise TokenRejected("The token is not valid") from None
