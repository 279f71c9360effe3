"""What the consumer calls for each event pedidos listens to: the use case, with the store
``stores`` builds on the message's unit of work."""

from __future__ import annotations

from pedidos.adapters.known_sagas import OrderStores
from pedidos.config import PedidosSettings
from pedidos.usecases.track_saga import Tracked, track_saga
from sagakit.consumer import Handler
from sagakit.message import Message
from sagakit.store import UnitOfWork


def make_track_saga(settings: PedidosSettings, stores: OrderStores) -> Handler[Tracked]:
    async def on_saga_event(uow: UnitOfWork, event: Message[Tracked]) -> None:
        await track_saga(uow, stores(uow), event, settings)

    return on_saga_event
