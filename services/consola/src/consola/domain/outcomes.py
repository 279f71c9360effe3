"""How a saga ended, as its terminal state says: completed, compensated (what it did was undone,
or it was cancelled or timed out and its steps compensated) or failed (it never got as far as a
charge that stuck: no stock, a price or payment refused; or its refund kept failing). The same
classes as pedidos' ``final_status`` label of ``saga_duration_seconds`` (its
``domain.order.final_status_label``), so that the console's rates and the dashboards' agree."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

ACTIVE = frozenset({"PENDIENTE_VALIDACION", "PENDIENTE_PAGO", "PENDIENTE_ASIGNACION",
                    "PENDIENTE_REEMBOLSO"})
COMPLETED = frozenset({"COMPLETADA"})
COMPENSATED = frozenset({"CANCELADA_CON_REEMBOLSO", "CANCELADA_TIMEOUT",
                         "CANCELADA_POR_USUARIO", "TIMED_OUT"})
FAILED = frozenset({"CANCELADA_SIN_STOCK", "CANCELADA_PRECIO_RECHAZADO",
                    "CANCELADA_PAGO_RECHAZADO", "REEMBOLSO_FALLIDO"})
STATES = (*sorted(ACTIVE), *sorted(COMPLETED), *sorted(COMPENSATED), *sorted(FAILED))
"""Every state a saga can be in, the active ones first."""


def final_status(state: str) -> str | None:
    """``success``, ``compensated`` or ``failed``; None while the saga is active."""
    if state in ACTIVE:
        return None
    if state in COMPLETED:
        return "success"
    return "compensated" if state in COMPENSATED else "failed"


@dataclass(frozen=True)
class Rates:
    """The terminal sagas of a window, by how they ended."""

    terminal: int
    success: int
    compensated: int
    failed: int

    @staticmethod
    def _share(n: int, of: int) -> float | None:
        return None if of == 0 else n / of

    @property
    def failure_rate(self) -> float | None:
        """Failed sagas' share of the terminal ones (None: none ended)."""
        return self._share(self.failed, self.terminal)

    @property
    def compensation_rate(self) -> float | None:
        """Compensated sagas' share of the terminal ones (None: none ended)."""
        return self._share(self.compensated, self.terminal)


def rates(per_state: Iterable[tuple[str, int]]) -> Rates:
    counts = {"success": 0, "compensated": 0, "failed": 0}
    for state, n in per_state:
        ended = final_status(state)
        if ended is not None:
            counts[ended] += n
    return Rates(sum(counts.values()), counts["success"], counts["compensated"],
                 counts["failed"])
