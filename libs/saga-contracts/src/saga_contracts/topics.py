"""Kafka topics of the saga. Each event type is published on its producer's topic."""

ORDER_EVENTS = "order-events"
INVENTORY_EVENTS = "inventory-events"
PAYMENT_EVENTS = "payment-events"

DOMAIN_TOPICS = (ORDER_EVENTS, INVENTORY_EVENTS, PAYMENT_EVENTS)


def dead_letter_topic(consumer_service: str) -> str:
    """One dead-letter topic per consuming service: a message can be poison for one consumer
    and fine for another, so each consumer parks what it could not process in its own topic."""
    return f"{consumer_service}-dlq"


DLQ_TOPICS = tuple(dead_letter_topic(s) for s in ("pedidos", "inventario", "pagos"))
ALL_TOPICS = DOMAIN_TOPICS + DLQ_TOPICS
