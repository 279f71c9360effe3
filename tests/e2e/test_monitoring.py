"""Monitoring against the running stack: each service's metrics port answers Prometheus with no
token (the API's /metrics still asks an operator's), a real Prometheus scrapes them so, HTTP
requests are counted by route template and status, and the open dead letters gauge goes up with
a letter and down when an operator archives it."""

from __future__ import annotations

import re
import uuid

import httpx
import pytest

from saga_harness import config, prometheus
from saga_harness.dead_letters import dead_letter
from saga_harness.identity import bearer, customer_token, operator_headers, token
from saga_harness.waiting import wait_for

pytestmark = pytest.mark.usefixtures("running_stack")

APIS = {"pedidos": config.PEDIDOS, "inventario": config.INVENTARIO, "pagos": config.PAGOS}


async def _metric(http: httpx.AsyncClient, of: str, name: str, **labels: str) -> float:
    """The value of one series on service ``of``'s metrics port, fetched with no token."""
    answer = await http.get(f"{config.METRICS[of]}/metrics")
    assert answer.status_code == 200, answer.text
    wanted = {f'{k}="{v}"' for k, v in labels.items()}
    for line in answer.text.splitlines():
        match = re.match(rf"^{name}\{{(.*)\}} (\S+)$", line)
        if match and wanted <= set(match.group(1).split(",")):
            return float(match.group(2))
    return 0.0


async def test_the_metrics_port_needs_no_token_and_the_api_metrics_an_operators() -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        for service, api in APIS.items():
            scraped = await http.get(f"{config.METRICS[service]}/metrics")
            assert scraped.status_code == 200, service
            assert f'outbox_pending_messages{{service="{service}"}}' in scraped.text
            assert (await http.get(f"{api}/metrics")).status_code == 401, service
            customer = bearer(customer_token("metrics-reader"))
            assert (await http.get(f"{api}/metrics", headers=customer)).status_code == 403
            assert (await http.get(f"{api}/metrics",
                                   headers=operator_headers())).status_code == 200, service


async def test_prometheus_scrapes_every_service_with_no_token() -> None:
    # The harness' Prometheus scrapes the metrics ports with no token (saga_harness.prometheus).
    async with prometheus.running() as prom:
        for service in APIS:
            assert await prom.value(f'max(up{{instance="{config.METRICS[service][7:]}"}})') == 1
        # Every service is found under its name: nothing absent, not even pending.
        await wait_for(lambda: prom.value('count(ALERTS{alertname="ServiceMetricsAbsent"})'),
                       lambda n: n is None, timeout=15, interval=0.5,
                       what="no ServiceMetricsAbsent")


async def test_http_requests_are_counted_by_route_template_and_status() -> None:
    order_id = str(uuid.uuid4())
    async with httpx.AsyncClient(timeout=10) as http:
        before = await _metric(http, "pedidos", "http_requests_total", method="GET",
                               route="/orders/{order_id}", status="404")
        answer = await http.get(f"{config.PEDIDOS}/orders/{order_id}",
                                headers=bearer(customer_token("metrics-customer")))
        assert answer.status_code == 404
        after = await _metric(http, "pedidos", "http_requests_total", method="GET",
                              route="/orders/{order_id}", status="404")
        assert after == before + 1
        text = (await http.get(f"{config.METRICS['pedidos']}/metrics")).text
        assert order_id not in text



async def test_open_dead_letters_go_up_with_a_letter_and_down_when_it_is_handled() -> None:
    service = "inventario"
    async with httpx.AsyncClient(timeout=10) as http:
        async def open_letters() -> float:
            return await _metric(http, service, "saga_dead_letters_open", service=service)
        before = await open_letters()
        letter_id = await dead_letter(service)
        # The gauges are refreshed every 5 s by the service's periodic job.
        await wait_for(open_letters, lambda n: n == before + 1, timeout=30, interval=0.5,
                       what="the new letter counted as open")
        archived = await http.post(
            f"{APIS[service]}/operator/dead-letters/{letter_id}/archive",
            json={"reason": "a test letter"}, headers=bearer(token("ops-metrics", ("operator",))))
        assert archived.status_code == 200, archived.text
        await wait_for(open_letters, lambda n: n == before, timeout=30, interval=0.5,
                       what="the archived letter no longer counted")
