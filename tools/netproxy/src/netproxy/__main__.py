"""``python -m netproxy``: the proxy part of the local stack (SAGA_NETPROXY=1)."""

from __future__ import annotations

import asyncio
import logging

from netproxy.control import serve

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
asyncio.run(serve())
