"""Who a verified token names: its subject and its roles (the contract's ``roles`` claim)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

CUSTOMER = "customer"
"""A customer: the token's subject is the customer's id."""
OPERATOR = "operator"
"""An operator: may read and act on every customer's objects."""


@dataclass(frozen=True)
class Principal:
    subject: str
    roles: frozenset[str]

    @property
    def is_operator(self) -> bool:
        return OPERATOR in self.roles

    def owner_filter(self) -> str | None:
        """The subject whose objects alone this principal may see, or None for all of them
        (an operator)."""
        return None if self.is_operator else self.subject


def roles_in(claims: Mapping[str, Any], claim: str) -> frozenset[str]:
    """The roles a token's ``claim`` holds. A dotted claim reaches into nested objects, as some
    issuers nest them (Keycloak: ``realm_access.roles``); a missing claim or anything but a list
    of strings (or one string) holds none."""
    value: Any = claims
    for part in claim.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return frozenset()
        value = value[part]
    if isinstance(value, str):
        return frozenset({value})
    if isinstance(value, list | tuple):
        return frozenset(v for v in value if isinstance(v, str))
    return frozenset()
