"""The operator console in a real browser (Debian's Chromium, headless, through Selenium): an
operator signs in through the identity provider's form, finds an order placed through the API by
the search box, and reads its timeline, whose lanes and events are checked against pedidos'
``GET /sagas/{id}/history`` and pagos' gateway calls; reads the overview, whose counts are the
published views' (read by the console as console_reader, and by nobody else), and its failure
and compensation rates; searches sagas by id, order, customer, state, age and stuck; resolves a
payment left for a manual refund and archives a dead letter from their pages; dry-runs then
replays a real dead letter of a live saga, one and a group, and sees the sagas complete; has a
forged letter refused and reported; a customer is refused. Each page is saved as a screenshot
under test-artifacts/console/."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from functools import partial
from typing import Any

import asyncpg
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as seen
from selenium.webdriver.support.ui import Select

from saga_harness import config, db
from saga_harness.browser import chromium, screenshot, wait
from saga_harness.clients import Saga, new_sku, order_body
from saga_harness.dead_letters import dead_letter
from saga_harness.faults import paused, reconfigured, row_locked
from saga_harness.forgeries import forged_count, forged_letter, write_as_pedidos_app
from saga_harness.kafka import envelope
from saga_harness.scenarios import refund_left_for_manual_action
from saga_harness.waiting import wait_for

pytestmark = pytest.mark.external

CONSOLE, IDENTITY = config.CONSOLA, config.IDENTITY


@pytest.fixture
def browser(running_stack: None) -> Iterator[WebDriver]:
    with chromium() as driver:
        yield driver


def sign_in(driver: WebDriver, subject: str, role: str, page: str = "/") -> None:
    """From a page of the console through the identity provider's sign-in form and back."""
    driver.get(f"{CONSOLE}{page}")
    wait(driver).until(seen.presence_of_element_located((By.ID, "subject")))
    assert driver.current_url.startswith(f"{IDENTITY}/authorize?")
    driver.find_element(By.ID, "subject").send_keys(subject)
    Select(driver.find_element(By.ID, "role")).select_by_value(role)
    screenshot(driver, f"sign-in-{role}")
    driver.find_element(By.ID, "sign-in").click()
    wait(driver).until(lambda d: d.current_url.startswith(f"{CONSOLE}/"))


def expected_marks(history: list[dict[str, Any]], payments: list[dict[str, Any]]
                   ) -> list[tuple[str, str]]:
    """(lane, label) of every mark the timeline must show, said independently of the console's
    code: an event a participant sent in its lane and the transition it caused in pedidos'; an
    entry of pedidos' own (the order, a deadline, a cancellation) in pedidos' lane; each gateway
    call in the gateway's lane."""
    marks = []
    for entry in history:
        moved = entry["to_status"] and entry["to_status"] != entry["from_status"]
        transition = f"{entry['from_status'] or '—'} → {entry['to_status']}"
        if entry["actor"] in ("inventario", "pagos"):
            marks.append((entry["actor"], entry["event_type"]))
            marks.append(("pedidos", transition if moved else "recorded, state unchanged"))
        else:
            marks.append(("pedidos", entry["event_type"]))
    for payment in payments:
        for attempt in payment["attempts"]:
            marks.append(("gateway",
                          f"{attempt['kind']} #{attempt['attempt']}: {attempt['outcome']}"))
    return marks


