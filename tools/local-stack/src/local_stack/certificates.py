"""The stack's own certificate authorities: a CA (an ECDSA P-256 key and a self-signed
certificate) and the server certificates it signs for the addresses the stack's clients connect
to, for PostgreSQL's TLS (local_stack.postgres.tls) and Kafka's (local_stack.kafka_tls). Keys are
written as unencrypted PKCS#8 PEM, which both servers read."""

from __future__ import annotations

import datetime as dt
import ipaddress

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_FOR = dt.timedelta(days=825)  # the longest lifetime browsers accept; plenty for a dev stack


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def load_key(pem: bytes) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(pem, password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    return key


def load_pem(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _builder(subject: str, issuer: x509.Name | None,
             key: ec.EllipticCurvePrivateKey) -> x509.CertificateBuilder:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    now = dt.datetime.now(dt.UTC)
    return (x509.CertificateBuilder().subject_name(name).issuer_name(issuer or name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + VALID_FOR)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False))


def ca_certificate(subject: str, key: ec.EllipticCurvePrivateKey) -> x509.Certificate:
    """A self-signed CA that signs server certificates and nothing below them."""
    return (_builder(subject, None, key)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=False, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))


def server_certificate(subject: str, key: ec.EllipticCurvePrivateKey, hosts: tuple[str, ...],
                       ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey
                       ) -> x509.Certificate:
    """A server certificate for ``hosts`` (IP addresses or DNS names), signed by ``ca``."""
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return (_builder(subject, ca.subject, key)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
