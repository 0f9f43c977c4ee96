"""Certificates made by the tests themselves (trustme): a CA, a server certificate for
127.0.0.1 and localhost, and client certificates, written as PEM files a config file or
the `--tls*` flags can name."""

from __future__ import annotations

import datetime
import hashlib
import ssl
from dataclasses import dataclass
from pathlib import Path

import trustme
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat


@dataclass(frozen=True)
class ClientCert:
    cert_file: Path
    key_file: Path

    @property
    def subject(self) -> str:
        """The subject as nats-server's `verify_and_map` matches it (RFC 4514 order)."""
        cert = x509.load_pem_x509_certificate(self.cert_file.read_bytes())
        return cert.subject.rfc4514_string()


@dataclass(frozen=True)
class Certs:
    directory: Path
    ca: trustme.CA
    ca_file: Path
    cert_file: Path
    key_file: Path

    def client(
        self,
        name: str,
        *identities: str,
        ca: trustme.CA | None = None,
        expired: bool = False,
    ) -> ClientCert:
        """A client certificate with common name `name` (and SAN `identities`), issued by
        this CA or `ca`, valid now or expired a day ago. When `ca` is an intermediate of
        this CA (`ca.create_child_ca()`), the certificate file holds the chain up to it,
        which the client presents whole."""
        now = datetime.datetime.now(datetime.UTC)
        issued = (ca or self.ca).issue_cert(
            *(identities or (f"{name}.example",)),
            common_name=name,
            not_before=now - datetime.timedelta(days=10 if expired else 1),
            not_after=now + datetime.timedelta(days=-1 if expired else 30),
        )
        cert_file = self.directory / f"{name}-cert.pem"
        key_file = self.directory / f"{name}-key.pem"
        cert_file.write_bytes(b"".join(pem.bytes() for pem in issued.cert_chain_pems))
        issued.private_key_pem.write_to_path(str(key_file))
        return ClientCert(cert_file, key_file)

    def context(self, client: ClientCert | None = None) -> ssl.SSLContext:
        """A client's context trusting this CA, presenting `client` if given."""
        context = ssl.create_default_context(cafile=str(self.ca_file))
        if client is not None:
            context.load_cert_chain(str(client.cert_file), str(client.key_file))
        return context

    def server_pin(self) -> str:
        """The server certificate's `pinned_certs` entry (SHA-256 of its SPKI)."""
        return spki_pin(self.cert_file)


def spki_pin(cert_file: Path) -> str:
    cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
    spki = cert.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(spki).hexdigest()


def make_certs(directory: Path) -> Certs:
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    ca_file = directory / "ca.pem"
    cert_file = directory / "server-cert.pem"
    key_file = directory / "server-key.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    server.cert_chain_pems[0].write_to_path(str(cert_file))
    server.private_key_pem.write_to_path(str(key_file))
    return Certs(directory, ca, ca_file, cert_file, key_file)
