"""What pedidos asks of the consumer for each event it tracks, pinned: a flag flipped by mistake
changes how a saga step commits without any other unit test noticing."""

from __future__ import annotations

from pedidos.adapters.order_repository import OrderRepository
from pedidos.app import subscriptions
from pedidos.config import PedidosSettings

PARTICIPANT_EVENTS = {"StockVerificado", "StockNoDisponible", "PrecioRechazado",
                      "PrecioRechazado_v2", "PagoExitoso",
                      "PagoRechazado", "StockAsignado", "FalloAsignacion", "ReembolsoEjecutado",
                      "FalloReembolso"}


def test_every_participant_event_is_tracked_once() -> None:
    subs = subscriptions(PedidosSettings(), OrderRepository)
    assert sorted(s.event_type for s in subs) == sorted(PARTICIPANT_EVENTS)


def test_the_tracker_reads_outside_a_transaction_and_may_share_one() -> None:
    # The tracker's decision is guarded by the status it was taken on (ADR 0005) and all that
    # follows its commit waits in after_commit, which is what sharing a transaction needs
    # (ADR 0006).
    for sub in subscriptions(PedidosSettings(), OrderRepository):
        assert sub.reads_outside_transaction, sub.event_type
        assert sub.shares_transaction, sub.event_type
        assert sub.isolation_level is None, sub.event_type
