"""A bearer token verified: an access token (its header's ``typ``, RFC 9068), signed by one of
the issuer's keys with an accepted algorithm, for this audience, by this issuer, and current
(``exp``, ``nbf``, ``iat``, with a leeway).

The ``typ`` check is what keeps an OpenID Connect ID token from passing as an access token: an
ID token is signed by the same keys, names the same issuer, and names as its audience the client
it was issued to, which may be the audience the services check. RFC 9068 access tokens say
``at+jwt`` (or ``application/at+jwt``); ID tokens never do.

Nothing here logs a token or echoes it in an error: a reason says what was wrong with it.
"""

from __future__ import annotations

from typing import Any

import jwt

from sagakit.auth.issuer_keys import IssuerKeys, IssuerUnavailable
from sagakit.auth.principal import Principal, roles_in
from sagakit.auth.settings import AuthSettings

__all__ = ["InvalidToken", "IssuerUnavailable", "TokenVerifier"]

# Far above any token an issuer hands out (a few hundred bytes to a few KiB), and a bound on
# what is base64-decoded and parsed before the signature is known to be good.
MAX_TOKEN_BYTES = 16 * 1024

_REQUIRED_CLAIMS = ["exp", "iat", "iss", "aud", "sub"]


class InvalidToken(Exception):
    """The token is not one this service believes; the message says why, never what it held."""


class TokenVerifier:
    def __init__(self, settings: AuthSettings, keys: IssuerKeys | None = None) -> None:
        self.settings = settings
        self.keys = keys or IssuerKeys(settings)

    async def verify(self, token: str) -> Principal:
        """Who ``token`` names. Raises ``InvalidToken`` (401) or ``IssuerUnavailable`` (503:
        the issuer's keys could not be fetched)."""
        if len(token) > MAX_TOKEN_BYTES:
            raise InvalidToken("token too long")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise InvalidToken("not a JWT") from None
        token_type = header.get("typ")
        if not isinstance(token_type, str) or token_type.lower() not in self.settings.token_types:
            raise InvalidToken(f"not an access token (typ {str(token_type)[:24]!r})")
        algorithm = header.get("alg")
        if algorithm not in self.settings.algorithms:
            raise InvalidToken(f"algorithm {str(algorithm)[:16]!r} not accepted")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise InvalidToken("key id is not a string")
        jwk = await self.keys.key(kid)
        if jwk is None:
            raise InvalidToken("signed with a key the issuer does not publish")
        claims = self._verified_claims(token, jwk, algorithm)
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            raise InvalidToken("no subject")
        return Principal(subject, roles_in(claims, self.settings.roles_claim))

    def _verified_claims(self, token: str, jwk: dict[str, Any], algorithm: str
                         ) -> dict[str, Any]:
        try:
            # The key's own algorithm when the issuer names it; PyJWK then refuses a token
            # whose header names another.
            key = jwt.PyJWK(jwk, algorithm=jwk.get("alg") or algorithm)
            return jwt.decode(token, key, algorithms=list(self.settings.algorithms),
                              audience=self.settings.audience, issuer=self.settings.issuer,
                              leeway=self.settings.leeway_s,
                              options={"require": _REQUIRED_CLAIMS, "verify_signature": True})
        except jwt.ExpiredSignatureError:
            raise InvalidToken("expired") from None
        except jwt.InvalidAudienceError:
            raise InvalidToken("wrong audience") from None
        except jwt.InvalidIssuerError:
            raise InvalidToken("wrong issuer") from None
        except jwt.ImmatureSignatureError:
            raise InvalidToken("not valid yet") from None
        except jwt.MissingRequiredClaimError as exc:
            raise InvalidToken(f"claim {exc.claim!r} missing") from None
        except jwt.InvalidSignatureError:
            raise InvalidToken("bad signature") from None
        except jwt.PyJWTError as exc:
            raise InvalidToken(type(exc).__name__) from None

    async def close(self) -> None:
        await self.keys.close()
