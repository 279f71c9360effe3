"""What of an event is never shown, and how it is hidden: by declaration in structured data,
by shape in free text.

- Fields the schemas mark ``x-sensitive`` (the payment token, the shipping address) are masked
  or omitted wherever they sit in a payload (``redact``); a service adds the fields of its own
  models (``sagakit.observability.privacy``).
- Free text (a log message, an exception's text, an operator tool's output) can quote a token
  where no declaration reaches: ``scrub`` hides whatever looks like a payment token in the clear
  (``tok_…``, the form of the gateway's tokens) or sealed (``sealed:v2:…``,
  ``saga_contracts.sealing``, or an earlier version's, which old dead letters may hold).
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any, Literal

from saga_contracts import registry

Treatment = Literal["mask", "omit"]
MASK = "[MASKED]"

# A sealed token first: its base64 may hold "tok_" by chance. No word boundary before "tok_":
# in a JSON line an exception's new line is written "\n", which runs into the word after it.
TOKEN_TEXT = re.compile(r"sealed:v[0-9]+:[A-Za-z0-9_-]*(?::[A-Za-z0-9_-]*)?|tok_[A-Za-z0-9_-]+")


def scrub(text: str) -> str:
    """``text`` with every token-shaped part replaced by ``MASK``."""
    if "tok_" not in text and "sealed:" not in text:
        return text  # the common case, without the regex
    return TOKEN_TEXT.sub(MASK, text)


def _collect(node: Any, found: dict[str, Treatment]) -> None:
    if isinstance(node, dict):
        for name, prop in (node.get("properties") or {}).items():
            if isinstance(prop, dict) and prop.get("x-sensitive"):
                found[name] = prop["x-sensitive"]
            _collect(prop, found)
        if isinstance(node.get("items"), dict):
            _collect(node["items"], found)


@cache
def schema_declarations() -> dict[str, Treatment]:
    """The field names some schema marks ``x-sensitive``, with how each is hidden."""
    found: dict[str, Treatment] = {}
    for versions in registry.all_schemas().values():
        for schema in versions:
            _collect(schema.document, found)
    return found


_CONTAINERS = (dict, list, tuple)


def redact(value: Any, fields: dict[str, Treatment] | None = None) -> Any:
    """A copy of ``value`` with every declared field (``fields``, by default the schemas') masked
    or dropped, at any depth."""
    declared = schema_declarations() if fields is None else fields

    # Every log line passes through here (sagakit.observability.structured_logging): only
    # containers are walked, a scalar is taken as it is.
    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            out = {}
            for k, item in v.items():
                treatment = declared.get(k)
                if treatment is None:
                    out[k] = walk(item) if isinstance(item, _CONTAINERS) else item
                elif treatment == "mask":
                    out[k] = MASK if item is not None else None
            return out
        if isinstance(v, _CONTAINERS):
            return [walk(i) if isinstance(i, _CONTAINERS) else i for i in v]
        return v

    return walk(value)
