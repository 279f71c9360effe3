"""PUT /products/{sku}'s body: a catalog price comes with its currency, is more than zero and
has no more decimals than the currency has (ISO 4217); each refusal names its field."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from pydantic import ValidationError

from inventario.entrypoints.http import StockUpdate


@pytest.mark.parametrize(("body", "price", "currency"), [
    ({"quantity": 1}, None, None),
    ({"quantity": 1, "price": "50.00", "currency": "USD"}, Decimal("50.00"), "USD"),
    ({"quantity": 1, "price": 12.5, "currency": "EUR"}, Decimal("12.5"), "EUR"),
    ({"quantity": 1, "price": "1000", "currency": "CLP"}, Decimal("1000"), "CLP"),
    ({"quantity": 1, "price": "1000.00", "currency": "CLP"}, Decimal("1000"), "CLP"),
])
def test_a_price_that_fits_its_currency_is_taken(body: dict[str, Any], price: Decimal | None,
                                                  currency: str | None) -> None:
    update = StockUpdate.model_validate(body)
    assert (update.price, update.currency) == (price, currency)


@pytest.mark.parametrize(("body", "field", "error"), [
    ({"quantity": 1, "price": "1000.5", "currency": "CLP"}, "price", "currency_decimal_places"),
    ({"quantity": 1, "price": "1.234", "currency": "USD"}, "price", "decimal_max_places"),
    ({"quantity": 1, "price": "0", "currency": "USD"}, "price", "greater_than"),
    ({"quantity": 1, "price": "-1.00", "currency": "USD"}, "price", "greater_than"),
    ({"quantity": 1, "price": "NaN", "currency": "USD"}, "price", "finite_number"),
    ({"quantity": 1, "price": "1e12", "currency": "USD"}, "price", "decimal_max_digits"),
    ({"quantity": 1, "price": "5.00"}, "currency", "missing"),
    ({"quantity": 1, "currency": "USD"}, "price", "missing"),
    ({"quantity": 1, "price": "5.00", "currency": "XXX"}, "currency", "literal_error"),
])
def test_a_price_that_does_not_fit_is_refused_with_its_field(body: dict[str, Any], field: str,
                                                             error: str) -> None:
    with pytest.raises(ValidationError) as refused:
        StockUpdate.model_validate(body)
    assert [(e["loc"], e["type"]) for e in refused.value.errors()] == [((field,), error)]


def test_the_allocation_strategy_is_optional_and_one_of_three() -> None:
    assert StockUpdate.model_validate({"quantity": 1}).allocation_strategy is None
    for strategy in ("check_then_pay", "reserve_then_pay", "auto"):
        update = StockUpdate.model_validate({"quantity": 1, "allocation_strategy": strategy})
        assert update.allocation_strategy == strategy
    with pytest.raises(ValidationError) as refused:
        StockUpdate.model_validate({"quantity": 1, "allocation_strategy": "reserve"})
    [error] = refused.value.errors()
    assert error["loc"] == ("allocation_strategy",) and error["type"] == "enum"


def test_the_quantity_may_be_left_out_and_is_a_json_integer_when_given() -> None:
    """Left out, the product keeps its units (set_stock); given, only an integer is a count:
    ``true``, ``"7"`` and ``7.0`` are refused rather than stored as 1 and 7."""
    assert StockUpdate.model_validate({"allocation_strategy": "auto"}).quantity is None
    assert StockUpdate.model_validate({"quantity": 7}).quantity == 7
    for wrong in (True, "7", 7.0):
        with pytest.raises(ValidationError) as refused:
            StockUpdate.model_validate({"quantity": wrong})
        [error] = refused.value.errors()
        assert error["loc"] == ("quantity",) and error["type"] == "int_type", (wrong, error)
