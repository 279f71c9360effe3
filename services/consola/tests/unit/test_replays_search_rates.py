"""Replays, the saga search and the overview's rates as use cases, over fakes: a group replay
sends only the letters the dry run showed that are still of the group; a console without a
signing key replays nothing; a search's fields are checked before any read; the rates follow
pedidos' final-status classes."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from consola.domain.outcomes import STATES, final_status, rates
from consola.usecases import replays
from consola.usecases.outcome import BadField
from consola.usecases.replays import CannotSign, ReplayTools, replay_group, replay_one, summary
from consola.usecases.search_sagas import parse
from sagakit.operations.replay import Outcome as Replayed
from sagakit.settings import KafkaClientSettings

T0 = datetime(2026, 12, 6, 1, 0, tzinfo=UTC)
IDS = ["0b6b3d0e-6a1f-4c55-8e1e-8b0f7b1f2c3d", "1c7c4e1f-7b20-4d66-9f2f-9c1f8c2f3d4e",
       "2d8d5f20-8c31-4e77-a030-ad209d304e5f"]


class Letters:
    async def open_dead_letters(self) -> list[dict[str, Any]]:
        return [{"id": i, "service": "inventario", "event_type": "PagoExitoso",
                 "error_class": "LockNotAvailableError", "at": T0 + timedelta(seconds=n)}
                for n, i in enumerate(IDS)] + [
            {"id": "3e9e6031-9d42-4f88-b141-be31ae415f60", "service": "pagos",
             "event_type": "PagoExitoso", "error_class": "LockNotAvailableError", "at": T0}]


class NoApi:
    async def letter(self, service: str, letter_id: str) -> Mapping[str, Any]:
        raise AssertionError("not called")

    async def forged(self, service: str, letter_id: str, reason: str) -> None:
        raise AssertionError("not called")

    async def replayed(self, service: str, letter_id: str, message_id: str, topic: str
                       ) -> str:
        raise AssertionError("not called")


@pytest.fixture
def replayed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The letters the shared replayer was asked for (its own behaviour is sagakit's test)."""
    asked: list[str] = []

    async def one(self: Any, letter_id: str, fixed_payload: Any = None, *,
                  only_open: bool = False) -> Replayed:
        assert only_open
        asked.append(letter_id)
        return Replayed(letter_id, self.service, "would_replay" if self.dry_run else "replayed")

    monkeypatch.setattr(replays.Replayer, "one", one)
    return asked


TOOLS = ReplayTools(Ed25519PrivateKey.generate(), KafkaClientSettings())


async def test_a_group_dry_run_lists_every_open_letter_of_the_group_oldest_first(
        replayed: list[str]) -> None:
    found, outcomes = await replay_group(TOOLS, NoApi(), Letters(), "inventario", "PagoExitoso",
                                         "LockNotAvailableError", dry_run=True)
    assert [o.id for o in outcomes] == IDS == replayed and len(found.letters) == 3
    assert summary(outcomes, dry_run=True).title == "Dry run: nothing sent"


async def test_a_group_replay_sends_only_the_letters_shown_that_are_still_of_the_group(
        replayed: list[str]) -> None:
    other_group = "3e9e6031-9d42-4f88-b141-be31ae415f60"
    _, outcomes = await replay_group(TOOLS, NoApi(), Letters(), "inventario", "PagoExitoso",
                                     "LockNotAvailableError", dry_run=False,
                                     chosen=[IDS[2], IDS[0], other_group])
    assert replayed == [IDS[0], IDS[2]] and {o.outcome for o in outcomes} == {"replayed"}
    with pytest.raises(BadField) as bad:
        await replay_group(TOOLS, NoApi(), Letters(), "inventario", "PagoExitoso",
                           "LockNotAvailableError", dry_run=False, chosen=["not-an-id"])
    assert bad.value.field == "dead_letter_id"


async def test_a_console_without_a_signing_key_replays_nothing(replayed: list[str]) -> None:
    with pytest.raises(CannotSign):
        await replay_one(ReplayTools(None, KafkaClientSettings()), NoApi(), "inventario",
                         IDS[0], dry_run=True)
    with pytest.raises(BadField):
        await replay_one(TOOLS, NoApi(), "gateway", IDS[0], dry_run=True)
    assert replayed == []


def test_the_banner_says_a_forged_letter_is_reported_only_when_replayed() -> None:
    forged = [Replayed(IDS[0], "pedidos", "forged", "the dead letter does not match")]
    assert summary(forged, dry_run=True).title.startswith("Forged: a replay refuses it")
    done = summary(forged, dry_run=False)
    assert (done.done, done.title) == (False, "Forged: refused and reported")


def test_a_search_is_checked_field_by_field() -> None:
    wanted = parse(customer_id=" c-1 ", state="COMPLETADA", older_than_min="30", stuck="on")
    assert (wanted.customer_id, wanted.state, wanted.older_than_min, wanted.stuck) == (
        "c-1", "COMPLETADA", 30, True)
    assert not parse().given
    for fields, field in (({"saga_id": "x"}, "saga_id"), ({"order_id": "1"}, "order_id"),
                          ({"state": "DONE"}, "state"), ({"older_than_min": "-1"},
                                                         "older_than_min"),
                          ({"older_than_min": "soon"}, "older_than_min"),
                          ({"customer_id": "c" * 201}, "customer_id")):
        with pytest.raises(BadField) as bad:
            parse(**fields)
        assert bad.value.field == field


def test_the_rates_are_shares_of_the_sagas_that_ended() -> None:
    r = rates([("COMPLETADA", 6), ("CANCELADA_SIN_STOCK", 1), ("REEMBOLSO_FALLIDO", 1),
               ("CANCELADA_CON_REEMBOLSO", 1), ("CANCELADA_TIMEOUT", 1),
               ("PENDIENTE_PAGO", 30)])
    assert (r.terminal, r.failed, r.compensated) == (10, 2, 2)
    assert (r.failure_rate, r.compensation_rate) == (0.2, 0.2)
    assert rates([("PENDIENTE_PAGO", 3)]).failure_rate is None
    assert {final_status(s) for s in STATES} == {None, "success", "compensated", "failed"}


def test_the_classes_are_pedidos_own() -> None:
    from pedidos.domain import order
    for state in order.OrderStatus:
        expected = None if state in order.ACTIVE else order.final_status_label(state)
        assert final_status(state.value) == expected, state
    assert set(STATES) == {s.value for s in order.OrderStatus}
