"""The transactional outbox's way out: the relay that publishes what units of work committed,
and the housekeeping of the table. The signal that wakes it is the store's
(``sagakit.store.outbox_signal``): units of work send it, and the store imports nothing of
the outbox.

- ``relay``: selects pending rows (leader only), hands them to the ``publisher``, marks them.
- ``leadership``: the lease that makes one relay instance the leader, and fences a former one.
- ``publisher``: sends a batch to Kafka, waits for its acknowledgements, deals with refusals.
- ``statements``: the SQL and session settings of the relay's own connection.
- ``housekeeping``: deletion of published rows past retention, and the outbox gauges.
"""

from sagakit.outbox.relay import OutboxRelay
from sagakit.store.outbox_signal import OutboxSignal

__all__ = ["OutboxRelay", "OutboxSignal"]
