"""Minor units by the currency's ISO 4217 exponent, both ways, and never rounded."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from saga_contracts.minor_units import (
    TooManyDecimals,
    UnknownCurrency,
    exponent,
    fits,
    from_minor_units,
    to_minor_units,
)


@pytest.mark.parametrize(("currency", "places"), [
    ("CLP", 0), ("JPY", 0), ("USD", 2), ("EUR", 2), ("KWD", 3), ("BHD", 3),
    ("usd", 2),  # the gateway's ledger writes codes in lower case
])
def test_the_exponent_is_iso_4217s(currency: str, places: int) -> None:
    assert exponent(currency) == places


@pytest.mark.parametrize(("amount", "currency", "minor"), [
    ("1000", "CLP", 1000), ("1000.00", "CLP", 1000), ("10.00", "USD", 1000),
    ("0.01", "USD", 1), ("1500", "JPY", 1500), ("1.500", "KWD", 1500), ("0.001", "BHD", 1),
    ("12.5", "EUR", 1250),
])
def test_an_amount_in_minor_units_and_back(amount: str, currency: str, minor: int) -> None:
    assert to_minor_units(Decimal(amount), currency) == minor
    assert from_minor_units(minor, currency) == Decimal(amount)


def test_an_amount_comes_back_with_its_currencys_places() -> None:
    assert str(from_minor_units(1000, "CLP")) == "1000"
    assert str(from_minor_units(1000, "USD")) == "10.00"
    assert str(from_minor_units(1500, "KWD")) == "1.500"


@pytest.mark.parametrize(("amount", "currency"), [
    ("1000.5", "CLP"), ("0.01", "JPY"), ("1.234", "USD"), ("0.0001", "KWD")])
def test_more_decimals_than_the_currency_has_are_refused_not_rounded(amount: str,
                                                                     currency: str) -> None:
    assert not fits(Decimal(amount), currency)
    with pytest.raises(TooManyDecimals):
        to_minor_units(Decimal(amount), currency)


@pytest.mark.parametrize("currency", ["XAU", "XXX", "ABC", "", "US", "USDD", "12$", "name"])
def test_a_code_without_a_minor_unit_is_unknown(currency: str) -> None:
    with pytest.raises(UnknownCurrency):
        exponent(currency)


@given(st.integers(min_value=0, max_value=10**14),
       st.sampled_from(["CLP", "JPY", "USD", "EUR", "KWD", "BHD"]))
def test_every_minor_amount_round_trips(minor: int, currency: str) -> None:
    assert to_minor_units(from_minor_units(minor, currency), currency) == minor
