"""Structured JSON logs (Part I §7.2) through structlog, for stdlib and structlog loggers alike.

Every line carries service, ISO-8601 UTC timestamp and level; saga fields (saga_id, event_type,
schema_version, span_id, parent_span_id, status, duration_ms, attempt) come from the ``extra`` of
the call or from bound context variables. Declared sensitive fields are masked or dropped.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

from sagakit import jsonio
from sagakit.privacy import redact

_SAGA_FIELDS = ("saga_id", "event_type", "schema_version", "span_id", "parent_span_id",
                "status", "duration_ms", "attempt")


def _add_service(service: str) -> Any:
    def processor(_: Any, __: str, event_dict: dict[str, Any]) -> dict[str, Any]:
        event_dict.setdefault("service", service)
        return event_dict
    return processor


def _saga_defaults(_: Any, __: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    # A saga log line always has the mandatory keys, null when they do not apply.
    if "saga_id" in event_dict:
        for key in _SAGA_FIELDS:
            event_dict.setdefault(key, None)
    return event_dict


def _redact(_: Any, __: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    return redact(event_dict)


def _skip_what_no_line_carries() -> None:
    """A line carries none of the caller's file and line, thread or process: the standard
    library is told not to look them up for every record (the logging HOWTO's "Optimization"
    section; the caller's frame walk was 7 % of a line's cost)."""
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False


def configure(service: str, level: str = "INFO") -> None:
    _skip_what_no_line_carries()
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.ExtraAdder(),
        structlog.processors.TimeStamper(fmt="iso", utc=True, key="timestamp"),
        _add_service(service),
        _saga_defaults,
        _redact,
    ]
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(serializer=jsonio.dumps_for_log),
        ],
    )
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("aiokafka", "kafka", "httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
