"""What the console reads from its environment. Whose tokens it believes is sagakit's
``AuthSettings`` (``AUTH_ISSUER``, ``AUTH_AUDIENCE``...), the same settings as the services':
the console signs operators in through that issuer and verifies their tokens as the services do."""

from __future__ import annotations

from pathlib import Path
from typing import Self

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pydantic import Field, HttpUrl, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from saga_contracts import replay_signature

MIN_SECRET_CHARS = 32


class ConsolaSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CONSOLA_", extra="ignore")

    host: str = Field("127.0.0.1", description="Address the console listens on.")
    port: int = Field(8030, ge=1, le=65535, description="Port the console listens on.")
    public_url: str | None = Field(None, description=(
        "The console's URL as the operators' browsers reach it: the sign-in's redirect URI is "
        "`<public_url>/auth/callback`. Unset, `http://127.0.0.1:<CONSOLA_PORT>`."))
    session_secret: SecretStr | None = Field(None, description=(
        "The key that signs the session cookie, 32 characters or more; or "
        "`CONSOLA_SESSION_SECRET_FILE`. Changing it signs every operator out."))
    session_secret_file: Path | None = Field(None, description=(
        "A file holding the session cookie's key, instead of `CONSOLA_SESSION_SECRET` (the "
        "local stack makes one at its first start, `$SAGA_STATE_DIR/secrets/consola-session`)."))
    session_max_age_s: int = Field(8 * 3600, ge=60, description=(
        "Longest a session cookie lives; an operator is also signed out when the token it "
        "holds expires (the issuer's token lifetime)."))
    secure_cookie: bool = Field(False, description=(
        "`true` marks the session cookie `Secure`; it is so anyway when `CONSOLA_PUBLIC_URL` is "
        "https (always, beyond one machine)."))
    client_id: str = Field("consola", min_length=1, description=(
        "The console's client id at the issuer (a public client: PKCE, no client secret)."))
    authorize_url: HttpUrl | None = Field(None, description=(
        "The issuer's authorization endpoint as the browser reaches it, when that differs from "
        "the one its discovery document names (docker-compose.yml: the issuer is "
        "`identity-provider:8020` inside the network, `127.0.0.1:8020` for the browser)."))
    pedidos_url: str = Field("http://127.0.0.1:8001", description=(
        "pedidos' API, called with the signed-in operator's own token."))
    pagos_url: str = Field("http://127.0.0.1:8003", description=(
        "pagos' API, called with the signed-in operator's own token."))
    inventario_url: str = Field("http://127.0.0.1:8002", description=(
        "inventario's API (its dead letters' archive), called with the signed-in operator's "
        "own token."))
    database_url: SecretStr = Field(..., description=(
        "The PostgreSQL URL the console reads the services' published views with, as the "
        "`console_reader` role (it may read those views and nothing else); libpq's TLS "
        "parameters (`sslmode`, `sslrootcert`...) in its query. The local stack gives it "
        "`console_reader`'s URL with the password it generated."))
    database_pool_size: int = Field(4, ge=1, le=50, description=(
        "Most connections the console holds to PostgreSQL at once."))
    api_timeout_s: float = Field(10.0, gt=0, le=60, description=(
        "Longest a call to a service's API may take before the page says it did not answer."))
    signing_key: SecretStr | None = Field(None, description=(
        "The console's own replay-signing key (Ed25519): a PEM, or the one line of base64 "
        "between its BEGIN and END lines; or `CONSOLA_SIGNING_KEY_FILE`. Its public half must "
        "be in the services' `SAGA_OPERATOR_PUBLIC_KEYS` (`sagactl signing-key` prints it, "
        "with `SAGACTL_SIGNING_KEY_FILE` naming the key). Unset, the console replays nothing "
        "(its dry runs and replays say so). Replays are published as the Kafka principal the "
        "`KAFKA_*` variables name: the `operator` principal."))
    signing_key_file: Path | None = Field(None, description=(
        "A PEM file holding the console's replay-signing key, instead of "
        "`CONSOLA_SIGNING_KEY` (the local stack makes one at its first start, "
        "`$SAGA_STATE_DIR/secrets/consola-signing.key`)."))

    @model_validator(mode="after")
    def _one_session_secret(self) -> Self:
        if (self.session_secret is None) == (self.session_secret_file is None):
            raise ValueError("set one of CONSOLA_SESSION_SECRET and CONSOLA_SESSION_SECRET_FILE")
        if len(self.session_key()) < MIN_SECRET_CHARS:
            raise ValueError(f"the session secret must be {MIN_SECRET_CHARS} characters or more")
        return self

    def session_key(self) -> str:
        if self.session_secret is not None:
            return self.session_secret.get_secret_value()
        assert self.session_secret_file is not None
        try:
            return self.session_secret_file.read_text().strip()
        except OSError as exc:
            raise ValueError(f"cannot read CONSOLA_SESSION_SECRET_FILE: {exc}") from None

    @model_validator(mode="after")
    def _one_signing_key(self) -> Self:
        if self.signing_key is not None and self.signing_key_file is not None:
            raise ValueError("set one of CONSOLA_SIGNING_KEY and CONSOLA_SIGNING_KEY_FILE")
        if self.signing_key is not None or self.signing_key_file is not None:
            self.replay_signing_key()  # a key that does not load stops the console at start
        return self

    def replay_signing_key(self) -> Ed25519PrivateKey | None:
        """The console's replay-signing key; None when none is set."""
        if self.signing_key_file is not None:
            try:
                pem = self.signing_key_file.read_bytes()
            except OSError as exc:
                raise ValueError(f"cannot read CONSOLA_SIGNING_KEY_FILE: {exc.strerror}"
                                 ) from None
        elif self.signing_key is not None:
            text = self.signing_key.get_secret_value().strip()
            pem = (text if text.startswith("-----BEGIN") else
                   f"-----BEGIN PRIVATE KEY-----\n{text}\n-----END PRIVATE KEY-----\n").encode()
        else:
            return None
        try:
            return replay_signature.load_private_key(pem)
        except replay_signature.InvalidKey as exc:
            # The class of fault only: the key's text never goes to a log.
            raise ValueError(f"the console's signing key is not usable: {exc}") from None

    @property
    def cookie_secure(self) -> bool:
        """``Secure`` when asked, and always when the console is served over https."""
        return self.secure_cookie or self.base_url.startswith("https://")

    @property
    def base_url(self) -> str:
        return (self.public_url or f"http://127.0.0.1:{self.port}").rstrip("/")
