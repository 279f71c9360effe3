"""How a handler tells the consumer loop what kind of failure it hit (Part I §5.4)."""


class TransientError(Exception):
    """Might succeed if tried again later: retried with backoff, then dead-lettered."""


class PermanentError(Exception):
    """Will never succeed as it is: dead-lettered at once, with its history."""


class HandlerTimedOut(TransientError):
    """The handler ran past ``SAGA_HANDLER_TIMEOUT_S`` (a database answering in seconds, a lock
    held too long): its transaction was abandoned; the attempt counts like any transient one."""


class CommitOutcomeUnknown(Exception):
    """The connection failed while COMMIT was in flight: the transaction may have committed or
    not. Never report it as "nothing was done"; retry idempotently (inbox, Idempotency-Key)."""


def is_connection_failure(exc: BaseException) -> bool:
    """The database connection is gone (as opposed to the statement being wrong)."""
    from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

    if isinstance(exc, DBAPIError):
        return bool(exc.connection_invalidated) or isinstance(exc, OperationalError | InterfaceError)
    return isinstance(exc, OSError | ConnectionError)
