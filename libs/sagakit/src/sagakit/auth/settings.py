"""Which issuer's tokens a service believes, for which audience, signed how."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Self
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

# Signatures made with a private key and checked with the public one the issuer publishes.
# Never "none", and never HS*: an HMAC key is a shared secret, and a verifier that accepted
# HS256 with the issuer's public key as the secret would take tokens anyone can forge.
ASYMMETRIC_ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
                                   "ES256", "ES384", "ES512", "EdDSA"})


class _Loopback:
    """Host names that can only be the local host."""

    def __contains__(self, host: object) -> bool:
        if host == "localhost":
            return True
        try:
            return isinstance(host, str) and ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False


LOOPBACK_HOSTS = _Loopback()


class AuthSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AUTH_", extra="ignore")

    issuer: str = Field("http://127.0.0.1:8020", description=(
        "The OIDC issuer whose tokens the service accepts, exactly as its tokens' `iss` claim "
        "spells it; its keys are found through `<issuer>/.well-known/openid-configuration`. "
        "The default is the local stack's identity provider (a development stand-in); for "
        "Keycloak `https://<host>/realms/<realm>`, for Auth0 `https://<tenant>.auth0.com/`."))
    audience: str = Field("saga", min_length=1, description=(
        "The `aud` a token must name: the identifier the issuer knows these services by (an "
        "Auth0 API identifier, a Keycloak client id)."))
    # Comma-separated in the environment: "RS256,ES256".
    algorithms: Annotated[tuple[str, ...], NoDecode] = Field(("RS256",), description=(
        "Signature algorithms accepted, comma-separated; asymmetric ones only (RS*, PS*, ES*, "
        "EdDSA): `none` and HS* are refused at start."))
    # Comma-separated in the environment: "at+jwt,application/at+jwt".
    token_types: Annotated[tuple[str, ...], NoDecode] = Field(
        ("at+jwt", "application/at+jwt"), description=(
        "The `typ` a token's header must have, comma-separated (case does not matter): RFC "
        "9068's access tokens. An OpenID Connect ID token, signed by the same issuer for the "
        "same client, is refused by it; widening it to `JWT` lets ID tokens in as access "
        "tokens."))
    roles_claim: str = Field("roles", min_length=1, description=(
        "The claim that holds a token's roles (`customer`, `operator`); a dotted path reaches "
        "into an object (Keycloak: `realm_access.roles`)."))
    leeway_s: float = Field(30.0, ge=0, le=300, description=(
        "Clock difference allowed with the issuer when checking `exp`, `nbf` and `iat`."))
    keys_max_age_s: float = Field(3600.0, gt=0, description=(
        "How long the issuer's keys are used before they are fetched again (a key the issuer "
        "withdrew is refused at the latest this long after)."))
    unknown_key_refetch_s: float = Field(30.0, ge=0, description=(
        "A token signed with a key id the service does not know makes it fetch the issuer's "
        "keys again (a rotation), at most once in this many seconds, so that tokens with made-up "
        "key ids cannot make it hammer the issuer."))
    fetch_timeout_s: float = Field(5.0, gt=0, le=60, description=(
        "Longest a request for the issuer's discovery document or keys may take."))
    insecure_http_issuer: bool = Field(False, description=(
        "`true` lets `AUTH_ISSUER` be a plain `http://` URL on a host other than the loopback "
        "(a development stand-in on a private network, as in docker-compose.yml). Whoever can "
        "answer for that host in plain HTTP can then hand the service keys of its own and mint "
        "operator tokens: never in production."))

    @field_validator("issuer")
    @classmethod
    def _an_http_url(cls, value: str) -> str:
        if not value.startswith(("https://", "http://")):
            raise ValueError("an http(s) URL")
        return value

    @model_validator(mode="after")
    def _keys_over_tls(self) -> Self:
        """The issuer's keys decide who is an operator: fetched in plain HTTP they could be
        anyone's. Plain HTTP is taken for the loopback (the local stack's stand-in) and, when
        asked for by name, for a development network."""
        url = urlsplit(self.issuer)
        if url.scheme == "http" and not self.insecure_http_issuer \
                and url.hostname not in LOOPBACK_HOSTS:
            raise ValueError(f"AUTH_ISSUER {self.issuer} is plain HTTP: use https://, or set "
                             "AUTH_INSECURE_HTTP_ISSUER=true for a development stand-in")
        return self

    @field_validator("algorithms", mode="before")
    @classmethod
    def _parse_algorithms(cls, value: object) -> tuple[str, ...]:
        names = tuple(v.strip() for v in value.split(",") if v.strip()) if isinstance(
            value, str) else tuple(value)  # type: ignore[arg-type]
        refused = [n for n in names if n not in ASYMMETRIC_ALGORITHMS]
        if not names or refused:
            raise ValueError(f"asymmetric algorithms only ({', '.join(sorted(ASYMMETRIC_ALGORITHMS))}); "
                             f"refused: {', '.join(refused) or '(none given)'}")
        return names

    @field_validator("token_types", mode="before")
    @classmethod
    def _parse_token_types(cls, value: object) -> tuple[str, ...]:
        names = tuple(v.strip().lower() for v in value.split(",") if v.strip()) if isinstance(
            value, str) else tuple(str(v).lower() for v in value)  # type: ignore[attr-defined]
        if not names:
            raise ValueError("at least one token type (at+jwt)")
        return names

    @property
    def discovery_url(self) -> str:
        return self.issuer.rstrip("/") + "/.well-known/openid-configuration"
