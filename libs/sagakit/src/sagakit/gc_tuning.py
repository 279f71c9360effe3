"""The cyclic garbage collector, set for a long-running service that allocates per message.

CPython collects its youngest generation every 700 net allocations of container objects, and
every collection of an older generation walks every object that survived into it: the
modules, SQLAlchemy's and pydantic's models, aiokafka's and FastAPI's machinery, none of which
will ever be garbage. A service handling a message allocates a few thousand objects (an
envelope, JSON, a log record, a span, a statement's parameters and rows), so it collected
several times per message: 8 % of pedidos' samples were in ``gc_collect_main`` at saturation
(py-spy ``--native``, docs/benchmarks.md, session 11).

Two standard measures (the ones CPython's ``gc.freeze`` documentation suggests for servers):
what the process built to start is moved out of the collector's reach once it is built, and
the youngest generation is collected less often. Reference counting still frees every object
that is not part of a cycle at once; cycles wait a little longer.
"""

from __future__ import annotations

import gc
import logging

log = logging.getLogger("sagakit.gc")


def settle_heap(gen0_threshold: int) -> None:
    """Call once the service has started. ``gen0_threshold`` 0 leaves the collector as CPython
    sets it."""
    if gen0_threshold <= 0:
        return
    gc.collect()
    # Everything alive now was built to start the service and lives as long as it does.
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(gen0_threshold, gen1, gen2)
    log.info("garbage collector settled: %s objects frozen, thresholds %s",
             gc.get_freeze_count(), gc.get_threshold())
