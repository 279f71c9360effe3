"""The operator console in a real browser (Debian's Chromium, headless, through Selenium): an
operator signs in through the identity provider's form, finds an order placed through the API by
the search box, and reads its timeline, whose lanes and events are checked against pedidos'
``GET /sagas/{id}/history`` and pagos' gateway calls; a customer is refused. Each page is saved
as a screenshot under test-artifacts/console/."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as seen
from selenium.webdriver.support.ui import Select

from saga_harness import config
from saga_harness.browser import chromium, screenshot, wait
from saga_harness.clients import Saga, new_sku, order_body

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
