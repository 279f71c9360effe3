"""The field types of event payloads: how each kind of JSON value in the schemas is held in
Python and written back to exactly the form its schema accepts.

Every check runs in pydantic-core (Rust), none in Python: the consumer parses each message it
handles with these types. Only writing an amount back calls a Python function. Patterns are
Rust regexes, where "$" is the end of the text as in JSON Schema's ECMA-262 (Python's re also
lets it match before a final newline).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler, StringConstraints, WithJsonSchema
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema
from pydantic_core import core_schema as cs

from saga_contracts import sealing

# The string form of RFC 4122 that JSON Schema's "uuid" format names, in either case. Ids stay
# strings: they reach SQL parameters and other events unchanged, character for character.
UUID_PATTERN = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"

Uuid = Annotated[str, StringConstraints(pattern=UUID_PATTERN),
                 WithJsonSchema({"type": "string", "format": "uuid"})]

# Money on the wire: a string with two decimal places and at most twelve whole digits.
AMOUNT_PATTERN = r"^(0|[1-9][0-9]{0,11})\.[0-9]{2}$"
_AMOUNT_WHOLE_DIGITS = 12
_AMOUNT_PLACES = 2


def _two_places(amount: Decimal) -> str:
    # abs(): Decimal("-0") satisfies ge=0 but would be written "-0.00", which the pattern refuses.
    return f"{abs(amount):.2f}"


class _AmountSchema:
    """Reads a wire string that matches the schema's pattern, or a ``Decimal`` that fits it
    (never a float); writes the two-place string back."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler
                                     ) -> CoreSchema:
        # The wire string is tried first: it is what the consumer parses, message after message.
        return cs.union_schema(
            [cs.chain_schema([cs.str_schema(pattern=AMOUNT_PATTERN), cs.decimal_schema()]),
             cs.decimal_schema(strict=True, ge=Decimal(0), decimal_places=_AMOUNT_PLACES,
                               max_digits=_AMOUNT_WHOLE_DIGITS + _AMOUNT_PLACES)],
            mode="left_to_right",
            custom_error_type="amount",
            custom_error_message="an amount: a string such as 12.50, or a Decimal of at most "
                                 "two places and twelve whole digits",
            serialization=cs.plain_serializer_function_ser_schema(_two_places, when_used="json"))

    def __get_pydantic_json_schema__(self, core_schema: CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return {"type": "string", "pattern": AMOUNT_PATTERN}


Amount = Annotated[Decimal, _AmountSchema()]


@dataclass(frozen=True)
class JsonInteger:
    """A JSON Schema ``integer``: an int, or a float with no fraction (JSON Schema counts 2.0
    as an integer), never a bool or a numeric string; held as an int."""

    minimum: int | None = None
    maximum: int | None = None

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler
                                     ) -> CoreSchema:
        return cs.union_schema(
            [cs.int_schema(strict=True, ge=self.minimum, le=self.maximum),
             cs.chain_schema([cs.float_schema(strict=True),
                              cs.int_schema(ge=self.minimum, le=self.maximum)])],
            mode="left_to_right",
            custom_error_type="integer",
            custom_error_message=f"an integer{self._bounds()}")

    def _bounds(self) -> str:
        if self.minimum is not None and self.maximum is not None:
            return f" from {self.minimum} to {self.maximum}"
        if self.minimum is not None:
            return f" ≥ {self.minimum}"
        return f" ≤ {self.maximum}" if self.maximum is not None else ""

    def __get_pydantic_json_schema__(self, core_schema: CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        schema: dict[str, Any] = {"type": "integer"}
        if self.minimum is not None:
            schema["minimum"] = self.minimum
        if self.maximum is not None:
            schema["maximum"] = self.maximum
        return schema


Sku = Annotated[str, StringConstraints(min_length=1, max_length=64)]
Quantity = Annotated[int, JsonInteger(minimum=1, maximum=1000)]
Currency = Literal["USD", "EUR", "MXN", "COP", "ARS", "CLP", "PEN", "GBP"]
# An instant in UTC as RFC 3339 writes it, to the microsecond at most ("2026-12-06T09:00:00Z"):
# kept as the string it is, so that a payload comes back from a model exactly as it came.
UTC_TIMESTAMP_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?Z$"
UtcTimestamp = Annotated[str, StringConstraints(pattern=UTC_TIMESTAMP_PATTERN)]

# The payment token as pedidos sealed it for pagos (``saga_contracts.sealing``): on the wire it
# is never in the clear, and a model refuses a token that is not sealed.
SealedToken = Annotated[str, StringConstraints(pattern=sealing.PATTERN)]
