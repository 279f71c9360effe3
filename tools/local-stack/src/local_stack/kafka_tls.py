"""The local Kafka's TLS listener: SASL/SCRAM over TLS (``SASL_SSL``) on ``KAFKA_TLS_PORT``, beside
the SASL_PLAINTEXT one on ``KAFKA_PORT``, for clients that must not send a password or a record
in the clear (what a managed Kafka gives them), and to prove that every client of the project
speaks TLS. With SAGA_KAFKA_TLS=1 the services use it.

The stack is its own certificate authority: at the first start it makes a CA (an ECDSA P-256
key and a self-signed certificate) and a broker certificate it signs for ``127.0.0.1`` and
``localhost``, kept with the other secrets. A client trusts the broker by ``KAFKA_SSL_CAFILE``
naming the CA's certificate; the broker reads its key and chain from one PEM file (Kafka's
``ssl.keystore.type=PEM``), so no Java keystore or keytool is involved.
"""

from __future__ import annotations

from pathlib import Path

from local_stack import certificates, secrets

CA_KEY = "kafka-ca.key"
CA_CERT = "kafka-ca.pem"
BROKER_KEYSTORE = "kafka-broker.pem"  # the broker's private key, then its certificate
BROKER_HOSTS = ("localhost", "127.0.0.1")


def _broker_keystore(ca_cert: bytes, ca_key: bytes) -> bytes:
    key = certificates.new_key()
    ca = certificates.load_pem(ca_cert)
    cert = certificates.server_certificate("saga local stack Kafka broker", key, BROKER_HOSTS,
                                           ca, certificates.load_key(ca_key))
    return certificates.key_pem(key) + certificates.cert_pem(cert) + ca_cert


def files() -> tuple[Path, Path]:
    """(the CA's certificate, the broker's PEM keystore), made if they were not."""
    ca_key = secrets.stored(CA_KEY, lambda: certificates.key_pem(certificates.new_key()))
    ca_cert = secrets.stored(CA_CERT, lambda: certificates.cert_pem(certificates.ca_certificate(
        "saga local stack Kafka CA", certificates.load_key(ca_key))))
    secrets.stored(BROKER_KEYSTORE, lambda: _broker_keystore(ca_cert, ca_key))
    return secrets.path_of(CA_CERT), secrets.path_of(BROKER_KEYSTORE)


def ca_file() -> Path:
    """The certificate a client of the TLS listener trusts (``KAFKA_SSL_CAFILE``)."""
    return files()[0]


def listener_properties(listener: str) -> list[str]:
    """The broker's TLS settings for ``listener`` (its SASL settings are kafka_auth's)."""
    _, keystore = files()
    prefix = f"listener.name.{listener.lower()}"
    return [f"{prefix}.ssl.keystore.type=PEM", f"{prefix}.ssl.keystore.location={keystore}"]
