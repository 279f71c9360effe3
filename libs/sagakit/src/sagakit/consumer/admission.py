"""What a record is before anything is written for it: one to handle (its envelope decoded, its
payload valid against its schema and parsed into its model), one to skip, or one to dead-letter
at once and why.

Bytes that are not an envelope, an event type unknown to the catalogue, a version of a handled
event that the schema registry does not hold and an invalid payload of a handled event are dead
letters; so is a payload its schema admits and its model refuses
(``schema_invalid`` too: the model is the schema as this code reads it), and, before its payload
is looked at, a handled event that did not come on its topic, from its producer, keyed by its
saga (``contract_violation``, ``sagakit.consumer.contract``). An event this service does not
handle is skipped without validating or parsing its payload (that is for the services that
handle it), as is a dead letter the operator replayed for another service (``replays``: an
``X-Replay-For`` without the operator's signature is not believed).

The payload is validated against the schema of its exact version as the registry holds it
(``sagakit.schema_registry.schemas``: a dict look-up once cached). ``unknown_event_type``: an
event type neither the contracts' package nor the registry knows (at its MAJOR);
``unknown_schema``: a version of an event type this service handles that the registry does not
hold (or, the registry not answering, that the package cannot read either).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from saga_contracts import headers as h
from saga_contracts import registry
from saga_contracts.replay_signature import OperatorKeys
from sagakit.consumer.contract import Origin, origins_of, violation
from sagakit.consumer.records import Admitted, Outcome, RawRecord, Rejected, Verdict
from sagakit.consumer.replays import ReplayAddress
from sagakit.consumer.subscription import Subscription
from sagakit.envelope import Envelope, UndecodableMessage, decode_headers
from sagakit.message import Message
from sagakit.schema_registry.schemas import Schemas, UnknownSchema


class Admission:
    def __init__(self, service: str, subscriptions: Mapping[str, Subscription[Any]],
                 origins: Mapping[str, Origin] | None = None,
                 operator_keys: OperatorKeys | None = None,
                 schemas: Schemas | None = None) -> None:
        """``origins``: where each handled event type must come from; by default the
        catalogue's (a test that reads a scratch topic names it there). ``operator_keys``: the
        keys a replay's address must be signed with to be believed; none, by default.
        ``schemas``: what payloads are validated against; the contracts' package's, by
        default."""
        self.service = service
        self.schemas = schemas if schemas is not None else Schemas.from_package(service)
        self.replays = ReplayAddress(service, operator_keys or OperatorKeys())
        self.subscriptions = subscriptions
        """By event type."""
        self.origins = dict(origins) if origins is not None else origins_of(subscriptions)
        missing = set(subscriptions) - set(self.origins)
        if missing:
            raise ValueError(f"no origin for the handled event types {sorted(missing)}")

    async def admit(self, raw: RawRecord) -> Verdict:
        headers = decode_headers(raw.headers)
        replay_for = headers.get(h.REPLAY_FOR)
        replay = self.replays.check(raw, headers, replay_for) if replay_for else None
        if replay == "another":
            # A dead letter replayed for another consumer: this service processed the original.
            return Outcome("skipped")
        try:
            envelope = Envelope.from_record_value(raw.value)
        except UndecodableMessage as exc:
            return Rejected(None, "undecodable", exc, repr(exc))
        event_type = envelope.event_type
        subscription = self.subscriptions.get(event_type)
        try:
            if subscription is None:
                # Unknown to the catalogue is a dead letter for every reader; the payload of an
                # event this service does not handle is its handlers' business, and validating
                # it here (most records on a topic are such events) is CPU for nothing.
                if not await self.schemas.knows(event_type, envelope.schema_version):
                    raise registry.UnknownEventType(
                        f"{event_type} {envelope.schema_version}: not in the contracts' "
                        f"package nor in {self.schemas.where}")
            else:
                refused = violation(raw, envelope, headers.get(h.SAGA_ID),
                                    self.origins[event_type])
                if refused is not None:
                    return Rejected(envelope, "contract_violation", refused, str(refused))
                version = envelope.schema_version
                schema = (self.schemas.cached(event_type, version)
                          or await self.schemas.resolve(event_type, version))
                schema.validate(envelope.payload)
                # Parsed once, here: the handler, its retries and a shared transaction get
                # this message.
                message = Message.parse(envelope, subscription.model,
                                        replayed=replay == "mine",
                                        address=(raw.topic, raw.partition, raw.offset))
        except registry.UnknownEventType as exc:
            return Rejected(envelope, "unknown_event_type", exc, repr(exc))
        except UnknownSchema as exc:
            return Rejected(envelope, "unknown_schema", exc, str(exc))
        except registry.SchemaViolation as exc:
            return Rejected(envelope, "schema_invalid", exc, str(exc))
        if subscription is None:
            return Outcome("skipped", event_type=event_type)
        return Admitted(message, subscription, headers.get(h.TRACEPARENT),
                        headers.get(h.TRACESTATE))
