"""SAGA_PG_TLS=1: the stack's PostgreSQL speaks TLS, with a certificate signed by a CA the stack
makes for itself, and the services connect with ``sslmode=verify-full`` and that CA, as they
would to a managed PostgreSQL (``sagakit.store.postgres_url``).

The CA and the server's key pair are made once, under the cluster's folder (the server's key
readable by the cluster's OS user only, as PostgreSQL demands); the CA's certificate, which is
no secret, is what clients are given as ``sslrootcert``. The certificate names 127.0.0.1 and
localhost, the addresses the stack's clients connect to.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from local_stack import certificates

HOSTS = ("127.0.0.1", "localhost")


@dataclass(frozen=True)
class TlsFiles:
    ca_cert: Path
    server_cert: Path
    server_key: Path


def tls_files(folder: Path) -> TlsFiles:
    return TlsFiles(folder / "ca.crt", folder / "server.crt", folder / "server.key")


def make_certificates(folder: Path, hosts: tuple[str, ...] = HOSTS,
                      owner: tuple[int, int] | None = None) -> TlsFiles:
    """The CA and the server's certificate for ``hosts`` in ``folder``, made if missing (a CA
    made before is kept, so that clients given it keep trusting the server); ``owner`` (uid,
    gid): who the server's key belongs to, the cluster's OS user."""
    files = tls_files(folder)
    if all(p.exists() for p in (files.ca_cert, files.server_cert, files.server_key)):
        return files
    folder.mkdir(parents=True, exist_ok=True)
    ca_key = certificates.new_key()
    ca = certificates.ca_certificate("saga local stack CA", ca_key)
    key = certificates.new_key()
    server = certificates.server_certificate(hosts[0], key, hosts, ca, ca_key)
    fd = os.open(files.server_key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(certificates.key_pem(key))
    files.server_cert.write_bytes(certificates.cert_pem(server))
    files.ca_cert.write_bytes(certificates.cert_pem(ca))
    if owner is not None:
        for p in (folder, files.server_key, files.server_cert, files.ca_cert):
            os.chown(p, *owner)
    return files


def server_options(files: TlsFiles) -> str:
    """``postgres -c`` options that turn TLS on with these files (plain connections are still
    accepted: the stack's own tools connect either way)."""
    return (f"-c ssl=on -c ssl_cert_file={files.server_cert} "
            f"-c ssl_key_file={files.server_key} -c ssl_min_protocol_version=TLSv1.2")


def client_query(files: TlsFiles) -> str:
    """What a client's URL adds to reach the stack's PostgreSQL over verified TLS."""
    return f"sslmode=verify-full&sslrootcert={files.ca_cert}"


def stack_tls_files() -> TlsFiles:
    """Where the stack keeps its PostgreSQL's CA and certificate: beside the cluster's data."""
    from local_stack.postgres.data_dir import pg_data_dir

    return tls_files(pg_data_dir().parent / "tls")


def with_stack_tls(url: str) -> str:
    """``url`` as a client of the stack's PostgreSQL gives it: verified TLS with SAGA_PG_TLS=1,
    as it is otherwise."""
    from local_stack.settings import PG_TLS

    if not PG_TLS:
        return url
    return f"{url}{'&' if '?' in url else '?'}{client_query(stack_tls_files())}"
