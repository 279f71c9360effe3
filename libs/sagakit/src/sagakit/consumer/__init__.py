"""The consumer loop: decode, validate, deduplicate, handle, commit, then acknowledge.

For each record, in partition order:
1. Decode the envelope, check that a handled event came on its topic, from its producer,
   keyed by its saga (``contract``), validate its payload against its schema and parse it into
   the model its subscription names (the handler gets a ``sagakit.message.Message``). Bytes
   that are not an envelope, an unknown event type, a record that breaks its contract or an
   invalid payload are dead-lettered at once; event types this service does not handle are
   skipped (``admission``), as are replays the operator signed for another service
   (``replays``).
2. In one unit of work: run the handler and commit, with the message id claimed in
   ``processed_messages`` in the same transaction (a duplicate is found there and rolled
   back) (``handling``). The offset is committed to Kafka only after that (``offsets``).
3. ``TransientError`` (and database serialisation failures, deadlocks, lock timeouts) are
   retried with exponential backoff and jitter (``retry_policy``); while a record waits for its
   retry, its partition is rewound to it and paused, so the other partitions keep flowing
   (``partitions``, ``lanes``). When the attempts run out, and at once for a ``PermanentError``
   or any other exception, the message goes to the service's dead-letter topic with every
   attempt's time and error (``dead_lettering``). An unreachable database is waited out, never
   a reason to dead-letter (``processing``).
4. Queued records whose handlers allow it share one transaction (``shared_runs``, ADR 0006).
Partitions are handled concurrently, each in order, and stay in the fetch while busy.

The parts, each a module: ``loop`` (``EventConsumer``: the Kafka session, and where the parts
are put together), ``lanes`` (a task per partition, pause and rewind), ``partitions`` (a
partition's batch in order, the offset up to the first record not done), ``delivery`` (the seam
fault injection wraps), ``admission``, ``contract`` (where a handled event must come from),
``replays`` (whether a replay's ``X-Replay-For`` is the operator's),
``processing`` (one record until decided), ``handling`` (one attempt in its unit of work),
``retry_policy``, ``shared_runs``, ``dead_lettering``, ``offsets`` (commits to Kafka, the lag
gauge), ``reporting`` (metrics and log lines), ``records`` (what the parts hand each other) and
``subscription`` (what a service declares).
"""

from sagakit.consumer.contract import Origin
from sagakit.consumer.loop import EventConsumer
from sagakit.consumer.records import Outcome, RawRecord
from sagakit.consumer.subscription import Handler, Subscription, topics_of

__all__ = ["EventConsumer", "Handler", "Origin", "Outcome", "RawRecord", "Subscription",
           "topics_of"]