async def test_an_operator_finds_an_order_and_reads_its_timeline(
        saga: Saga, browser: WebDriver) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 3)
    placed = await saga.place(order_body([(sku, 1)]))
    order = await saga.wait_terminal(placed["order_id"], timeout=30)
    assert order["status"] == "COMPLETADA"

    sign_in(browser, f"ops-{uuid.uuid4().hex[:6]}", "operator")
    wait(browser).until(seen.presence_of_element_located((By.ID, "search")))
    browser.find_element(By.ID, "nav-sagas").click()
    wait(browser).until(seen.url_to_be(f"{CONSOLE}/sagas"))
    screenshot(browser, "home")

    browser.find_element(By.ID, "search").send_keys(placed["order_id"])
    browser.find_element(By.ID, "search-go").click()
    wait(browser).until(seen.url_to_be(f"{CONSOLE}/sagas/{placed['saga_id']}"))
    wait(browser).until(seen.presence_of_element_located((By.ID, "swimlanes")))
    screenshot(browser, "timeline")

    history = await saga.history(placed["saga_id"])
    payments = await saga.payments(placed["saga_id"])
    assert browser.find_element(By.ID, "saga-status").text == "COMPLETADA"
    assert browser.find_element(By.ID, "order-id").text == placed["order_id"]
    lanes = [g.get_attribute("data-lane")
             for g in browser.find_elements(By.CSS_SELECTOR, "#swimlanes g.lane")]
    assert lanes == ["pedidos", "inventario", "pagos", "gateway"]
    shown = [(g.get_attribute("data-lane"), g.get_attribute("data-label"))
             for g in browser.find_elements(By.CSS_SELECTOR, "#swimlanes g.mark")]
    expected = expected_marks(history, payments)
    assert sorted(shown) == sorted(expected)
    # Every history entry is a step of its own, in pedidos' order, with its message id.
    rows = browser.find_elements(By.CSS_SELECTOR, '#steps tr.step[data-source="history"]')
    for entry, row in zip(history, [r.text for r in rows], strict=True):
        assert entry["event_type"] in row and (entry["message_id"] or "") in row
    calls = browser.find_elements(By.CSS_SELECTOR, '#steps tr.step[data-source="gateway"]')
    assert len(calls) == sum(len(p["attempts"]) for p in payments) >= 1
    gaps = browser.find_elements(By.CSS_SELECTOR, "#swimlanes g.row text.gap")
    assert gaps[0].text == "start" and all(g.text.startswith("+") for g in gaps[1:])

    browser.find_element(By.ID, "sign-out").click()
    wait(browser).until(seen.presence_of_element_located((By.ID, "signed-out")))
    screenshot(browser, "signed-out")
    browser.get(f"{CONSOLE}/sagas/{placed['saga_id']}")
    wait(browser).until(seen.presence_of_element_located((By.ID, "subject")))


async def test_a_search_for_an_unknown_id_says_so(browser: WebDriver) -> None:
    sign_in(browser, "ops-search", "operator")
    unknown = str(uuid.uuid4())
    wait(browser).until(seen.presence_of_element_located((By.ID, "search"))).send_keys(unknown)
    browser.find_element(By.ID, "search-go").click()
    error = wait(browser).until(seen.presence_of_element_located((By.ID, "search-error")))
    assert unknown in error.text
    screenshot(browser, "search-not-found")


async def test_a_customer_is_refused(browser: WebDriver) -> None:
    sign_in(browser, "c-42", "customer")
    refused = wait(browser).until(seen.presence_of_element_located((By.ID, "refused")))
    assert refused.text == "Operators only"
    assert browser.find_element(By.ID, "refused-subject").text == "c-42"
    assert not browser.find_elements(By.ID, "search")
    screenshot(browser, "refused")


async def test_a_customer_is_refused_the_operators_pages(browser: WebDriver) -> None:
    for page in ("/payments", "/dead-letters", f"/dead-letters/pedidos/{uuid.uuid4()}/replay",
                 "/dead-letters/pedidos/group-replay?event_type=PagoExitoso&error_class=X",
                 "/sagas?stuck=on"):
        sign_in(browser, "c-42", "customer", page=page)
        wait(browser).until(seen.presence_of_element_located((By.ID, "refused")))
        assert not browser.find_elements(By.CSS_SELECTOR, "#payments, .letter-group, form.resolve, "
                                                          "form.archive, section.replay, "
                                                          "#confirm-replay, #sagas")


