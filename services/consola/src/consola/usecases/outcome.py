"""What an operator's action came to, as the page says it, and the refusals of a form's field."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Outcome:
    done: bool
    """The action holds now (made, or made before the same way)."""
    status: int
    """The service's answer."""
    title: str
    detail: str


class BadField(ValueError):
    """A form's field the console refuses before calling anyone (the page answers 422)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def required_text(field: str, value: str | None, max_chars: int) -> str:
    """``value`` stripped: not empty, no NUL, at most ``max_chars``."""
    text = (value or "").strip()
    if not text:
        raise BadField(field, "required")
    if "\x00" in text:
        raise BadField(field, "holds a NUL character")
    if len(text) > max_chars:
        raise BadField(field, f"at most {max_chars} characters")
    return text
