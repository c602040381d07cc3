"""A local OIDC identity provider for tests: a real HTTP server on loopback.

It generates an RSA key at start, publishes it at `/.well-known/openid-configuration` ->
`jwks_uri`, and signs ID tokens with it, as an app's identity provider (Auth0, Google, Clerk,
...) would. `foreign_token` signs with a key it never publishes, as a forger would. Requests for
the key set (and the discovery document) are counted, so tests can see that the gateway caches
it; `down` and `hold` make an outage (503, or no answer until released). `GET /token` answers with
an ID token for whoever is `signed_in` (a browser app's sign-in, reduced to its result).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa


class IdentityProvider:
    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = "test-key-1"
        self.jwks_requests = self.discovery_requests = 0
        self.signed_in: str | None = None
        # An outage: `down` answers discovery with 503; `hold` keeps it waiting until set.
        self.down = False
        self.hold: threading.Event | None = None
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if self.path == "/.well-known/openid-configuration":
                    provider.discovery_requests += 1
                    if provider.hold is not None:
                        provider.hold.wait(timeout=60)
                    if provider.down:
                        self.send_error(503)
                        return
                    body = {"issuer": provider.issuer, "jwks_uri": f"{provider.issuer}/jwks"}
                elif self.path == "/token" and provider.signed_in:
                    body = {"id_token": provider.token(provider.signed_in)}
                elif self.path == "/jwks":
                    provider.jwks_requests += 1
                    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(
                        provider.key.public_key()))
                    body = {"keys": [{**public, "kid": provider.kid, "use": "sig",
                                      "alg": "RS256"}]}
                else:
                    self.send_error(404)
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("access-control-allow-origin", "*")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> IdentityProvider:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def token(self, subject: str, audience: str = "test-app", lifetime: int = 600,
              **claims: Any) -> str:
        """An ID token for `subject`, signed with the published key."""
        return self._sign(self.key, subject, audience, lifetime, claims)

    def foreign_token(self, subject: str, audience: str = "test-app") -> str:
        """A token that claims this issuer and key id but is signed with another key."""
        return self._sign(self.other_key, subject, audience, 600, {})

    def _sign(self, key: Any, subject: str, audience: str, lifetime: int,
              claims: dict[str, Any]) -> str:
        now = int(time.time())
        payload = {"iss": self.issuer, "sub": subject, "aud": audience, "iat": now,
                   "exp": now + lifetime, **claims}
        return jwt.encode(payload, key, algorithm="RS256", headers={"kid": self.kid})
