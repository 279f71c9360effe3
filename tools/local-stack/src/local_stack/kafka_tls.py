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

import datetime as dt
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from local_stack import secrets

CA_KEY = "kafka-ca.key"
CA_CERT = "kafka-ca.pem"
BROKER_KEYSTORE = "kafka-broker.pem"  # the broker's private key, then its certificate
BROKER_NAMES = ("localhost",)
BROKER_ADDRESSES = ("127.0.0.1",)
VALID_FOR = dt.timedelta(days=825)  # the longest lifetime browsers accept; plenty for a dev stack


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    # Unencrypted PKCS#8: the form Kafka's PEM keystore reads when no ssl.key.password is set.
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _certificate(subject: str, key: ec.EllipticCurvePrivateKey,
                 issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None) -> x509.Certificate:
    """A CA's self-signed certificate (``issuer`` None) or a server certificate it signs."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    issuer_name, signer = issuer if issuer is not None else (name, key)
    now = dt.datetime.now(dt.UTC)
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(issuer_name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + VALID_FOR)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                              critical=False))
    if issuer is None:
        builder = (builder.add_extension(x509.BasicConstraints(ca=True, path_length=0),
                                         critical=True)
                   .add_extension(x509.KeyUsage(
                       digital_signature=False, content_commitment=False, key_encipherment=False,
                       data_encipherment=False, key_agreement=False, key_cert_sign=True,
                       crl_sign=True, encipher_only=False, decipher_only=False), critical=True))
    else:
        builder = (builder.add_extension(x509.BasicConstraints(ca=False, path_length=None),
                                         critical=True)
                   .add_extension(x509.SubjectAlternativeName(
                       [x509.DNSName(n) for n in BROKER_NAMES]
                       + [x509.IPAddress(ipaddress.ip_address(a)) for a in BROKER_ADDRESSES]),
                       critical=False)
                   .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                                  critical=False)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                       signer.public_key()), critical=False))
    return builder.sign(signer, hashes.SHA256())


def _ca() -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key_pem = secrets.stored(CA_KEY, lambda: _pem_key(_new_key()))
    key = serialization.load_pem_private_key(key_pem, password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    cert_pem = secrets.stored(CA_CERT, lambda: _certificate(
        "saga local stack Kafka CA", key, None).public_bytes(serialization.Encoding.PEM))
    return x509.load_pem_x509_certificate(cert_pem), key


def _broker_keystore(ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey) -> bytes:
    key = _new_key()
    cert = _certificate("saga local stack Kafka broker", key, (ca.subject, ca_key))
    return (_pem_key(key) + cert.public_bytes(serialization.Encoding.PEM)
            + ca.public_bytes(serialization.Encoding.PEM))


def files() -> tuple[Path, Path]:
    """(the CA's certificate, the broker's PEM keystore), made if they were not."""
    ca, ca_key = _ca()
    secrets.stored(BROKER_KEYSTORE, lambda: _broker_keystore(ca, ca_key))
    return secrets.path_of(CA_CERT), secrets.path_of(BROKER_KEYSTORE)


def ca_file() -> Path:
    """The certificate a client of the TLS listener trusts (``KAFKA_SSL_CAFILE``)."""
    return files()[0]


def listener_properties(listener: str) -> list[str]:
    """The broker's TLS settings for ``listener`` (its SASL settings are kafka_auth's)."""
    _, keystore = files()
    prefix = f"listener.name.{listener.lower()}"
    return [f"{prefix}.ssl.keystore.type=PEM", f"{prefix}.ssl.keystore.location={keystore}"]
