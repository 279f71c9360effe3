"""Which fields are sensitive, declared on the data models, and how they are hidden in logs.

Declarations come from two places: ``x-sensitive`` in the event schemas (the wire models) and
``Sensitive`` markers on a service's own pydantic models (``declare_model``). Each field is
either masked (its presence stays visible) or omitted. What no declaration reaches (a token
quoted in a message or an exception's text) is hidden by its shape: ``scrub`` (payment tokens
by ``saga_contracts.redaction``, bearer credentials here).

Bearer credentials (the JWTs the APIs take) are masked both ways too: a field named for one
(``Authorization``, ``access_token``) wherever it sits, and JWT-shaped text or what follows
``Bearer `` in any string.
"""

from __future__ import annotations

import re
from typing import Any

from saga_contracts import redaction
from saga_contracts.redaction import MASK, Treatment

__all__ = ["MASK", "Sensitive", "Treatment", "declare_model", "redact", "scrub",
           "sensitive_fields"]

_declared: dict[str, Treatment] = {}

_CREDENTIAL_FIELDS: dict[str, Treatment] = {
    "authorization": "mask", "Authorization": "mask", "access_token": "mask"}

# A JWT's header is base64url JSON, so it starts "eyJ" ('{"'); a bearer credential of any
# shape follows "Bearer " in a quoted Authorization header.
CREDENTIAL_TEXT = re.compile(r"eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*\.?[A-Za-z0-9_-]*"
                             r"|(?<=Bearer )[A-Za-z0-9._~+/=-]+")


def scrub(text: str) -> str:
    """``text`` with every payment-token-shaped and credential-shaped part replaced by
    ``MASK``."""
    text = redaction.scrub(text)
    if "eyJ" not in text and "Bearer " not in text:
        return text  # the common case, without the regex
    return CREDENTIAL_TEXT.sub(MASK, text)


class Sensitive:
    """Marker for ``Annotated[str, Sensitive("mask")]`` on a pydantic model field."""

    def __init__(self, treatment: Treatment = "mask") -> None:
        self.treatment = treatment


def declare_model(model: Any) -> None:
    """Registers the ``Sensitive`` fields of a pydantic model (and of its nested models)."""
    for name, info in model.model_fields.items():
        for meta in info.metadata:
            if isinstance(meta, Sensitive):
                _fields()[name] = meta.treatment
        annotation = info.annotation
        if hasattr(annotation, "model_fields"):
            declare_model(annotation)


def sensitive_fields() -> dict[str, Treatment]:
    return dict(_fields())


def _fields() -> dict[str, Treatment]:
    if not _declared:
        _declared.update(redaction.schema_declarations())
        _declared.update(_CREDENTIAL_FIELDS)
    return _declared


def redact(value: Any) -> Any:
    """A copy of ``value`` with every declared field masked or dropped, at any depth."""
    return redaction.redact(value, _fields())
