"""An OIDC issuer for the token tests: its discovery document and JWKS served over real HTTP on
127.0.0.1 (a free port), from a thread, with keys made by the test; it counts the requests it
answered and can be told to publish other keys, to fail, or to name another issuer."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

AUDIENCE = "saga-test"


@dataclass
class SigningKey:
    kid: str
    private: RSAPrivateKey

    @classmethod
    def new(cls) -> SigningKey:
        return cls(f"k-{uuid.uuid4().hex[:8]}",
                   rsa.generate_private_key(public_exponent=65537, key_size=2048))

    def jwk(self) -> dict[str, Any]:
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.private.public_key()))
        return {**public, "kid": self.kid, "alg": "RS256", "use": "sig"}


@dataclass
class Issuer:
    url: str = ""
    keys: list[SigningKey] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    failing: bool = False
    named_issuer: str | None = None
    """The issuer the discovery document names, when not its own URL."""
    jwks_uri: str | None = None
    """The jwks_uri the discovery document names, when not its own ``/jwks``."""

    def jwks_fetches(self) -> int:
        return sum(1 for path in self.requests if path == "/jwks")

    def token(self, key: SigningKey | None = None, *, sub: str = "cust-1",
              roles: list[str] | None = None, typ: str | None = "at+jwt", **claims: Any) -> str:
        key = key or self.keys[0]
        now = int(time.time())
        payload = {"iss": self.url, "aud": AUDIENCE, "sub": sub,
                   "roles": ["customer"] if roles is None else roles,
                   "iat": now, "exp": now + 300, **claims}
        return jwt.encode({k: v for k, v in payload.items() if v is not None}, key.private,
                          algorithm="RS256", headers={"kid": key.kid, "typ": typ})


@contextmanager
def running_issuer(*keys: SigningKey) -> Iterator[Issuer]:
    issuer = Issuer(keys=list(keys))

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            issuer.requests.append(self.path)
            if issuer.failing:
                self.send_error(503)
                return
            if self.path == "/.well-known/openid-configuration":
                body: dict[str, Any] = {"issuer": issuer.named_issuer or issuer.url,
                                        "jwks_uri": issuer.jwks_uri or f"{issuer.url}/jwks"}
            elif self.path == "/jwks":
                body = {"keys": [k.jwk() for k in issuer.keys]}
            else:
                self.send_error(404)
                return
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    issuer.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02},
                              daemon=True)
    thread.start()
    try:
        yield issuer
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
