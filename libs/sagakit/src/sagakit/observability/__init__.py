"""What a service shows of itself: Prometheus ``metrics``, OpenTelemetry ``tracing``, JSON log
lines (``structured_logging``) and the ``privacy`` rules that hide sensitive fields in them.

A service imports these four modules; ``metrics_server`` (the ``/metrics`` endpoint's server)
is the runtime's own."""
