"""The saga's wire contract: topic names, header names and one JSON Schema per event version.

Everything here is what goes over the wire between services, so names are exactly those of the
saga standard (Spanish event names, `X-Saga-ID` headers). No service logic lives here.
"""