def _table(driver: WebDriver, table: str, *keys: str) -> dict[tuple[str, ...], list[str]]:
    """The rows of a table of the page, by their ``data-*`` keys: each row's numbers."""
    out = {}
    for row in driver.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr[data-{keys[0]}]"):
        key = tuple(row.get_attribute(f"data-{k}") or "" for k in keys)
        out[key] = [c.text for c in row.find_elements(By.CSS_SELECTOR, "td.n")]
    return out


async def _view_counts() -> dict[str, Any]:
    """What the overview must show, read from the views as the console's reader role."""
    conn = await asyncpg.connect(config.reader_dsn("console"))
    try:
        return await _counts(conn)
    finally:
        await conn.close()


async def _counts(conn: asyncpg.Connection) -> dict[str, Any]:
    sagas = await conn.fetch("SELECT status, count(*) AS n FROM pedidos_read.sagas_v1 "
                           "WHERE started_at > now() - interval '1 hour' GROUP BY status")
    letters = await conn.fetch(" UNION ALL ".join(
        f"SELECT '{s}' AS service, state, count(*) AS n FROM {s}_read.dead_letters_v1 "
        "GROUP BY state" for s in ("pedidos", "inventario", "pagos")))
    backlog = await conn.fetch(" UNION ALL ".join(
        f"SELECT '{s}' AS service, COALESCE(sum(unpublished), 0) AS n "
        f"FROM {s}_read.outbox_backlog_v1" for s in ("pedidos", "inventario", "pagos")))
    return {
        "sagas": {(r["status"],): [str(r["n"])] for r in sagas},
        "letters": {(r["service"], r["state"]): [str(r["n"])] for r in letters},
        "backlog": {(r["service"],): str(r["n"]) for r in backlog},
        "payments": str(await conn.fetchval(
            "SELECT count(*) FROM pagos_read.payments_needing_action_v1")),
    }


def _page_counts(driver: WebDriver) -> dict[str, Any]:
    letters = {k: v for k, v in _table(driver, "dead-letters-per-service", "service",
                                       "state").items() if k[1]}
    return {
        "sagas": _table(driver, "sagas-per-state", "state"),
        "letters": letters,
        "backlog": {k: v[0] for k, v in _table(driver, "outbox-backlog", "service").items()},
        "payments": driver.find_element(By.ID, "payments-needing-action").text,
    }


async def test_the_overviews_counts_are_the_views_read_as_the_console_reader(
        saga: Saga, browser: WebDriver) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 1)
    placed = await saga.place(order_body([(sku, 1)]))
    await saga.wait_terminal(placed["order_id"], timeout=30)
    await dead_letter("inventario")
    sign_in(browser, f"ops-{uuid.uuid4().hex[:6]}", "operator")
    wait(browser).until(seen.presence_of_element_located((By.ID, "sagas-per-state")))

    async def steady() -> tuple[dict[str, Any], dict[str, Any]]:
        # The stack moves on between two reads: the page is compared with the views when
        # they said the same before and after it was drawn.
        before = await _view_counts()
        browser.get(f"{CONSOLE}/")
        shown = _page_counts(browser)
        return before, shown if before == await _view_counts() else {}

    _, shown = await wait_for(steady, lambda pair: pair[0] == pair[1], timeout=30,
                              what="the overview's counts equal to the views'")
    assert ("COMPLETADA",) in shown["sagas"] and ("inventario", "open") in shown["letters"]
    screenshot(browser, "overview")
    # The console reads as console_reader, which sees the views and nothing else.
    readers = {r["usename"] for r in await db.fetch(
        "SELECT usename FROM pg_stat_activity WHERE application_name = 'consola'")}
    assert readers == {"console_reader"}


