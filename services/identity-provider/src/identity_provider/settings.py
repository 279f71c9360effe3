"""What the identity provider reads from its environment."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


class IdentityProviderSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="IDENTITY_", extra="ignore")

    host: str = Field("127.0.0.1", description="Address the identity provider listens on.")
    port: int = Field(8020, ge=1, le=65535, description="Port the identity provider listens on.")
    issuer: str | None = Field(None, description=(
        "The `iss` of its tokens, and the URL its discovery document and JWKS are published "
        "under; unset, `http://127.0.0.1:<IDENTITY_PORT>`. The services' `AUTH_ISSUER` must "
        "be the same."))
    public_only: bool = Field(False, description=(
        "`true`: serve only what the services need, `/health`, the discovery document and the "
        "JWKS; no sign-in form and no token endpoint (which hand a token to whoever asks). Run "
        "so where the services reach it, and a full instance where only the console and the "
        "operators do (`IDENTITY_SIGNIN_URL`)."))
    signin_url: str | None = Field(None, description=(
        "Where the discovery document says the sign-in form (`/authorize`) and the token "
        "endpoint (`/token`) are: the full instance's URL when this one is `public_only`; "
        "unset, the issuer."))
    audience: str = Field("saga", min_length=1, description=(
        "The `aud` of its tokens; the services' `AUTH_AUDIENCE` must be the same."))
    signing_key_file: Path = Field(..., description=(
        "PEM file of the RSA private key it signs with (the local stack makes one at its first "
        "start, `$SAGA_STATE_DIR/secrets/identity-signing.key`)."))
    # Comma-separated paths in the environment.
    published_key_files: Annotated[tuple[Path, ...], NoDecode] = Field((), description=(
        "PEM files of earlier signing keys, comma-separated: published in the JWKS beside the "
        "signing key, so that tokens they signed stay valid until they expire (a rotation)."))
    # Comma-separated URIs in the environment.
    redirect_uris: Annotated[tuple[str, ...], NoDecode] = Field((), description=(
        "The redirect URIs a browser sign-in (`/authorize`) may send its code to, "
        "comma-separated; empty, any `http` URI on a loopback host (127.0.0.1, localhost), "
        "as for a client on the same machine."))
    token_lifetime_s: int = Field(900, ge=1, le=86_400, description=(
        "Lifetime of a token when the request does not ask for another."))
    max_token_lifetime_s: int = Field(7 * 86_400, ge=1, description=(
        "Longest lifetime a request may ask for (`expires_in`)."))

    @field_validator("published_key_files", mode="before")
    @classmethod
    def _paths(cls, value: object) -> tuple[Path, ...]:
        if isinstance(value, str):
            return tuple(Path(v.strip()) for v in value.split(",") if v.strip())
        return tuple(value)  # type: ignore[arg-type]

    @field_validator("redirect_uris", mode="before")
    @classmethod
    def _uris(cls, value: object) -> tuple[str, ...]:
        if isinstance(value, str):
            return tuple(v.strip() for v in value.split(",") if v.strip())
        return tuple(value)  # type: ignore[arg-type]

    @property
    def issuer_url(self) -> str:
        return (self.issuer or f"http://127.0.0.1:{self.port}").rstrip("/")
