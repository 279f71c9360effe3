"""The transactional outbox's way out: the relay that publishes what units of work committed,
the signal that wakes it, and the housekeeping of the table.

- ``relay``: selects pending rows (leader only), hands them to the ``publisher``, marks them.
- ``leadership``: the lease that makes one relay instance the leader, and fences a former one.
- ``publisher``: sends a batch to Kafka, waits for its acknowledgements, deals with refusals.
- ``statements``: the SQL and session settings of the relay's own connection.
- ``signal``: how a commit in this process wakes its relay without a ``NOTIFY`` (ADR 0007).
- ``housekeeping``: deletion of published rows past retention, and the outbox gauges.
"""

from sagakit.outbox.relay import OutboxRelay
from sagakit.outbox.signal import OutboxSignal

__all__ = ["OutboxRelay", "OutboxSignal"]
