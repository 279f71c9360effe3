"""The saga's wire contract: topic names, header names, one JSON Schema per event version and
one typed model per event type (``saga_contracts.events``: ``parse`` a payload into its model,
``to_payload`` it back), how the payment token is sealed for pagos on the wire (``sealing``),
and what of an event is never shown (``redaction``).

Everything here is what goes over the wire between services, so names are exactly those of the
saga standard (Spanish event names, `X-Saga-ID` headers). No service logic lives here.
"""
