"""The gateway client (httpx) must not search the filesystem on every request.

httpcore asks which async library runs it on each request, by importing ``sniffio``; without
sniffio installed that import fails, after searching every entry of ``sys.path``, every time:
a tenth of pagos' CPU at 200 orders/s (benchmark, session 8). pagos depends on sniffio so the
import is a lookup in ``sys.modules``.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from httpcore._synchronization import current_async_library


class _RecordingFinder:
    def __init__(self) -> None:
        self.searched: list[str] = []

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        self.searched.append(name)
        return None


def test_asking_for_the_async_library_searches_for_no_module() -> None:
    finder = _RecordingFinder()

    async def ask() -> str:
        return current_async_library()

    sys.meta_path.insert(0, finder)
    try:
        assert asyncio.run(ask()) == "asyncio"
        assert asyncio.run(ask()) == "asyncio"
    finally:
        sys.meta_path.remove(finder)
    assert finder.searched == []
