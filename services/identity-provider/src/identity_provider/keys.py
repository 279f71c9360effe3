"""The signing keys: RSA, signing with RS256.

RS256 because it is the one algorithm every OIDC issuer and client supports (OIDC Core §15.1
makes it mandatory), so the services' configuration stays the same against Keycloak or Auth0;
and because what the services do on every request is verify, which for RSA (public exponent
65537) is cheaper than for ECDSA. Signing, slower with RSA, happens once per token.

A key's id is its RFC 7638 thumbprint: the same key has the same id across restarts, with no
record of ids to keep.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

ALGORITHM = "RS256"
# RFC 9068 §2.1: the `typ` of a JWT access token's header; the services refuse any other.
ACCESS_TOKEN_TYPE = "at+jwt"


def new_private_key_pem() -> bytes:
    """A new 2048-bit RSA private key, PKCS#8 PEM."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


@dataclass(frozen=True)
class SigningKey:
    kid: str
    private: RSAPrivateKey

    @classmethod
    def from_pem(cls, pem: bytes) -> SigningKey:
        key = serialization.load_pem_private_key(pem, password=None)
        if not isinstance(key, RSAPrivateKey):
            raise ValueError("not an RSA private key")
        return cls(thumbprint(key), key)

    @classmethod
    def from_file(cls, path: Path) -> SigningKey:
        try:
            return cls.from_pem(path.read_bytes())
        except (OSError, ValueError) as exc:
            raise SystemExit(f"identity provider: cannot read the key {path}: {exc}") from exc

    def public_jwk(self) -> dict[str, Any]:
        return {**_public_members(self.private), "kid": self.kid, "alg": ALGORITHM, "use": "sig"}

    def sign(self, claims: dict[str, Any], token_type: str = ACCESS_TOKEN_TYPE) -> str:
        """``claims`` signed; ``token_type`` is the header's ``typ``: an access token's
        (RFC 9068) by default, which the services require, and which no other kind of token
        (an OpenID Connect ID token) may carry."""
        return jwt.encode(claims, self.private, algorithm=ALGORITHM,
                          headers={"kid": self.kid, "typ": token_type})


def _public_members(key: RSAPrivateKey) -> dict[str, str]:
    return json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))


def thumbprint(key: RSAPrivateKey) -> str:
    """RFC 7638: SHA-256 of the required members in lexicographic order, no whitespace."""
    members = _public_members(key)
    canonical = json.dumps({k: members[k] for k in ("e", "kty", "n")}, separators=(",", ":"),
                           sort_keys=True)
    return base64.urlsafe_b64encode(hashlib.sha256(canonical.encode()).digest()
                                    ).rstrip(b"=").decode()


@dataclass(frozen=True)
class KeyRing:
    """The key that signs, and the earlier ones still published."""

    signing: SigningKey
    published: tuple[SigningKey, ...] = ()

    def jwks(self) -> dict[str, Any]:
        keys = [self.signing, *(k for k in self.published if k.kid != self.signing.kid)]
        return {"keys": [k.public_jwk() for k in keys]}
