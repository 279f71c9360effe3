"""The order API's request and response models. Sensitive fields are declared here."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from saga_contracts.minor_units import exponent, fits
from sagakit.observability.privacy import Sensitive

Currency = Literal["USD", "EUR", "MXN", "COP", "ARS", "CLP", "PEN", "GBP"]

# PostgreSQL's text and jsonb hold any character but NUL (U+0000): every string stored is
# refused here, with its field, rather than by the database.
NO_NUL = r"^[^\x00]*$"

# What the orders table's Numeric(12, 2) holds.
MAX_TOTAL = Decimal("9999999999.99")


def _unsigned_zero(value: Decimal) -> Decimal:
    # A Decimal zero keeps its sign: "-0.00" is >= 0, yet would be carried as "-0.00", which
    # no event's money pattern accepts.
    return value.copy_abs() if value.is_zero() else value


Money = Annotated[
    Decimal, Field(ge=0, max_digits=12, decimal_places=2), AfterValidator(_unsigned_zero),
    # What the document promises: pydantic's own schema for a Decimal admits any string.
    WithJsonSchema({"anyOf": [
        {"type": "string", "pattern": r"^(0|[1-9][0-9]{0,9})(\.[0-9]{1,2})?$"},
        {"type": "number", "minimum": 0, "maximum": float(MAX_TOTAL)},
    ]})]


def _text(max_length: int) -> Any:
    return Field(min_length=1, max_length=max_length, pattern=NO_NUL)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class OrderItem(Strict):
    sku: str = Field(..., min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._\-]+$")
    quantity: int = Field(..., ge=1, le=1000)
    price: Money


class ShippingAddress(Strict):
    street: Annotated[str, Sensitive("omit"), _text(200)]
    city: Annotated[str, _text(200)]
    country: Annotated[str, _text(200)]
    postal_code: Annotated[str, Sensitive("omit"), _text(200)]


class PaymentMethod(Strict):
    type: Literal["credit_card"]
    token: Annotated[str, Sensitive("mask"), _text(255)]


# What the order events carry as a customer id (OrdenSolicitada's schema): a token's subject
# that is not one cannot place an order.
CUSTOMER_ID = r"^[^\x00]{1,100}$"


class OrderRequest(Strict):
    # The customer is the token's subject; a body that names another is refused.
    customer_id: Annotated[str | None, Field(
        None, min_length=1, max_length=100, pattern=NO_NUL,
        description="Optional: the token's subject is the customer; when given it must be the "
                    "same.")]
    items: list[OrderItem] = Field(..., min_length=1, max_length=50)
    total_amount: Money | None = None
    currency: Currency
    shipping_address: Annotated[ShippingAddress, Sensitive("omit")]
    payment_method: PaymentMethod

    @property
    def computed_total(self) -> Decimal:
        return sum((i.price * i.quantity for i in self.items), Decimal("0.00")).quantize(
            Decimal("0.01"))

    @field_validator("items")
    @classmethod
    def _each_sku_once(cls, items: list[OrderItem]) -> list[OrderItem]:
        """One line per product: inventario adds up the lines of a product, and two lines
        within their own limit could add up past what an event may carry."""
        seen: set[str] = set()
        for item in items:
            if item.sku in seen:
                raise ValueError(f"the sku {item.sku} is on more than one line: put its whole "
                                 "quantity on one")
            seen.add(item.sku)
        return items

    @field_validator("items")
    @classmethod
    def _total_fits(cls, items: list[OrderItem]) -> list[OrderItem]:
        total = sum((i.price * i.quantity for i in items), Decimal("0.00"))
        if total > MAX_TOTAL:
            raise ValueError(f"the items add up to {total:.2f}, more than an order may total "
                             f"({MAX_TOTAL})")
        return items

    @model_validator(mode="after")
    def _amounts_fit_the_currency(self) -> Self:
        """No price or total with more decimals than the currency has (ISO 4217: CLP none):
        such an amount cannot be charged, and is refused with its field, not rounded."""
        amounts: list[tuple[tuple[str | int, ...], Decimal]] = [
            (("items", n, "price"), item.price) for n, item in enumerate(self.items)]
        if self.total_amount is not None:
            amounts.append((("total_amount",), self.total_amount))
        places = exponent(self.currency)
        errors = [InitErrorDetails(
            type=PydanticCustomError(
                "currency_decimal_places",
                "{currency} has {places} decimal places (ISO 4217): the amount has more",
                {"currency": self.currency, "places": places}),
            loc=loc, input=str(amount))
            for loc, amount in amounts if not fits(amount, self.currency)]
        if errors:
            raise ValidationError.from_exception_data(type(self).__name__, errors)
        return self

    @model_validator(mode="after")
    def _total_matches(self) -> Self:
        if self.total_amount is not None and self.total_amount != self.computed_total:
            raise ValueError(f"total_amount {self.total_amount} does not equal the sum of the "
                             f"items {self.computed_total}")
        return self

    def wire(self, customer_id: str) -> dict[str, Any]:
        """The request of ``customer_id`` as the saga carries it: money as two-decimal
        strings."""
        return {
            "customer_id": customer_id,
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
    trace_id: str | None = None
    """The saga's OpenTelemetry trace (the ``POST /orders`` that started it); None when the
    saga was placed with tracing off."""


class HistoryEntry(BaseModel):
    at: datetime
    event_type: str
    from_status: str | None
    to_status: str | None
    actor: str
    message_id: str | None
    detail: dict[str, Any]


class OperatorActionEntry(BaseModel):
    """What an operator did to the saga through the API: who (the token's subject), when, what
    and why."""

    at: datetime
    operator: str
    action: str
    reason: str | None
    detail: dict[str, Any]


class SagaHistoryView(BaseModel):
    saga_id: str
    entries: list[HistoryEntry]
    operator_actions: list[OperatorActionEntry] = []
    """Operators' actions on the saga (cancelled, step retried), oldest first; shown to
    operators only."""


# An operator's reason, as the audit keeps it: text a person wrote, not empty, no NUL.
REASON = Field(min_length=1, max_length=500, pattern=r"^[^\x00]*\S[^\x00]*$")


class CancelRequest(BaseModel):
    """Why the saga is cancelled: recorded with an operator's cancellation (sagactl and the
    console ask for it); a customer's is not kept."""

    model_config = ConfigDict(extra="forbid")
    reason: Annotated[str | None, REASON] = None


class RetryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: Annotated[str | None, REASON] = None
