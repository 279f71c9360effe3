"""The message being handled, so that events emitted while handling it inherit its saga and span."""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sagakit.envelope import Envelope

current_message: ContextVar[Envelope | None] = ContextVar("current_message", default=None)
