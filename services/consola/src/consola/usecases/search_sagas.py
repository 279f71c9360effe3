"""Finding sagas through pedidos' published view (``pedidos_read.sagas_v1``): by saga id, order
id or customer id, state, age (started more than N minutes ago) and stuck (not terminal and past
its step's deadline or its own expiry). Every given filter applies; the page asks for none
until one is given."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from consola.domain.outcomes import ACTIVE, STATES
from consola.usecases.outcome import BadField
from consola.usecases.ports import SagaSearchReads

LIMIT = 200
"""Most sagas one search shows (the newest first)."""
MAX_MINUTES = 60 * 24 * 366


@dataclass(frozen=True)
class SagaSearch:
    saga_id: str | None = None
    order_id: str | None = None
    customer_id: str | None = None
    state: str | None = None
    older_than_min: int | None = None
    stuck: bool = False

    @property
    def given(self) -> bool:
        return any((self.saga_id, self.order_id, self.customer_id, self.state,
                    self.older_than_min is not None, self.stuck))


def _uuid(field: str, text: str) -> str | None:
    text = text.strip()
    if not text:
        return None
    try:
        return str(uuid.UUID(text))
    except ValueError:
        raise BadField(field, "a UUID (e.g. 3f2b8c1e-5d4a-4b7e-9c1d-2a6f8e0b7c45)") from None


def parse(*, saga_id: str = "", order_id: str = "", customer_id: str = "", state: str = "",
          older_than_min: str = "", stuck: str = "") -> SagaSearch:
    """The search a form asks for; ``BadField`` names the first field that is wrong."""
    customer = customer_id.strip() or None
    if customer is not None and (len(customer) > 200 or "\x00" in customer):
        raise BadField("customer_id", "at most 200 characters, no NUL")
    wanted_state = state.strip() or None
    if wanted_state is not None and wanted_state not in STATES:
        raise BadField("state", f"one of {', '.join(STATES)}")
    minutes: int | None = None
    if older_than_min.strip():
        try:
            minutes = int(older_than_min.strip())
        except ValueError:
            raise BadField("older_than_min", "a whole number of minutes") from None
        if not 0 <= minutes <= MAX_MINUTES:
            raise BadField("older_than_min", f"between 0 and {MAX_MINUTES} minutes")
    if stuck not in ("", "on", "true", "1"):
        raise BadField("stuck", "on or absent")
    return SagaSearch(_uuid("saga_id", saga_id), _uuid("order_id", order_id), customer,
                      wanted_state, minutes, bool(stuck))


async def search(reads: SagaSearchReads, wanted: SagaSearch) -> list[dict[str, Any]]:
    return await reads.search_sagas(
        saga_id=wanted.saga_id, order_id=wanted.order_id, customer_id=wanted.customer_id,
        state=wanted.state, older_than_s=None if wanted.older_than_min is None
        else wanted.older_than_min * 60, stuck=wanted.stuck, active=sorted(ACTIVE),
        limit=LIMIT)
