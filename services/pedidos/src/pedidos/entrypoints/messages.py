"""What the consumer calls for each event pedidos listens to: the use case, with its store
built on the message's unit of work."""

from __future__ import annotations

from pedidos.adapters.order_repository import OrderRepository
from pedidos.config import PedidosSettings
from pedidos.usecases.known_sagas import KnownSagas
from pedidos.usecases.track_saga import Tracked, track_saga
from sagakit.consumer import Handler
from sagakit.message import Message
from sagakit.store import UnitOfWork


def make_track_saga(settings: PedidosSettings, known: KnownSagas) -> Handler[Tracked]:
    async def on_saga_event(uow: UnitOfWork, event: Message[Tracked]) -> None:
        await track_saga(uow, OrderRepository(uow), event, settings, known)

    return on_saga_event