async def test_a_payment_left_for_a_manual_refund_is_resolved_from_its_page(
        saga: Saga, browser: WebDriver) -> None:
    placed = await refund_left_for_manual_action(saga)
    [payment] = await saga.payments(placed["saga_id"])
    who = f"ops-{uuid.uuid4().hex[:6]}"
    sign_in(browser, who, "operator", page="/payments")
    wait(browser).until(seen.url_to_be(f"{CONSOLE}/payments"))
    row = f'#payments tr[data-payment="{payment["payment_id"]}"]'
    form = wait(browser).until(seen.presence_of_element_located((By.CSS_SELECTOR, row)))
    assert placed["saga_id"] in form.text and "REFUND_FAILED" in form.text
    screenshot(browser, "payments")

    form.find_element(By.NAME, "reference").send_keys(f"FIN-{uuid.uuid4().hex[:6]}")
    form.find_element(By.NAME, "note").send_keys("refunded by bank transfer")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    outcome = wait(browser).until(seen.presence_of_element_located((By.ID, "outcome")))
    assert outcome.get_attribute("data-status") == "201"
    assert browser.find_element(By.ID, "outcome-title").text == "Resolved"
    assert not browser.find_elements(By.CSS_SELECTOR, row), "it left the list"
    screenshot(browser, "payment-resolved")
    [after] = await saga.payments(placed["saga_id"])
    assert after["status"] == "REFUND_FAILED"
    assert await db.fetchval(
        "SELECT count(*) FROM pagos_read.payments_needing_action_v1 WHERE payment_id = $1::uuid",
        payment["payment_id"]) == 0
    operators = [r["operator"] for r in await db.fetch(
        "SELECT operator FROM pagos_read.operator_actions_v1 WHERE saga_id = $1 "
        "AND action = 'payment_resolved'", placed["saga_id"])]
    assert operators == [who], "pagos audits the operator who signed in, not the console"


async def test_a_dead_letter_is_archived_from_its_page(browser: WebDriver) -> None:
    letter_id = await dead_letter("pagos", ("TimeoutError: slow", "TimeoutError: slower"))
    who = f"ops-{uuid.uuid4().hex[:6]}"
    sign_in(browser, who, "operator", page="/dead-letters")
    wait(browser).until(seen.url_to_be(f"{CONSOLE}/dead-letters"))
    row_css = f'tr.letter[data-letter="{letter_id}"]'
    row = wait(browser).until(seen.presence_of_element_located((By.CSS_SELECTOR, row_css)))
    group = row.find_element(By.XPATH, "ancestor::section[1]")
    assert (group.get_attribute("data-service"), group.get_attribute("data-event-type"),
            group.get_attribute("data-error-class")) == ("pagos", "PagoExitoso", "TimeoutError")
    assert "TimeoutError: slow" in row.text and "TimeoutError: slower" in row.text
    screenshot(browser, "dead-letters")

    row.find_element(By.NAME, "reason").send_keys("duplicate of an order placed again")
    row.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(browser).until(seen.presence_of_element_located((By.ID, "outcome")))
    assert browser.find_element(By.ID, "outcome-title").text == "Archived"
    assert not browser.find_elements(By.CSS_SELECTOR, row_css), "it left the open letters"
    screenshot(browser, "dead-letter-archived")
    [row_after] = await db.fetch(
        "SELECT state, last_action_by, last_action_reason FROM pagos_read.dead_letters_v1 "
        "WHERE id = $1::uuid", letter_id)
    assert tuple(row_after) == ("archived", who, "duplicate of an order placed again")


# ------------------------------------------------------------------ replays from the console

QUICK_GIVE_UP = {"INVENTARIO_LOCK_TIMEOUT_S": "0.3", "SAGA_RETRY_INITIAL_BACKOFF_S": "0.1"}


async def _inventario_letter_of(saga_id: str) -> dict[str, Any] | None:
    rows = await db.fetch("SELECT id::text AS id, state, error_class, original_topic, "
                          "original_partition, original_offset, last_action_by "
                          "FROM inventario_read.dead_letters_v1 WHERE saga_id = $1", saga_id)
    return dict(rows[0]) if rows else None


