"""The two kinds of model an event payload is made of: the event itself and the objects nested
in it."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict


class Event(BaseModel):
    """The payload of one event type, as its latest schema describes it.

    Fields a newer MINOR version of the schema adds (``additionalProperties: true``) are accepted
    and dropped: a model holds what this code knows of the event, and the raw payload stays in
    the envelope for whoever needs all of it (logs, dead letters, replay)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    event_type: ClassVar[str]

    def to_payload(self) -> dict[str, Any]:
        """The payload as JSON-ready values (amounts as two-place strings, lists for tuples), in
        the schema's field order. Optional fields left unset (None) are left out: the schemas
        allow them absent, not null."""
        payload: dict[str, Any] = self.__pydantic_serializer__.to_python(
            self, mode="json", exclude_none=True)
        return payload


class EventPart(BaseModel):
    """An object nested in a payload (an order line, an address): its schema forbids fields it
    does not name, and so does the model."""

    model_config = ConfigDict(frozen=True, extra="forbid")
