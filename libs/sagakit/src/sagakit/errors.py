"""How a handler tells the consumer loop what kind of failure it hit
(docs/standard.md#failures-retries-and-dead-letters)."""

import asyncio

import asyncpg


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


# SQLSTATEs of a server that is going away, not there yet, or ending this session: class 08
# (connection exception) and admin_shutdown, crash_shutdown, cannot_connect_now (the database
# is starting up), database_dropped, idle_session_timeout and idle_in_transaction_session_
# timeout (the server ended the session). asyncpg reports some of these as a plain error, not
# as a connection error.
SERVER_GONE_SQLSTATES = {"57P01", "57P02", "57P03", "57P04", "57P05", "25P03"}

# What a dead connection raises: the socket is gone, or the server said it is shutting it down
# (class 57, e.g. pg_terminate_backend) before it went. When that farewell arrived while the
# connection sat idle, asyncpg's protocol is left mid-error and refuses the next statement with
# InternalClientError ("another operation is in progress"): the connection is as good as dead.
CONNECTION_LOST = (OSError, asyncio.TimeoutError, asyncpg.InterfaceError,
                   asyncpg.PostgresConnectionError, asyncpg.OperatorInterventionError,
                   asyncpg.InternalClientError)


class StaleRead(TransientError):
    """What a handler read changed before its write went in, so nothing was written (the
    write's guard found the state it was decided on gone). Like a serialization failure, whose
    SQLSTATE it carries, it is retried at once: the retry reads the new state."""

    sqlstate = "40001"


def _diagnostic(exc: BaseException, *fields: str) -> str | None:
    """A field of the PostgreSQL error behind ``exc`` (SQLAlchemy wraps asyncpg's error)."""
    orig = getattr(exc, "orig", None)
    for candidate in (exc, orig, getattr(orig, "__cause__", None)):
        for name in fields:
            value = getattr(candidate, name, None)
            if value:
                return str(value)
    return None


def sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE behind a driver error, if there is one."""
    return _diagnostic(exc, "sqlstate", "pgcode")


def violated_unique_key_of(exc: BaseException) -> str | None:
    """The table whose unique key refused a row (``unique_violation``), else None."""
    return _diagnostic(exc, "table_name") if sqlstate(exc) == "23505" else None


def is_connection_failure(exc: BaseException) -> bool:
    """The database connection is gone (as opposed to the statement being wrong)."""
    from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

    code = sqlstate(exc)
    if code is not None:
        # The server answered with an error: the connection is gone only if the error says so.
        # Any other (a statement timeout, a lock timeout, a serialization failure) is the
        # statement's, even where SQLAlchemy wraps it as an OperationalError: a COMMIT that
        # fails so did not commit, and is not of unknown outcome.
        return code.startswith("08") or code in SERVER_GONE_SQLSTATES
    if isinstance(exc, DBAPIError):
        return bool(exc.connection_invalidated) or isinstance(exc, OperationalError | InterfaceError)
    # asyncpg's own errors, from a statement sent on the driver's connection.
    return isinstance(exc, (*CONNECTION_LOST, ConnectionError))
