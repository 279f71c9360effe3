"""Whether a record's ``X-Replay-For`` is believed.

``sagactl replay`` addresses a replayed dead letter to the one service that gave up on it; the
topic's other consumers handled the original and skip the replay. Anyone who can write to a
topic can write that header too, and would hide a record from the services that should see it
by naming another one; so the header is believed only with the operator's signature of the
record (``saga_contracts.replay_signature``), checked against the public keys this service was
given (``SAGA_OPERATOR_PUBLIC_KEYS``).

A record whose ``X-Replay-For`` is not signed, or not by a known key, or not for this very
record, is handled as if it had no such header, by every service that handles its event type:
it is counted in ``saga_forged_replays_total`` and logged as a warning. The service it names
handles it as it would a signed one, under the message id it carries: the inbox still drops a
second copy. Only records with the header pay for the check.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Literal

from saga_contracts import headers as h
from saga_contracts.replay_signature import OperatorKeys, Signed
from sagakit.consumer.records import RawRecord
from sagakit.observability import metrics

log = logging.getLogger("sagakit.consumer")

# How much of a header the sender chose the warning quotes.
_QUOTED_CHARS = 80


def _quoted(text: str) -> str:
    return repr(text if len(text) <= _QUOTED_CHARS else text[:_QUOTED_CHARS] + "…")


class ReplayAddress:
    def __init__(self, service: str, keys: OperatorKeys) -> None:
        self.service = service
        self.keys = keys

    def for_another_service(self, raw: RawRecord, headers: Mapping[str, str],
                            replay_for: str) -> bool:
        """Whether ``raw``, addressed with ``X-Replay-For: replay_for``, is a replay the
        operator signed for another service, which this one skips."""
        return self.check(raw, headers, replay_for) == "another"

    def check(self, raw: RawRecord, headers: Mapping[str, str], replay_for: str
              ) -> Literal["mine", "another", "forged"]:
        """``mine``: a replay the operator signed for this service, the only thing a handler
        may treat as a replay; ``another``: signed for another service; ``forged``: not
        signed by the operator, handled as any record."""
        signed = Signed(replay_for=replay_for, topic=raw.topic, key=raw.key, value=raw.value,
                        message_id=headers.get(h.MESSAGE_ID, ""),
                        saga_id=headers.get(h.SAGA_ID, ""))
        forgery = self.keys.forgery(headers.get(h.REPLAY_SIGNATURE), signed)
        if forgery is None:
            return "another" if replay_for != self.service else "mine"
        metrics.FORGED_REPLAYS.labels(self.service, forgery.value).inc()
        log.warning("X-Replay-For %s on %s[%d]@%d not signed by the operator (%s): handled as "
                    "any record", _quoted(replay_for), raw.topic, raw.partition, raw.offset,
                    forgery.value,
                    extra={"service": self.service, "reason": forgery.value,
                           "message_id": _quoted(signed.message_id)})
        return "forged"
