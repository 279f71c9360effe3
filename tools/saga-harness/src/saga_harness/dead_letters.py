"""Dead letters made for tests of what operators do with them (archive, count, retention): a
row in a service's outbox as its consumer writes one. Its content matters not to those tests:
no replay is made of it (forged letters for replays are in ``saga_harness.forgeries``)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence

from saga_harness import db


async def dead_letter(service: str, errors: Sequence[str] = ("TimeoutError: slow",)) -> str:
    """A published dead letter in ``service``'s outbox, one attempt per error of ``errors``
    (the last one the letter's error class); its id."""
    letter_id = str(uuid.uuid4())
    await db.execute(
        f"INSERT INTO {service}.outbox (message_id, saga_id, topic, event_type, schema_version, "
        "payload, headers, status) VALUES ($1::uuid, $2, $3, 'PagoExitoso', '1.0.0', $4::jsonb, "
        "'{}'::jsonb, 'published')", letter_id, str(uuid.uuid4()), f"{service}-dlq",
        json.dumps({"reason": "retries_exhausted", "error_class": "X",
                    "attempts": [{"attempt": n, "at": f"t{n}", "error": error}
                                 for n, error in enumerate(errors, start=1)],
                    "original": {"topic": "payment-events", "partition": 1, "offset": 2}}))
    return letter_id
