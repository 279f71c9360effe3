"""Plugins: the modules ``SAGA_PLUGINS`` names (comma-separated), imported when a consumer or a
relay is built, which may wrap two seams of the messaging. The test suites inject their faults
this way (``saga_harness.fault_plugin``: crashes after a commit or an acknowledgement,
duplicated, late and swapped deliveries); production names none, and the services' images
hold no module to name.

A plugin module defines either hook or both:

- ``wrap_delivery(delivery, redeliver)``: returns the consumer's ``Delivery``
  (``sagakit.consumer.delivery``: how a partition's records are handed to their handling, and
  what follows each one handled), given the one it wraps and a function that handles a
  record again, alone;
- ``wrap_acked(acked)``: returns the relay's step that notes the rows Kafka acknowledged (a
  function of the list of rows), given the one it wraps.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, TypeVar

from sagakit.settings import InvalidConfiguration

T = TypeVar("T")


def load(names: str | None) -> list[ModuleType]:
    """The modules ``names`` lists, imported; a name that cannot be imported stops the process
    with a message that names the variable."""
    modules = []
    for name in (n.strip() for n in (names or "").split(",")):
        if not name:
            continue
        try:
            modules.append(importlib.import_module(name))
        except ImportError as exc:
            raise InvalidConfiguration(
                f"invalid configuration: SAGA_PLUGINS: cannot import {name!r} ({exc})") from exc
    return modules


def wrapped(seam: T, hook: str, plugins: list[ModuleType], *args: Any) -> T:
    """``seam`` as each plugin that defines ``hook`` wraps it, in the order they are named:
    ``seam`` itself when none does."""
    for plugin in plugins:
        wrap = getattr(plugin, hook, None)
        if wrap is not None:
            seam = wrap(seam, *args)
    return seam
