"""Plugins are what SAGA_PLUGINS names and nothing else: without it the consumer hands records
over as they came and the relay notes Kafka's acknowledgements itself, and no test code is
imported; a plugin wraps the seams whose hooks it defines, in the order named; a name that
cannot be imported stops the service naming the variable."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from types import ModuleType
from typing import Any

import pytest

from sagakit import plugins
from sagakit.consumer import EventConsumer
from sagakit.consumer.delivery import InOrder
from sagakit.settings import InvalidConfiguration, MessagingSettings


def _consumer(settings: MessagingSettings) -> EventConsumer:
    def no_unit_of_work(**_: Any) -> Any:
        raise AssertionError("nothing is handled here")
    return EventConsumer(service="s", topics=[], subscriptions=[], uow_factory=no_unit_of_work,
                         settings=settings)


def test_without_plugins_the_consumer_hands_records_over_as_they_came() -> None:
    assert type(_consumer(MessagingSettings()).partitions.delivery) is InOrder


def test_a_plugin_wraps_the_seams_whose_hooks_it_defines_in_the_order_named() -> None:
    first, second = ModuleType("first"), ModuleType("second")
    first.wrap_acked = lambda acked: ("first", acked)  # type: ignore[attr-defined]
    second.wrap_acked = lambda acked: ("second", acked)  # type: ignore[attr-defined]
    second.wrap_delivery = lambda delivery, redeliver: (delivery, redeliver)  # type: ignore[attr-defined]
    assert plugins.wrapped("acked", "wrap_acked", [first, second]) == \
        ("second", ("first", "acked"))
    assert plugins.wrapped("delivery", "wrap_delivery", [first], "again") == "delivery"
    assert plugins.wrapped("delivery", "wrap_delivery", [second], "again") == \
        ("delivery", "again")


def test_the_named_modules_are_imported() -> None:
    assert plugins.load(None) == plugins.load(" , ") == []
    assert plugins.load("json, string") == [sys.modules["json"], sys.modules["string"]]


def test_a_plugin_that_cannot_be_imported_stops_the_service_naming_the_variable() -> None:
    with pytest.raises(InvalidConfiguration, match="SAGA_PLUGINS: cannot import 'no_such'"):
        plugins.load("json,no_such")


def test_a_service_imports_no_fault_injection_unless_a_plugin_is_named() -> None:
    # In a process of its own: this test run has imported the harness already.
    code = textwrap.dedent("""
        import sys
        import inventario.app, pagos.app, pedidos.app
        from sagakit.consumer import EventConsumer
        from sagakit.outbox import OutboxRelay
        from sagakit.settings import MessagingSettings
        from sagakit.store import messaging_tables, service_metadata
        EventConsumer(service="s", topics=[], subscriptions=[], uow_factory=None,
                      settings=MessagingSettings())
        OutboxRelay(None, messaging_tables(service_metadata("s")), "s", MessagingSettings())
        print(sorted(m for m in sys.modules if m.startswith("saga_harness")))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin"}, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
