"""Who a request comes from: bearer JWTs verified against an OIDC issuer's published keys.

``settings`` (the issuer, the audience, the algorithms), ``issuer_keys`` (the discovery document
and the JWKS, cached, fetched again for an unknown key id at most so often), ``tokens`` (the
verification itself), ``principal`` (who the token names, with which roles) and
``dependencies`` (the FastAPI ``Security`` dependencies the routes declare, which OpenAPI
documents as a bearer scheme).

Plumbing only: which role may do what with which object is each service's to say.
"""

from sagakit.auth.dependencies import (
    AUTH_RESPONSES,
    authenticated,
    install_authentication,
    require,
    require_operator,
)
from sagakit.auth.principal import CUSTOMER, OPERATOR, Principal
from sagakit.auth.settings import AuthSettings
from sagakit.auth.tokens import InvalidToken, IssuerUnavailable, TokenVerifier

__all__ = ["AUTH_RESPONSES", "CUSTOMER", "OPERATOR", "AuthSettings", "InvalidToken", "IssuerUnavailable",
           "Principal", "TokenVerifier", "authenticated", "install_authentication", "require",
           "require_operator"]
