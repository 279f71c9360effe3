"""Behaviour chosen by the payment token, like Stripe's test tokens.

| token                                 | charge                                   | refund            |
|---------------------------------------|------------------------------------------|-------------------|
| tok_visa (and any other tok_*)        | approved                                 | succeeds          |
| tok_chargeDeclined, tok_chargeDeclined_<anything> | 402 card_declined / generic_decline | -       |
| tok_chargeDeclinedInsufficientFunds   | 402 card_declined / insufficient_funds   | -                 |
| tok_slow                              | approved, but answers after GATEWAY_SLOW_SECONDS (default 35 s, beyond a 30 s client timeout) | succeeds |
| tok_transient<N> (e.g. tok_transient2)| 503 for the first N attempts of one idempotency key, then approved | succeeds |
| tok_refundFails                       | approved                                 | 500 every time    |
| tok_refundTransient<N>                | approved                                 | 503 N times, then succeeds |
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TRANSIENT = re.compile(r"^tok_transient(\d+)$")
_REFUND_TRANSIENT = re.compile(r"^tok_refundTransient(\d+)$")


@dataclass(frozen=True)
class Behaviour:
    decline_code: str | None = None
    slow: bool = False
    transient_charge_failures: int = 0
    refund_always_fails: bool = False
    transient_refund_failures: int = 0


def behaviour_of(token: str) -> Behaviour:
    if token == "tok_chargeDeclined" or token.startswith("tok_chargeDeclined_"):
        # With a suffix of one's own: a declined card no other test has used (the decline
        # limit per card of pedidos counts declines by card).
        return Behaviour(decline_code="generic_decline")
    if token == "tok_chargeDeclinedInsufficientFunds":
        return Behaviour(decline_code="insufficient_funds")
    if token == "tok_slow":
        return Behaviour(slow=True)
    if token == "tok_refundFails":
        return Behaviour(refund_always_fails=True)
    if m := _TRANSIENT.match(token):
        return Behaviour(transient_charge_failures=int(m.group(1)))
    if m := _REFUND_TRANSIENT.match(token):
        return Behaviour(transient_refund_failures=int(m.group(1)))
    return Behaviour()
