"""uvicorn with an idle main loop that costs one wake-up a second instead of ten, and a bound on
how long a client may take to send a request's headers.

uvicorn's main loop sleeps 0.1 s between ticks to refresh the Date header (once a second) and
to notice a shutdown request. On an idle service those ten wake-ups a second are most of what
the process does. This server ticks once a second, the Date header's resolution, and wakes at
once when a signal asks it to stop, so shutdown is no slower.

uvicorn bounds the wait between two requests of a connection (``timeout_keep_alive``) but not the
wait for a request's headers: a client that opens connections and sends a few bytes of headers
now and then holds them, and every one counts against ``limit_concurrency`` (a slowloris).
``HeaderTimeoutProtocol`` closes a connection whose request's headers have not all arrived
within ``header_timeout_s`` of the connection or of the request's first byte.
"""

from __future__ import annotations

import asyncio
import contextlib
from types import FrameType
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

TICK_S = 1.0
_TICKS_PER_SECOND = 10  # uvicorn's on_tick counts tenths of a second


class QuietServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._exit_requested: asyncio.Event | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        # A signal handler runs between two bytecodes of the main thread: hand the wake-up
        # to the loop rather than touching the event from here.
        if self._loop is not None and self._exit_requested is not None:
            self._loop.call_soon_threadsafe(self._exit_requested.set)

    async def main_loop(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._exit_requested = asyncio.Event()
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + _TICKS_PER_SECOND) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._exit_requested.wait(), TICK_S)
            should_exit = await self.on_tick(counter)


class HeaderTimeoutProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, with a deadline for each request's headers."""

    header_timeout_s: float = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._headers_due: asyncio.TimerHandle | None = None

    def _await_headers(self) -> None:
        if self._headers_due is None:
            self._headers_due = self.loop.call_later(self.header_timeout_s, self._headers_late)

    def _headers_arrived(self) -> None:
        if self._headers_due is not None:
            self._headers_due.cancel()
            self._headers_due = None

    def _headers_late(self) -> None:
        self._headers_due = None
        if not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_headers()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._await_headers()

    def on_headers_complete(self) -> None:
        self._headers_arrived()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._headers_arrived()
        super().connection_lost(exc)


def with_header_timeout(header_timeout_s: float) -> type[HeaderTimeoutProtocol]:
    """The protocol class to pass as uvicorn's ``http``, with this deadline for headers."""
    return type("HeaderTimeoutProtocol", (HeaderTimeoutProtocol,),
                {"header_timeout_s": header_timeout_s})


def config(app: Any, *, header_timeout_s: float, **options: Any) -> uvicorn.Config:
    """uvicorn's configuration, its HTTP protocol holding each request's headers to
    ``header_timeout_s``; ``options`` are ``uvicorn.Config``'s."""
    return uvicorn.Config(app, http=with_header_timeout(header_timeout_s), **options)


def run(app: Any, *, header_timeout_s: float, **options: Any) -> None:
    """``uvicorn.run`` with the quiet main loop and the header deadline (``config``)."""
    QuietServer(config(app, header_timeout_s=header_timeout_s, **options)).run()
