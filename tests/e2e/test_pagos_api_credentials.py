"""pagos' API instances hold neither the payment token's opening keys nor the gateway's secret
key: they serve ``GET /payments`` to the internet, and a file read there must open no sealed
token and charge nothing. Only an instance that runs the gateway worker (RUN_JOBS) reads them,
and refuses to start without them.

A pagos process started here as an API instance (RUN_CONSUMER, RUN_RELAY, RUN_JOBS false), on
the stack's database and identity provider, with the local stack's environment for pagos minus
its keys; and again with the key variables naming files that do not exist, which an instance
that read them would stop on."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator

import httpx
import pytest

from saga_harness import identity
from saga_harness.api_instance import api_env, stop
from saga_harness.ports import free_port
from saga_harness.waiting import wait_for

KEY_VARIABLES = ("PAGOS_PAYMENT_TOKEN_OPEN_KEYS", "PAGOS_PAYMENT_TOKEN_OPEN_KEYS_FILE",
                 "PAGOS_GATEWAY_SECRET_KEY", "PAGOS_GATEWAY_SECRET_KEY_FILE")


def _pagos_env(port: int, *, run_jobs: bool, keys: dict[str, str]) -> dict[str, str]:
    return api_env("pagos", port, name="credentials-test", settings=keys, run_jobs=run_jobs,
                   without=KEY_VARIABLES)


@pytest.fixture
def pagos_process() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        stop(process)


def _start(started: list[subprocess.Popen[bytes]], env: dict[str, str]
           ) -> subprocess.Popen[bytes]:
    process = subprocess.Popen([sys.executable, "-m", "pagos"], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               cwd=os.getcwd())
    started.append(process)
    return process


async def _serves_payments(process: subprocess.Popen[bytes], port: int) -> None:
    base = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient(base_url=base, timeout=10) as http:

        async def ready() -> str:
            if process.poll() is not None:
                return f"exited: {process.stdout.read().decode()[-2000:] if process.stdout else ''}"
            try:
                return str((await http.get("/ready")).status_code)
            except httpx.HTTPError as exc:
                return repr(exc)

        status = await wait_for(ready, lambda s: s == "200" or s.startswith("exited"),
                                timeout=60, what="the pagos API instance is ready")
        assert status == "200", status
        saga_id = str(uuid.uuid4())
        as_operator = await http.get("/payments", params={"saga_id": saga_id},
                                     headers=identity.operator_headers())
        assert as_operator.status_code == 200 and as_operator.json() == []
        as_customer = await http.get(
            "/payments", params={"saga_id": saga_id},
            headers=identity.bearer(identity.customer_token("c-credentials")))
        assert as_customer.status_code == 404


@pytest.mark.usefixtures("running_stack")
async def test_an_api_instance_starts_and_serves_payments_without_the_keys(
        pagos_process: list[subprocess.Popen[bytes]]) -> None:
    port = free_port()
    process = _start(pagos_process, _pagos_env(port, run_jobs=False, keys={}))
    await _serves_payments(process, port)
    assert process.poll() is None


@pytest.mark.usefixtures("running_stack")
async def test_an_api_instance_never_reads_the_keys_even_when_they_are_configured(
        pagos_process: list[subprocess.Popen[bytes]], tmp_path: os.PathLike[str]) -> None:
    """Key files it cannot read, and a key that is not one: an instance that read them at
    start would stop there."""
    port = free_port()
    missing = os.path.join(tmp_path, "not-there")
    process = _start(pagos_process, _pagos_env(port, run_jobs=False, keys={
        "PAGOS_PAYMENT_TOKEN_OPEN_KEYS_FILE": missing,
        "PAGOS_GATEWAY_SECRET_KEY_FILE": missing,
    }))
    await _serves_payments(process, port)
    assert process.poll() is None


@pytest.mark.usefixtures("running_stack")
def test_an_instance_that_runs_the_gateway_worker_refuses_to_start_without_them(
        pagos_process: list[subprocess.Popen[bytes]]) -> None:
    process = _start(pagos_process, _pagos_env(free_port(), run_jobs=True, keys={}))
    output, _ = process.communicate(timeout=60)
    assert process.returncode != 0
    assert b"PAGOS_PAYMENT_TOKEN_OPEN_KEYS" in output