async def _sagas_dead_lettered(saga: Saga, orders: int) -> tuple[list[dict[str, Any]],
                                                                 list[dict[str, Any]]]:
    """``orders`` live sagas, each paid for, whose PagoExitoso inventario gave up on (their
    product's row held locked past its lock timeout): real letters, whose originals sit on
    the broker, and sagas waiting in PENDIENTE_ASIGNACION for them."""
    sku = new_sku()
    await saga.set_stock(sku, 10)
    with reconfigured("pedidos", {"PEDIDOS_ALLOCATION_TIMEOUT_S": "120"}), \
            reconfigured("inventario", QUICK_GIVE_UP):
        async with row_locked("SELECT 1 FROM inventario.products WHERE sku = $1 FOR UPDATE",
                              sku):
            placed = [await saga.place(order_body([(sku, 1)])) for _ in range(orders)]
            letters: list[dict[str, Any]] = []
            for p in placed:
                found = await wait_for(partial(_inventario_letter_of, p["saga_id"]),
                                       lambda x: x is not None, timeout=40,
                                       what="PagoExitoso dead-lettered")
                assert found is not None
                letters.append(found)
    for p in placed:
        assert (await saga.order(p["order_id"]))["status"] == "PENDIENTE_ASIGNACION"
    return placed, letters


async def test_a_dead_letter_is_dry_run_then_replayed_from_its_page_and_the_saga_completes(
        saga: Saga, browser: WebDriver) -> None:
    [placed], [letter] = await _sagas_dead_lettered(saga, 1)
    who = f"ops-{uuid.uuid4().hex[:6]}"
    sign_in(browser, who, "operator", page="/dead-letters")
    wait(browser).until(seen.url_to_be(f"{CONSOLE}/dead-letters"))
    row = wait(browser).until(seen.presence_of_element_located(
        (By.CSS_SELECTOR, f'tr.letter[data-letter="{letter["id"]}"]')))
    row.find_element(By.CSS_SELECTOR, "a.dry-run").click()

    shown = wait(browser).until(seen.presence_of_element_located(
        (By.CSS_SELECTOR, f'section.replay[data-letter="{letter["id"]}"]')))
    assert shown.get_attribute("data-outcome") == "would_replay"
    assert browser.find_element(By.ID, "outcome-title").text.startswith("Would be replayed")
    # The broker check's verdict: the original at the letter's address, byte for byte, and
    # an event inventario consumes there.
    assert shown.find_element(By.CSS_SELECTOR, ".found-at").text == (
        f"{letter['original_topic']}[{letter['original_partition']}] "
        f"@{letter['original_offset']}")
    assert shown.find_element(By.CSS_SELECTOR, ".match").text.startswith("byte for byte")
    assert shown.find_element(By.CSS_SELECTOR, ".topology").text == (
        "allowed: inventario consumes PagoExitoso on payment-events")
    # Exactly what would be sent: topic, key, headers, the payload.
    assert shown.find_element(By.CSS_SELECTOR, ".plan .topic").text == "payment-events"
    assert shown.find_element(By.CSS_SELECTOR, ".plan .key").text == placed["saga_id"]
    headers = {r.get_attribute("data-header"): r.find_elements(By.TAG_NAME, "td")[1].text
               for r in shown.find_elements(By.CSS_SELECTOR, "table.headers tbody tr")}
    assert headers["X-Replay-For"] == "inventario" and headers["X-Replay-Signature"]
    message_id = shown.find_element(By.CSS_SELECTOR, ".message-id").text
    assert headers["X-Message-ID"] == message_id
    payload = json.loads(shown.find_element(By.CSS_SELECTOR, "pre.payload").text)
    assert payload["event_type"] == "PagoExitoso" and payload["saga_id"] == placed["saga_id"]
    assert payload["payload"]["order_id"] == placed["order_id"]
    screenshot(browser, "replay-dry-run")
    # A dry run sends nothing.
    assert (await saga.order(placed["order_id"]))["status"] == "PENDIENTE_ASIGNACION"
    assert (await _inventario_letter_of(placed["saga_id"]) or {})["state"] == "open"

    confirm = browser.find_element(By.ID, "confirm")
    confirm.click()
    # The page the answer comes on replaces this one: wait for it, not for the
    # same selector still found on the page being left.
    wait(browser).until(seen.staleness_of(confirm))
    done = wait(browser).until(seen.presence_of_element_located(
        (By.CSS_SELECTOR, f'section.replay[data-letter="{letter["id"]}"]')))
    assert done.get_attribute("data-outcome") == "replayed"
    assert browser.find_element(By.ID, "outcome-title").text == "Replayed"
    screenshot(browser, "replayed")
    order = await saga.wait_status(placed["order_id"], "COMPLETADA", timeout=30)
    assert order["status"] == "COMPLETADA"
    after = await _inventario_letter_of(placed["saga_id"]) or {}
    assert (after["state"], after["last_action_by"]) == ("replayed", who), \
        "inventario audits the operator who signed in"
    sent = await db.fetchval(
        "SELECT detail->>'message_id' FROM inventario.dead_letter_actions "
        "WHERE dead_letter_id = $1::uuid AND action = 'replayed'", letter["id"])
    assert sent != message_id, "the replay is signed anew: a new message id, not the dry run's"


