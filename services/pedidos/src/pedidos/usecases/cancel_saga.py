"""POST /sagas/{id}/cancel: cancels an active saga; participants compensate on OrdenCancelada.

A customer may cancel only its own sagas: another customer's is not found, exactly as a saga
that does not exist (its existence is not revealed). An operator cancels any, with the reason
it gives (if any): the operator actions' audit records who, when and why with the cancellation
itself."""

from __future__ import annotations

from pedidos.config import PedidosSettings
from pedidos.domain.order import OrderStatus, on_cancel_requested
from pedidos.usecases.ports import OperatorAction, OrderStore
from pedidos.usecases.transitions import stage_transition
from sagakit.envelope import new_span_id
from sagakit.ports import UnitOfWorkPort

SAGA_CANCELLED = "saga_cancelled"


class SagaNotFound(Exception):
    pass


async def cancel_saga(uow: UnitOfWorkPort, orders: OrderStore, saga_id: str, actor: str,
                      settings: PedidosSettings, request_span_id: str | None = None, *,
                      customer_id: str | None = None,
                      operator_action: OperatorAction | None = None) -> OrderStatus:
    """Raises ``CannotCancel`` (409) when the saga is terminal or already compensating, and
    ``SagaNotFound`` when there is no such saga or, with ``customer_id``, it is another
    customer's (None: anyone's, as an operator may). ``request_span_id``: the span of the
    request that cancels, OrdenCancelada's parent. ``operator_action``: the operator's, audited
    in the same commit."""
    saga = await orders.lock(saga_id)
    if saga is None or (customer_id is not None and saga.customer_id != customer_id):
        raise SagaNotFound(saga_id)
    transition = on_cancel_requested(saga.status)
    stage_transition(uow, orders, saga, transition, cause="CancelacionSolicitada", actor=actor,
                     settings=settings, parent_span_id=request_span_id or new_span_id(),
                     operator_action=operator_action)
    # The row is locked: the status it was decided on holds, and the guard finds it.
    await uow.commit()
    return transition.to
