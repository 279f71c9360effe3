"""Amounts in a currency's minor units, as the payment gateway takes them (an integer: 10.00 USD
is ``1000``, 1000 CLP is ``1000``, 1.500 KWD is ``1500``).

How many minor units make a unit is the currency's ISO 4217 exponent ("minor unit"), from the
``iso4217`` package, which ships ISO's own table and is released with each amendment of it.
Not CLDR (Babel): CLDR's digits are what a locale shows, and differ from ISO 4217 for some
currencies (IQD, RSD, LAK...). The gateway and pagos both convert with this module, so that an
amount means the same at both ends.

Nothing here rounds: an amount with more decimals than its currency has is refused
(``TooManyDecimals``), where rounding would charge an amount nobody asked for.
"""

from __future__ import annotations

from decimal import Decimal

import iso4217


class UnknownCurrency(ValueError):
    """Not an ISO 4217 code, or one without a minor unit (gold, SDRs...): no amount of it can
    be charged."""

    def __init__(self, currency: str) -> None:
        super().__init__(f"{currency!r} is not an ISO 4217 currency with a minor unit")
        self.currency = currency


class TooManyDecimals(ValueError):
    def __init__(self, amount: Decimal, currency: str, exponent: int) -> None:
        super().__init__(f"{currency} has {exponent} decimal place{'s' * (exponent != 1)}: "
                         f"{amount} has more")
        self.amount = amount
        self.currency = currency
        self.exponent = exponent


def exponent(currency: str) -> int:
    """The number of decimal places of ``currency`` (an ISO 4217 code, upper or lower case):
    0 for CLP and JPY, 2 for USD and EUR, 3 for KWD and BHD."""
    found = (getattr(iso4217.Currency, currency.lower(), None)
             if len(currency) == 3 and currency.isalpha() else None)
    if not isinstance(found, iso4217.Currency) or found.exponent is None:
        raise UnknownCurrency(currency)
    return found.exponent


def decimal_places(amount: Decimal) -> int:
    """How many decimals ``amount`` needs (12.50 needs 1, 12.00 none): trailing zeros are no
    precision an amount lacks, so "1000.00" CLP is 1000 CLP."""
    normal = amount.normalize()
    exp = normal.as_tuple().exponent
    assert isinstance(exp, int), "a finite amount"
    return max(0, -exp)


def fits(amount: Decimal, currency: str) -> bool:
    """Whether ``amount`` has no more decimals than ``currency`` allows."""
    return decimal_places(amount) <= exponent(currency)


def to_minor_units(amount: Decimal, currency: str) -> int:
    """``amount`` of ``currency`` in its minor units. Raises ``TooManyDecimals`` for an amount
    the currency cannot hold (1.5 CLP) and ``UnknownCurrency``."""
    places = exponent(currency)
    if decimal_places(amount) > places:
        raise TooManyDecimals(amount, currency, places)
    return int(amount.scaleb(places))


def from_minor_units(minor: int, currency: str) -> Decimal:
    """``minor`` minor units of ``currency`` as an amount with the currency's decimal places
    (1000 USD cents is 10.00, 1000 CLP is 1000)."""
    places = exponent(currency)
    return Decimal(minor).scaleb(-places).quantize(Decimal(1).scaleb(-places))
