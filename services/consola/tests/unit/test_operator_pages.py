"""The overview, the payments needing action and the dead letters as use cases, over fakes of the
read views and of the services' APIs: what is counted and grouped, what each answer of an action
is said to mean, and that a form with a missing field calls no one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from consola.usecases.dead_letters import archive, group, open_letter_groups
from consola.usecases.outcome import BadField
from consola.usecases.overview import overview
from consola.usecases.payments_needing_action import payments_needing_action, resolve_payment
from consola.usecases.ports import Answer

PAYMENT = "6f1c3a52-0d4e-4b8a-9f57-2c1e8b7d9a10"
LETTER = "0b6b3d0e-6a1f-4c55-8e1e-8b0f7b1f2c3d"
T0 = datetime(2026, 12, 6, 1, 0, tzinfo=UTC)


class FakeViews:
    def __init__(self, letters: list[dict[str, Any]] | None = None) -> None:
        self.windows: list[int] = []
        self.letters = letters or []

    async def sagas_per_state(self, window_s: int) -> list[dict[str, Any]]:
        self.windows.append(window_s)
        return [{"status": "COMPLETADA", "sagas": 7}, {"status": "REEMBOLSO_FALLIDO", "sagas": 1}]

    async def dead_letters_per_state(self) -> list[dict[str, Any]]:
        return [{"service": "pagos", "state": "open", "letters": 2},
                {"service": "pagos", "state": "archived", "letters": 5}]

    async def outbox_backlog(self) -> list[dict[str, Any]]:
        return [{"service": s, "unpublished": n, "failed": 0, "oldest_age_s": age}
                for s, n, age in (("pedidos", 3, 1.5), ("inventario", 0, None),
                                  ("pagos", 0, None))]

    async def payments_needing_action_count(self) -> int:
        return 4

    async def payments_needing_action(self) -> list[dict[str, Any]]:
        return [{"payment_id": PAYMENT, "amount": Decimal("5.00")}]

    async def open_dead_letters(self) -> list[dict[str, Any]]:
        return self.letters


class FakeApis:
    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.calls: list[tuple[Any, ...]] = []

    async def resolve_payment(self, payment_id: str, reference: str, note: str | None
                              ) -> Answer:
        self.calls.append(("resolve", payment_id, reference, note))
        return self.answer

    async def archive_dead_letter(self, service: str, dead_letter_id: str, reason: str
                                  ) -> Answer:
        self.calls.append(("archive", service, dead_letter_id, reason))
        return self.answer


async def test_the_overview_counts_what_the_views_say() -> None:
    views = FakeViews()
    seen = await overview(views)
    assert views.windows == [3600]
    assert seen.sagas_per_state == [("COMPLETADA", 7), ("REEMBOLSO_FALLIDO", 1)]
    assert seen.sagas == 8
    assert seen.dead_letters == {"pedidos": {}, "inventario": {},
                                 "pagos": {"open": 2, "archived": 5}}
    assert (seen.open_letters("pagos"), seen.open_letters("pedidos")) == (2, 0)
    assert [(b.service, b.unpublished, b.oldest_age_s) for b in seen.backlog] == [
        ("pedidos", 3, 1.5), ("inventario", 0, None), ("pagos", 0, None)]
    assert seen.payments_needing_action == 4
    assert await payments_needing_action(views) == [
        {"payment_id": PAYMENT, "amount": Decimal("5.00")}]


def _letter(service: str, event_type: str, error_class: str, minutes: int) -> dict[str, Any]:
    return {"id": f"{service}-{event_type}-{minutes}", "service": service,
            "event_type": event_type, "error_class": error_class,
            "at": T0 + timedelta(minutes=minutes), "attempts": []}


async def test_open_letters_are_grouped_by_service_event_type_and_error_class() -> None:
    letters = [_letter("pagos", "PagoExitoso", "TimeoutError", 3),
               _letter("pedidos", "StockReservado", "ValueError", 1),
               _letter("pagos", "PagoExitoso", "TimeoutError", 2),
               _letter("pagos", "PagoExitoso", "KeyError", 0)]
    groups = await open_letter_groups(FakeViews(letters))
    assert [(g.service, g.event_type, g.error_class, [x["id"] for x in g.letters])
            for g in groups] == [
        ("pagos", "PagoExitoso", "TimeoutError", ["pagos-PagoExitoso-2", "pagos-PagoExitoso-3"]),
        ("pagos", "PagoExitoso", "KeyError", ["pagos-PagoExitoso-0"]),
        ("pedidos", "StockReservado", "ValueError", ["pedidos-StockReservado-1"])]
    assert group([]) == []


@pytest.mark.parametrize(("answer", "done", "title", "said"), [
    (Answer(201, {"reference": "FIN-1", "resolved_by": "ana"}), True, "Resolved", "by ana"),
    (Answer(200, {"reference": "FIN-1", "resolved_by": "ana", "resolved_at": "t"}), True,
     "Already resolved, the same way", "nothing changed"),
    (Answer(409, {"detail": "x", "resolution": {"reference": "FIN-0", "resolved_by": "bo"}}),
     False, "Resolved already, under another reference", "by bo under FIN-0"),
    (Answer(409, {"detail": "x", "status": "CAPTURED"}), False, "Nothing to resolve",
     "is CAPTURED and not marked for a manual refund"),
    (Answer(404, {"detail": "x"}), False, "No such payment", PAYMENT),
    (Answer(422, {"detail": [{"loc": ["body", "reference"], "msg": "too long"}]}), False,
     "Refused by pagos", "reference: too long"),
])
async def test_each_answer_of_pagos_is_said_for_a_person(
        answer: Answer, done: bool, title: str, said: str) -> None:
    apis = FakeApis(answer)
    outcome = await resolve_payment(apis, PAYMENT, "  FIN-1 ", "by transfer")
    assert (outcome.done, outcome.status, outcome.title) == (done, answer.status, title)
    assert said in outcome.detail
    assert apis.calls == [("resolve", PAYMENT, "FIN-1", "by transfer")]


@pytest.mark.parametrize(("payment_id", "reference", "note", "field"), [
    (PAYMENT, "", None, "reference"), (PAYMENT, "   ", "n", "reference"),
    (PAYMENT, "x" * 201, None, "reference"), (PAYMENT, "R", "x" * 1001, "note"),
    (PAYMENT, "R\x00", None, "reference"), ("not-a-uuid", "R", None, "payment_id"),
])
async def test_a_resolution_without_a_good_reference_calls_no_one(
        payment_id: str, reference: str, note: str | None, field: str) -> None:
    apis = FakeApis(Answer(201, {}))
    with pytest.raises(BadField) as refused:
        await resolve_payment(apis, payment_id, reference, note)
    assert refused.value.field == field and apis.calls == []


async def test_a_blank_note_is_no_note() -> None:
    apis = FakeApis(Answer(201, {}))
    await resolve_payment(apis, PAYMENT, "R", "  ")
    assert apis.calls == [("resolve", PAYMENT, "R", None)]


@pytest.mark.parametrize(("answer", "done", "title"), [
    (Answer(200, {"state": "archived", "operator": "ana"}), True, "Archived"),
    (Answer(404, {"detail": "x"}), False, "No such dead letter"),
    (Answer(409, {"detail": "it is forged"}), False, "Not archived"),
    (Answer(422, {"detail": "bad"}), False, "Refused by inventario"),
])
async def test_archiving_goes_to_the_letters_service(
        answer: Answer, done: bool, title: str) -> None:
    apis = FakeApis(answer)
    outcome = await archive(apis, "inventario", LETTER, " duplicate ")
    assert (outcome.done, outcome.title) == (done, title)
    assert apis.calls == [("archive", "inventario", LETTER, "duplicate")]


@pytest.mark.parametrize(("service", "letter", "reason", "field"), [
    ("pagos", LETTER, "", "reason"), ("pagos", LETTER, "x" * 501, "reason"),
    ("gateway", LETTER, "r", "service"), ("pagos", "x", "r", "dead_letter_id"),
])
async def test_an_archive_without_a_reason_calls_no_one(
        service: str, letter: str, reason: str, field: str) -> None:
    apis = FakeApis(Answer(200, {}))
    with pytest.raises(BadField) as refused:
        await archive(apis, service, letter, reason)
    assert refused.value.field == field and apis.calls == []
