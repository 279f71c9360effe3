"""Every event of the saga that pedidos listens to: decide, apply, record.

One handler serves all of them because the decision is the state machine's; this module only
loads the saga under its row lock and writes what the machine decided.
"""

from __future__ import annotations

import logging

from sagakit.consumer import Handler
from sagakit.envelope import Envelope
from sagakit.unit_of_work import UnitOfWork

from pedidos.adapters.order_repository import OrderRepository
from pedidos.config import PedidosSettings
from pedidos.domain.order import Annotation, Transition, on_event
from pedidos.usecases.transitions import apply_transition

log = logging.getLogger("pedidos.track_saga")

TRACKED_EVENTS = ("StockVerificado", "StockNoDisponible", "PagoExitoso", "PagoRechazado",
                  "StockAsignado", "FalloAsignacion", "ReembolsoEjecutado", "FalloReembolso")


def make_track_saga(settings: PedidosSettings) -> Handler:
    async def track_saga(uow: UnitOfWork, event: Envelope) -> None:
        repo = OrderRepository(uow.connection)
        saga = await repo.lock_saga(event.saga_id)
        if saga is None:
            from sagakit.errors import PermanentError
            raise PermanentError(f"unknown saga {event.saga_id}")
        decision = on_event(saga.status, event.event_type)
        detail = {"source_service": event.source_service}
        order_values = {}
        if event.event_type == "PagoExitoso":
            order_values["charge_id"] = event.payload.get("charge_id")
        if isinstance(decision, Transition):
            await apply_transition(uow, saga, decision, cause=event.event_type,
                                   actor=event.source_service, settings=settings,
                                   message_id=event.message_id, detail=detail,
                                   order_values=order_values)
        else:
            if isinstance(decision, Annotation):
                order_values["refund_status"] = decision.refund_status.value
            if order_values:
                await repo.annotate(saga.order_id, **order_values)
            # Stale, late or duplicate-by-meaning: recorded in the history, state unchanged.
            await repo.audit(saga.saga_id, event_type=event.event_type,
                             actor=event.source_service, from_status=saga.status,
                             to_status=saga.status, message_id=event.message_id,
                             detail={**detail, "ignored": decision is None,
                                     **({"refund_status": decision.refund_status.value}
                                        if isinstance(decision, Annotation) else {})})
            log.info("event does not move the order (%s)", saga.status.value,
                     extra={"saga_id": event.saga_id, "event_type": event.event_type})
        await uow.commit()

    return track_saga
