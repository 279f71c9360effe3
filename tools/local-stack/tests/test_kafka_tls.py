"""The stack's own certificate authority for Kafka's TLS listener: a broker certificate a client
verifies for 127.0.0.1 and localhost with the CA file it is given, and no other CA's."""

from __future__ import annotations

import ipaddress
import ssl
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from local_stack import kafka_tls, secrets


@pytest.fixture(autouse=True)
def _scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(secrets, "SECRETS", tmp_path / "secrets")
    return tmp_path / "secrets"


def _broker_cert(keystore: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificates(keystore.read_bytes())[0]


def test_the_broker_certificate_names_the_local_addresses_and_is_signed_by_the_ca() -> None:
    ca_file, keystore = kafka_tls.files()
    ca = x509.load_pem_x509_certificate(ca_file.read_bytes())
    cert = _broker_cert(keystore)
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert names.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca


def test_the_keystore_holds_an_unencrypted_pkcs8_key_for_its_certificate() -> None:
    _, keystore = kafka_tls.files()
    text = keystore.read_bytes()
    assert text.startswith(b"-----BEGIN PRIVATE KEY-----")  # PKCS#8, what Kafka's PEM store reads
    key = serialization.load_pem_private_key(text, password=None)
    assert key.public_key().public_numbers() == _broker_cert(keystore).public_key().public_numbers()


def test_keys_are_private_and_made_once(_scratch: Path) -> None:
    first = kafka_tls.files()
    contents = [p.read_bytes() for p in first]
    assert kafka_tls.files() == first
    assert [p.read_bytes() for p in first] == contents
    for name in (kafka_tls.CA_KEY, kafka_tls.BROKER_KEYSTORE):
        assert stat.S_IMODE((_scratch / name).stat().st_mode) == 0o600


def _verifies(ca_file: Path, keystore: Path, hostname: str) -> bool:
    """A TLS handshake in memory: the broker's certificate against a client trusting ``ca_file``."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(keystore)
    client_ctx = ssl.create_default_context(cafile=str(ca_file))
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname=hostname)
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    for _ in range(10):
        for side in (client, server):
            try:
                side.do_handshake()
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLCertVerificationError:
                return False
            except ssl.SSLError:
                return False
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if client.version() and server.version():
            try:
                client.do_handshake()
                return True
            except ssl.SSLWantReadError:
                continue
    return False


def test_a_client_trusting_the_ca_accepts_the_broker_and_one_trusting_another_does_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ca_file, keystore = kafka_tls.files()
    assert _verifies(ca_file, keystore, "127.0.0.1")
    assert _verifies(ca_file, keystore, "localhost")
    assert not _verifies(ca_file, keystore, "kafka.example")
    monkeypatch.setattr(secrets, "SECRETS", tmp_path / "other")
    other_ca, _ = kafka_tls.files()
    assert not _verifies(other_ca, keystore, "127.0.0.1")
