"""Who may use the schema registry, and as what: Apicurio's role-based authorization over HTTP
basic authentication, with the users and their roles in the registry's own configuration.

- ``deployer`` writes: it registers the schemas and sets their rules (``sagactl schemas
  register``, a step of the deployment), as Apicurio's developer role, which may write artifacts,
  versions and their rules but not the registry's global settings.
- ``reader`` reads: the services and the operators, as Apicurio's read-only role.
- No one has Apicurio's admin role, and a request without credentials is refused.

Basic authentication rather than the stack's identity provider (an OIDC issuer, which the
registry could trust as well): that stand-in hands a token with any role to whoever asks, so a
``deployer`` role in its tokens would hold no one back, while a password the stack generates
does. Each password is generated at the first start (``.local/secrets/registry-<name>``, or
``REGISTRY_<NAME>_PASSWORD``), and the registry's configuration holds only its digest.
"""

from __future__ import annotations

import hashlib
import os

from local_stack import secrets

# Apicurio's roles (its defaults for apicurio.auth.roles.developer and .readonly).
WRITER_ROLE = "sr-developer"
READER_ROLE = "sr-readonly"
PRINCIPALS = {"deployer": WRITER_ROLE, "reader": READER_ROLE}
# Quarkus' embedded users realm: a password is stored as HEX(MD5(user ":" realm ":" password)).
REALM = "Quarkus"


def _set_for(name: str) -> str | None:
    return os.environ.get(f"REGISTRY_{name.upper()}_PASSWORD") or None


def password(name: str) -> str:
    """The password of the principal ``name``, made at the first ask."""
    if name not in PRINCIPALS:
        raise ValueError(f"not a registry principal: {name!r}")
    return _set_for(name) or secrets.password(f"registry-{name}")


def known_password(name: str) -> str | None:
    """The password of the principal ``name`` if the stack made one (nothing is generated)."""
    return _set_for(name) or secrets.existing(f"registry-{name}")


def digest(name: str, password: str) -> str:
    """What the registry's configuration holds for a user's password."""
    return hashlib.md5(f"{name}:{REALM}:{password}".encode(), usedforsecurity=False).hexdigest()


def properties() -> dict[str, str]:
    """The registry's authentication and authorization settings, users and roles included."""
    found = {
        "quarkus.oidc.tenant-enabled": "false",
        # Quarkus warns at the start that this is fixed at build time (unset there): its basic
        # mechanism is built in all the same, and Apicurio reads it to enforce its roles.
        "quarkus.http.auth.basic": "true",
        "apicurio.auth.role-based-authorization": "true",
        "apicurio.auth.role-source": "token",
        "apicurio.auth.anonymous-read-access.enabled": "false",
        "quarkus.security.users.embedded.plain-text": "false",
        "quarkus.security.users.embedded.algorithm": "digest-md5",
    }
    for name, role in PRINCIPALS.items():
        found[f"quarkus.security.users.embedded.users.{name}"] = digest(name, password(name))
        found[f"quarkus.security.users.embedded.roles.{name}"] = role
    return found
