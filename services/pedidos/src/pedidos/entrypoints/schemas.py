"""The order API's request and response models. Sensitive fields are declared here."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator
from sagakit.privacy import Sensitive

Currency = Literal["USD", "EUR", "MXN", "COP", "ARS", "CLP", "PEN", "GBP"]
Money = Annotated[Decimal, Field(ge=0, max_digits=12, decimal_places=2)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class OrderItem(Strict):
    sku: str = Field(..., min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._\-]+$")
    quantity: int = Field(..., ge=1, le=1000)
    price: Money


class ShippingAddress(Strict):
    street: Annotated[str, Sensitive("omit"), Field(min_length=1, max_length=200)]
    city: Annotated[str, Field(min_length=1, max_length=200)]
    country: Annotated[str, Field(min_length=1, max_length=200)]
    postal_code: Annotated[str, Sensitive("omit"), Field(min_length=1, max_length=200)]


class PaymentMethod(Strict):
    type: Literal["credit_card"]
    token: Annotated[str, Sensitive("mask"), Field(min_length=1, max_length=255)]


class OrderRequest(Strict):
    customer_id: str = Field(..., min_length=1, max_length=100)
    items: list[OrderItem] = Field(..., min_length=1, max_length=50)
    total_amount: Money | None = None
    currency: Currency
    shipping_address: Annotated[ShippingAddress, Sensitive("omit")]
    payment_method: PaymentMethod

    @property
    def computed_total(self) -> Decimal:
        return sum((i.price * i.quantity for i in self.items), Decimal("0.00")).quantize(
            Decimal("0.01"))

    @model_validator(mode="after")
    def _total_matches(self) -> Self:
        if self.total_amount is not None and self.total_amount != self.computed_total:
            raise ValueError(f"total_amount {self.total_amount} does not equal the sum of the "
                             f"items {self.computed_total}")
        return self

    def wire(self) -> dict[str, Any]:
        """The request as the saga carries it: money as two-decimal strings."""
        return {
            "customer_id": self.customer_id,
            "items": [{"sku": i.sku, "quantity": i.quantity, "price": f"{i.price:.2f}"}
                      for i in self.items],
            "currency": self.currency,
            "shipping_address": self.shipping_address.model_dump(),
            "payment_method": self.payment_method.model_dump(),
        }


class OrderAccepted(BaseModel):
    order_id: str
    saga_id: str
    status: str


class OrderView(BaseModel):
    order_id: str
    saga_id: str
    customer_id: str
    status: str
    terminal: bool
    items: list[dict[str, Any]]
    total_amount: str
    currency: str
    charge_id: str | None
    refund_status: str | None
    cancel_reason: str | None
    created_at: datetime
    updated_at: datetime


class SagaStatusView(BaseModel):
    saga_id: str
    saga_type: str
    order_id: str
    status: str
    terminal: bool
    current_step: str | None
    owner: str
    started_at: datetime
    updated_at: datetime
    step_deadline_at: datetime | None
    expires_at: datetime
    finished_at: datetime | None


class HistoryEntry(BaseModel):
    at: datetime
    event_type: str
    from_status: str | None
    to_status: str | None
    actor: str
    message_id: str | None
    detail: dict[str, Any]


class SagaHistoryView(BaseModel):
    saga_id: str
    entries: list[HistoryEntry]
