"""Identifiers for rows that are keys of an index: ordered by creation time.

A random key (UUID version 4) lands on any leaf page of its index; on a table kept for days, after
each checkpoint nearly every insert then dirties a page not yet written since, and PostgreSQL logs
the whole page (a full-page image, 8 kB of WAL). A key ordered by time (UUID version 7, RFC 9562)
lands on the last few pages. The standard asks for version 4 only for the saga id
(docs/standard.md#saga-and-span-ids), which stays random; every other id a service makes is one of
these.
"""

from __future__ import annotations

import uuid

import uuid_utils.compat


def time_ordered_id() -> uuid.UUID:
    return uuid_utils.compat.uuid7()
