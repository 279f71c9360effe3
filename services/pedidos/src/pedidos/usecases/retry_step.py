"""POST /sagas/{id}/retry: an operator drives the saga's current step again.

In this choreography pedidos asks for a step only by emitting an event of its own, and the only
such step is the stock check: OrdenSolicitada asks inventario for it. Retrying it emits that
OrdenSolicitada again (in the versions pedidos publishes now), the same order (its payment
token sealed as it was) under a new message id, since inventario's inbox recorded the first one
(processed, or dead-lettered) and would drop a copy; and it starts the step's deadline afresh.
It is safe to do twice: inventario keeps the first check it recorded for the saga, pedidos
moves on the first answer and ignores any later one (``pedidos.domain.order.on_event``), and
pagos charges a saga once (its payment is unique per saga). The other steps wait for an event
that only another service may write (docs/operations.md, "Retrying a step"): they are refused
(``CannotRetry``, 409).
"""

from __future__ import annotations

from pedidos.config import PedidosSettings
from pedidos.domain.order import on_retry_requested
from pedidos.usecases.cancel_saga import SagaNotFound
from pedidos.usecases.order_request_versions import in_versions, parse_stored
from pedidos.usecases.ports import OperatorAction, OrderStore
from pedidos.usecases.transitions import stage_transition
from sagakit.envelope import new_span_id
from sagakit.ports import UnitOfWorkPort
from sagakit.twins import emit_versions

STEP_RETRIED = "step_retried"


class RequestGone(Exception):
    """The saga's OrdenSolicitada is no longer kept (or no longer valid): nothing to re-send."""

    def __init__(self, saga_id: str, why: str) -> None:
        super().__init__(f"saga {saga_id}: its OrdenSolicitada cannot be sent again ({why})")


async def retry_step(uow: UnitOfWorkPort, orders: OrderStore, saga_id: str,
                     action: OperatorAction, settings: PedidosSettings,
                     request_span_id: str | None = None) -> str:
    """Returns the new message id of the event sent again. Raises ``SagaNotFound``,
    ``CannotRetry`` (the saga is not in a step pedidos can drive) or ``RequestGone``."""
    saga = await orders.lock(saga_id)
    if saga is None:
        raise SagaNotFound(saga_id)
    transition = on_retry_requested(saga.status)
    payload = await orders.order_request(saga_id)
    if payload is None:
        raise RequestGone(saga_id, "not in pedidos' outbox any more")
    try:
        request = parse_stored(payload)
    except ValueError as exc:
        raise RequestGone(saga_id, f"its payload is not today's schema: {exc}") from None
    span = request_span_id or new_span_id()
    sent, *_twins = emit_versions(
        uow, in_versions(request, settings.orden_solicitada_versions), saga_id=saga_id,
        parent_span_id=span, metadata={"correlation_id": saga.order_id,
                                       "user_id": saga.customer_id, "channel": "operator"})
    stage_transition(uow, orders, saga, transition, cause="ReintentoSolicitado",
                     actor=f"operator:{action.operator}", settings=settings,
                     detail={"step": "validacion", "message_id": sent.message_id,
                             "reason": action.reason},
                     parent_span_id=span,
                     operator_action=OperatorAction(
                         action.operator, action.action, action.reason,
                         {**(action.detail or {}), "step": "validacion",
                          "message_id": sent.message_id}))
    await uow.commit()
    return sent.message_id