async def test_a_group_dry_run_lists_the_letters_of_the_group_and_replays_them(
        saga: Saga, browser: WebDriver) -> None:
    placed, letters = await _sagas_dead_lettered(saga, 2)
    ids = {letter["id"] for letter in letters}
    sign_in(browser, f"ops-{uuid.uuid4().hex[:6]}", "operator", page="/dead-letters")
    wait(browser).until(seen.url_to_be(f"{CONSOLE}/dead-letters"))
    row = wait(browser).until(seen.presence_of_element_located(
        (By.CSS_SELECTOR, f'tr.letter[data-letter="{letters[0]["id"]}"]')))
    group = row.find_element(By.XPATH, "ancestor::section[1]")
    assert (group.get_attribute("data-service"), group.get_attribute("data-event-type"),
            group.get_attribute("data-error-class")) == (
        "inventario", "PagoExitoso", "LockNotAvailableError")
    group.find_element(By.CSS_SELECTOR, "a.group-dry-run").click()

    wait(browser).until(seen.presence_of_element_located((By.ID, "confirm-replay")))
    listed = {s.get_attribute("data-letter"): s.get_attribute("data-outcome")
              for s in browser.find_elements(By.CSS_SELECTOR, "section.replay")}
    assert ids <= set(listed) and {listed[i] for i in ids} == {"would_replay"}
    assert "inventario · PagoExitoso · LockNotAvailableError" in browser.find_element(
        By.ID, "replay-heading").text
    screenshot(browser, "group-replay-dry-run")
    for p in placed:  # nothing was sent
        assert (await saga.order(p["order_id"]))["status"] == "PENDIENTE_ASIGNACION"

    confirm = browser.find_element(By.ID, "confirm")
    confirm.click()
    # The page the answer comes on replaces this one: wait for it, not for the
    # same selector still found on the page being left.
    wait(browser).until(seen.staleness_of(confirm))
    wait(browser).until(seen.text_to_be_present_in_element((By.ID, "replay-heading"),
                                                           "Group replay"))
    done = {s.get_attribute("data-letter"): s.get_attribute("data-outcome")
            for s in browser.find_elements(By.CSS_SELECTOR, "section.replay")}
    assert {done[i] for i in ids} == {"replayed"}
    screenshot(browser, "group-replayed")
    for p in placed:
        assert (await saga.wait_status(p["order_id"], "COMPLETADA", timeout=30)
                )["status"] == "COMPLETADA"


