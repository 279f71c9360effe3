"""Fault injection points for the crash tests; inert unless their variable is set."""

from __future__ import annotations

import logging
import os
import signal

log = logging.getLogger("sagakit.faults")


def crash_now(point: str, event_type: str) -> None:
    """SIGKILL this process: no cleanup, no flush, exactly like a crash."""
    log.critical("fault injection: SIGKILL at %s (%s)", point, event_type)
    for handler in logging.getLogger().handlers:
        handler.flush()
    os.kill(os.getpid(), signal.SIGKILL)
