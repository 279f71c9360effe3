"""How a service's HTTP API answers what went wrong below it: the database away, busy or a
commit in doubt (503, saying whether anything may have been done), a race lost every time
(503), and a request that fails validation (422, whatever its input held)."""

from __future__ import annotations

import logging
import math
from typing import Any

import asyncpg
from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from sagakit.errors import CommitOutcomeUnknown, is_connection_failure
from sagakit.store.conflicts import StillConflicting

log = logging.getLogger("sagakit.runtime")


def install_database_error_handlers(app: FastAPI) -> None:
    """503 + Retry-After when the database is unreachable, telling apart a request that failed
    before its COMMIT (nothing was done) from one whose COMMIT was in flight (unknown), and
    when no connection of the pool came free within its timeout."""
    @app.exception_handler(DBAPIError)
    @app.exception_handler(asyncpg.InterfaceError)  # from the unit of work's commit statement
    @app.exception_handler(asyncpg.PostgresError)
    @app.exception_handler(OSError)
    async def database_unavailable(request: Request, exc: Exception) -> JSONResponse:
        if not is_connection_failure(exc):
            raise exc
        # Failed before COMMIT: nothing was committed; the client may simply retry.
        log.warning("request failed, database unavailable: %r", exc)
        return JSONResponse({"detail": "database unavailable, nothing was done; retry later"},
                            status_code=503, headers={"Retry-After": "1"})

    @app.exception_handler(PoolTimeout)
    async def database_busy(request: Request, exc: Exception) -> JSONResponse:
        # Every pooled connection stayed in use for the pool's timeout (a database paused or
        # slow under load): this request got none for the statement that needed one. It does
        # not claim nothing was done (a request may have committed on an earlier connection):
        # the retry it asks for is the idempotent one.
        log.warning("request failed, no database connection free in time: %r", exc)
        return JSONResponse({"detail": "database busy: no connection was free in time; retry "
                                       "later (with the same Idempotency-Key, if any)"},
                            status_code=503, headers={"Retry-After": "1"})

    @app.exception_handler(CommitOutcomeUnknown)
    async def commit_in_doubt(request: Request, exc: Exception) -> JSONResponse:
        # The connection died with COMMIT in flight: the request may have taken effect.
        log.warning("request outcome unknown, connection lost during commit: %r", exc.__cause__)
        return JSONResponse({"detail": "database connection lost during commit: the request may "
                                       "or may not have taken effect; retry with the same "
                                       "Idempotency-Key to learn which"},
                            status_code=503, headers={"Retry-After": "1"})

    @app.exception_handler(StillConflicting)
    async def still_conflicting(request: Request, exc: Exception) -> JSONResponse:
        # Rolled back every time by PostgreSQL (sagakit.store.conflicts): nothing was done.
        log.warning("request lost every race it was retried in: %s", exc)
        return JSONResponse({"detail": "the request collided with concurrent changes and "
                                       "nothing was done; retry"},
                            status_code=503, headers={"Retry-After": "1"})


def install_request_validation_handler(app: FastAPI) -> None:
    """422 with every invalid field's location and input, whatever that input held.

    FastAPI's own handler echoes each invalid input into a strict JSON response, so an input
    that JSON cannot carry turned the 422 into a 500: ``NaN`` or ``Infinity`` (Python reads
    them in a request body) and a lone surrogate (``"\\ud800"``), which UTF-8 cannot encode.
    """
    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(status_code=422,
                            content={"detail": json_safe(jsonable_encoder(exc.errors()))})


def json_safe(value: Any) -> Any:
    """``value`` with what strict UTF-8 JSON cannot hold spelled out: a non-finite number as
    the token it was sent as, an unencodable character as its escape."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {json_safe(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value
