"""The SCRAM-SHA-256 verifier the stack sends instead of a password: RFC 7677's example
exchange verifies against the keys it derives, and its text has PostgreSQL's format."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re

import pytest

from local_stack.postgres import scram

# RFC 7677, section 3: user "user", password "pencil".
CLIENT_FIRST_BARE = "n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_FIRST = ("r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                "s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
CLIENT_FINAL_WITHOUT_PROOF = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
PROOF = "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
SERVER_SIGNATURE = "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_the_keys_verify_rfc_7677s_exchange() -> None:
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    client_key, stored_key, server_key = scram.keys("pencil", salt, 4096)
    auth = f"{CLIENT_FIRST_BARE},{SERVER_FIRST},{CLIENT_FINAL_WITHOUT_PROOF}".encode()
    signature = hmac.digest(stored_key, auth, "sha256")
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    assert base64.b64encode(proof).decode() == PROOF
    assert base64.b64encode(hmac.digest(server_key, auth, "sha256")).decode() == SERVER_SIGNATURE
    assert hashlib.sha256(client_key).digest() == stored_key


def test_the_verifier_has_postgresqls_format_and_a_fresh_salt_each_time() -> None:
    first, second = scram.verifier("a-generated-password"), scram.verifier("a-generated-password")
    shape = re.compile(r"SCRAM-SHA-256\$4096:[A-Za-z0-9+/=]{24}\$[A-Za-z0-9+/=]{44}:[A-Za-z0-9+/=]{44}")
    assert shape.fullmatch(first) and shape.fullmatch(second)
    assert first != second
    assert "a-generated-password" not in first


def test_only_an_ascii_password_is_turned_into_a_verifier() -> None:
    with pytest.raises(ValueError):
        scram.verifier("contraseña")
