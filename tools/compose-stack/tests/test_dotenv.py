"""A new .env for docker-compose.yml (compose_stack.dotenv): every variable of .env.example, with a
value of its kind, written 0600 and never over an existing file."""

from __future__ import annotations

import re
import stat
from pathlib import Path

import pytest

from compose_stack import dotenv
from consola.settings import ConsolaSettings
from saga_contracts import replay_signature
from saga_contracts.replay_signature import OperatorKeys
from saga_contracts.sealing import KEY_ID


def example_variables() -> list[str]:
    return [m["name"] for line in dotenv.EXAMPLE.read_text().splitlines()
            if (m := dotenv.VARIABLE.match(line))]


def test_every_variable_of_the_example_gets_a_value_of_its_kind() -> None:
    values = dotenv.values()
    assert list(values) == example_variables()
    for name, value in values.items():
        if name.endswith("_PASSWORD"):
            # URL-safe: they go into connection URLs and Kafka's JAAS lines unquoted.
            assert re.fullmatch(r"[A-Za-z0-9_-]{32}", value), name
    assert values["GATEWAY_SECRET_KEY"].startswith("sk_test_")
    private_id = values["PAGOS_PAYMENT_TOKEN_OPEN_KEYS"].split(":")[0]
    public_id = values["PEDIDOS_PAYMENT_TOKEN_SEAL_KEY"].split(":")[0]
    assert private_id == public_id and re.fullmatch(KEY_ID, private_id)
    # Required: no consumer starts without the operators' public keys; the console's is one.
    listed = OperatorKeys.parse(values["SAGA_OPERATOR_PUBLIC_KEYS"])
    console = ConsolaSettings(session_secret="s" * 32, database_url="postgresql://x/y",
                              signing_key=values["CONSOLA_SIGNING_KEY"]).replay_signing_key()
    assert console is not None and len(listed.ids) == 2
    assert replay_signature.key_id(console.public_key()) in listed.ids


def test_two_files_share_no_secret() -> None:
    first, second = dotenv.values(), dotenv.values()
    assert all(first[n] != second[n] for n in first if first[n] and n != "AUTH_ISSUER")


def test_written_for_its_owner_only_and_never_over_a_file(tmp_path: Path) -> None:
    path = tmp_path / ".env"
    values = dotenv.write(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    # The operator's private key beside it, for sagactl; its public half is the services'.
    key_file = tmp_path / dotenv.SIGNING_KEY
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert values["SAGA_OPERATOR_PUBLIC_KEYS"].split(",")[0] == replay_signature.public_entry(
        replay_signature.load_private_key(key_file.read_bytes()))
    assert f"PG_ADMIN_PASSWORD={values['PG_ADMIN_PASSWORD']}\n" in path.read_text()
    with pytest.raises(FileExistsError):
        dotenv.write(path)
