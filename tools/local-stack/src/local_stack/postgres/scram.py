"""A password as the SCRAM-SHA-256 verifier PostgreSQL stores for it (RFC 5803's format, computed
as PostgreSQL's own clients do): what the stack sends in ``ALTER ROLE ... PASSWORD``, so that a
password never reaches the server in the clear, where the text of a statement that fails is
written to its log and statistics keep statement texts."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os

ITERATIONS = 4096  # PostgreSQL's scram_iterations default


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def keys(password: str, salt: bytes, iterations: int = ITERATIONS) -> tuple[bytes, bytes, bytes]:
    """(ClientKey, StoredKey, ServerKey) of RFC 5802 for ``password``.

    PostgreSQL first normalizes a password with SASLprep, which leaves printable ASCII as it
    is (and a password SASLprep refuses is used as it is): the stack's own passwords are
    URL-safe ASCII, and ``verifier`` refuses anything but ASCII."""
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    server_key = hmac.digest(salted, b"Server Key", "sha256")
    return client_key, hashlib.sha256(client_key).digest(), server_key


def verifier(password: str, salt: bytes | None = None, iterations: int = ITERATIONS) -> str:
    if not password.isascii():
        raise ValueError("only an ASCII password is turned into a verifier here")
    salt = os.urandom(16) if salt is None else salt
    _, stored_key, server_key = keys(password, salt, iterations)
    return f"SCRAM-SHA-256${iterations}:{_b64(salt)}${_b64(stored_key)}:{_b64(server_key)}"