async def test_a_forged_letter_is_refused_from_the_console_as_from_sagactl(
        saga: Saga, browser: WebDriver) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 5)
    with paused("pagos"):
        placed = await saga.place(order_body([(sku, 1)]))
        saga_id, order_id = placed["saga_id"], placed["order_id"]
        await saga.wait_status(order_id, "PENDIENTE_PAGO", timeout=30)
        paid = envelope("PagoExitoso", {"order_id": order_id, "payment_id": str(uuid.uuid4()),
                                        "charge_id": "ch_forged", "amount": "10.00",
                                        "currency": "USD"}, saga_id=saga_id, source="pagos")
        letter_id = await write_as_pedidos_app(forged_letter(paid, "payment-events", 0),
                                                saga_id, "PagoExitoso")
        before = await forged_count()
        sign_in(browser, f"ops-{uuid.uuid4().hex[:6]}", "operator",
                page=f"/dead-letters/pedidos/{letter_id}/replay")
        shown = wait(browser).until(seen.presence_of_element_located(
            (By.CSS_SELECTOR, f'section.replay[data-letter="{letter_id}"]')))
        assert shown.get_attribute("data-outcome") == "forged"
        assert "does not match the broker" in shown.text
        assert not shown.find_elements(By.CSS_SELECTOR, ".plan, .broker-check")
        screenshot(browser, "replay-forged-dry-run")
        assert await db.fetchval("SELECT state FROM pedidos_read.dead_letters_v1 "
                                 "WHERE id = $1::uuid", letter_id) == "open"

        confirm = browser.find_element(By.ID, "confirm")
        confirm.click()
        # The page the answer comes on replaces this one: wait for it, not for the
        # same selector still found on the page being left.
        wait(browser).until(seen.staleness_of(confirm))
        wait(browser).until(seen.text_to_be_present_in_element(
            (By.ID, "outcome-title"), "Forged: refused and reported"))
        screenshot(browser, "replay-forged")
        assert await db.fetchval("SELECT state FROM pedidos_read.dead_letters_v1 "
                                 "WHERE id = $1::uuid", letter_id) == "forged"
        assert await forged_count() >= before + 1, "counted: the ForgedReplay alert's metric"
        assert (await saga.order(order_id))["status"] == "PENDIENTE_PAGO"
        assert await db.fetchval(
            "SELECT count(*) FROM pedidos.processed_messages WHERE saga_id = $1 "
            "AND event_type = 'PagoExitoso'", saga_id) == 0


# ------------------------------------------------------------------ search and rates


def _found(driver: WebDriver) -> dict[str, str]:
    """The sagas the search listed: saga id → its state (``STUCK`` flagged as ``+stuck``)."""
    wait(driver).until(seen.presence_of_element_located((By.ID, "saga-count")))
    return {r.get_attribute("data-saga") or "": (r.get_attribute("data-state") or "")
            + ("+stuck" if r.get_attribute("data-stuck") else "")
            for r in driver.find_elements(By.CSS_SELECTOR, "#sagas tr.saga")}


def _search(driver: WebDriver, **fields: str) -> dict[str, str]:
    driver.get(f"{CONSOLE}/sagas")
    form = wait(driver).until(seen.presence_of_element_located((By.ID, "saga-search")))
    for name, value in fields.items():
        if name == "state":
            Select(form.find_element(By.NAME, "state")).select_by_value(value)
        elif name == "stuck":
            form.find_element(By.NAME, "stuck").click()
        else:
            form.find_element(By.NAME, name).send_keys(value)
    form.find_element(By.ID, "f-go").click()
    return _found(driver)


