"""The console as an OIDC client of the issuer (Authlib's Starlette integration): the
authorization-code flow with PKCE (S256), as a public client (no client secret: the verifier
proves who trades the code). The flow's state and verifier wait in the session between the
redirect to the issuer and its redirect back.

The token the issuer returns is the operator's access token, verified like the services verify
it (``session``), and the one the console calls the services with."""

from __future__ import annotations

from authlib.integrations.starlette_client import OAuth, StarletteOAuth2App

from consola.settings import ConsolaSettings
from sagakit.auth import AuthSettings


def issuer_client(settings: ConsolaSettings, auth: AuthSettings) -> StarletteOAuth2App:
    oauth = OAuth()
    client = oauth.register(
        "issuer", client_id=settings.client_id, client_secret=None,
        server_metadata_url=auth.discovery_url,
        authorize_url=str(settings.authorize_url) if settings.authorize_url else None,
        client_kwargs={"code_challenge_method": "S256", "token_endpoint_auth_method": "none",
                       "timeout": auth.fetch_timeout_s})
    assert isinstance(client, StarletteOAuth2App)
    return client