async def test_sagas_are_found_by_id_order_customer_state_age_and_stuck(
        saga: Saga, browser: WebDriver) -> None:
    customer = f"cust-{uuid.uuid4().hex[:8]}"
    sku = new_sku()
    await saga.set_stock(sku, 5)
    done = await saga.place(order_body([(sku, 1)], customer=customer))
    await saga.wait_status(done["order_id"], "COMPLETADA", timeout=30)
    sign_in(browser, f"ops-{uuid.uuid4().hex[:6]}", "operator", page="/sagas")
    with paused("pagos"):
        waiting = await saga.place(order_body([(sku, 1)], customer=customer))
        await saga.wait_status(waiting["order_id"], "PENDIENTE_PAGO", timeout=30)
        with paused("pedidos"):
            # Past its step's deadline, and started long ago, while pedidos (which would time
            # it out) is stopped: stuck as the view shows it.
            await db.execute("UPDATE pedidos.sagas SET step_deadline_at = now() - interval "
                             "'1 minute', started_at = now() - interval '90 minutes' "
                             "WHERE saga_id = $1::uuid", waiting["saga_id"])
            stuck = f"{waiting['saga_id']}"
            assert _search(browser, customer_id=customer) == {
                done["saga_id"]: "COMPLETADA", stuck: "PENDIENTE_PAGO+stuck"}
            screenshot(browser, "saga-search")
            assert _search(browser, saga_id=done["saga_id"]) == {done["saga_id"]: "COMPLETADA"}
            assert _search(browser, order_id=waiting["order_id"]) == {
                stuck: "PENDIENTE_PAGO+stuck"}
            assert _search(browser, customer_id=customer, state="COMPLETADA") == {
                done["saga_id"]: "COMPLETADA"}
            assert _search(browser, customer_id=customer, older_than_min="60") == {
                stuck: "PENDIENTE_PAGO+stuck"}
            assert stuck in _search(browser, stuck="on")
            assert done["saga_id"] not in _search(browser, stuck="on")
            browser.get(f"{CONSOLE}/sagas?older_than_min=soon")
            error = wait(browser).until(seen.presence_of_element_located((By.ID, "form-error")))
            assert error.get_attribute("data-field") == "older_than_min"


async def test_the_overview_shows_failure_and_compensation_rates_of_the_last_hour(
        saga: Saga, browser: WebDriver) -> None:
    sku = new_sku()
    await saga.set_stock(sku, 1)
    for _ in range(2):  # one completes, the other finds no stock: failed
        placed = await saga.place(order_body([(sku, 1)]))
        await saga.wait_terminal(placed["order_id"], timeout=30)
    sign_in(browser, f"ops-{uuid.uuid4().hex[:6]}", "operator")

    async def steady() -> tuple[dict[str, int], dict[str, str]]:
        # Said independently of the console: pedidos' final_status classes.
        before = {r["status"]: r["n"] for r in await db.fetch(
            "SELECT status, count(*) AS n FROM pedidos_read.sagas_v1 "
            "WHERE started_at > now() - interval '1 hour' GROUP BY status")}
        browser.get(f"{CONSOLE}/")
        shown = {k: browser.find_element(By.ID, f"{k}-rate").text
                 for k in ("failure", "compensation")}
        after = {r["status"]: r["n"] for r in await db.fetch(
            "SELECT status, count(*) AS n FROM pedidos_read.sagas_v1 "
            "WHERE started_at > now() - interval '1 hour' GROUP BY status")}
        return (before, shown) if before == after else ({}, {})

    def expected(counts: dict[str, int]) -> dict[str, str]:
        compensated = sum(n for s, n in counts.items() if s in (
            "CANCELADA_CON_REEMBOLSO", "CANCELADA_TIMEOUT", "CANCELADA_POR_USUARIO",
            "TIMED_OUT"))
        failed = sum(n for s, n in counts.items() if s in (
            "CANCELADA_SIN_STOCK", "CANCELADA_PRECIO_RECHAZADO", "CANCELADA_PAGO_RECHAZADO",
            "REEMBOLSO_FALLIDO"))
        ended = compensated + failed + counts.get("COMPLETADA", 0)
        return {"failure": f"{100 * failed / ended:.1f} %",
                "compensation": f"{100 * compensated / ended:.1f} %"}

    counts, shown = await wait_for(steady, lambda pair: bool(pair[0]) and
                                   expected(pair[0]) == pair[1], timeout=30,
                                   what="the overview's rates equal to the views'")
    assert counts.get("CANCELADA_SIN_STOCK", 0) >= 1 and shown["failure"] != "0.0 %"
    screenshot(browser, "overview-rates")
