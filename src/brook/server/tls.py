"""TLS for the client and monitoring ports, as nats-server configures it, on Python's `ssl`.

`server_context` turns the `tls {}` settings into an `ssl.SSLContext` the way nats-server's
`GenTLSConfig` builds its `tls.Config` (TLS 1.2 at least, a client certificate required
and verified against `ca_file` with `verify`), failing with nats-server's words. The
handshake itself runs in the event loop (`loop.start_tls`, `server/connection.py`); what
is decided about the peer afterwards lives here: whether its public key is pinned
(`pinned_certs`: SHA-256 of the DER SubjectPublicKeyInfo, as nats-server's
`matchesPinnedCert`) and which names a certificate offers `verify_and_map`
(`CertificateNames`, in nats-server's order: e-mail addresses, DNS names, URIs, then the
subject's distinguished name).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from brook.config.settings import ConfigError, TLSSettings

TLS_HANDSHAKE_RECORD = 0x16
"""The first byte of a TLS ClientHello: how `allow_non_tls` tells TLS from plain text."""

_VERSIONS = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}


def server_context(tls: TLSSettings) -> ssl.SSLContext:
    """The server side's context; a bad file or key is a `ConfigError` at start."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = _VERSIONS[tls.min_version]
    try:
        context.load_cert_chain(tls.cert_file, tls.key_file)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"tls: error parsing X509 certificate/key pair: {exc}") from None
    if tls.ca_file:
        try:
            context.load_verify_locations(cafile=tls.ca_file)
        except FileNotFoundError as exc:
            raise ConfigError(f"tls: ca_file: {exc}") from None
        except (OSError, ssl.SSLError):
            raise ConfigError("tls: failed to parse root ca certificate") from None
    else:
        context.load_default_certs(ssl.Purpose.CLIENT_AUTH)  # Go's default: the system's
    if tls.verify:
        context.verify_mode = ssl.CERT_REQUIRED
    return context


class PeerRefused(Exception):
    """The handshake succeeded but the peer is refused (its public key is not pinned)."""


@dataclass(frozen=True, slots=True)
class PeerSession:
    """What a connection keeps of a TLS session: for /connz and for `verify_and_map`."""

    version: str  # "1.3", as nats-server's /connz writes it
    cipher_suite: str
    certificate: CertificateNames | None  # only with verify_and_map


def peer_session(transport: asyncio.BaseTransport, tls: TLSSettings, tls_map: bool) -> PeerSession:
    """The session a handshake set up on `transport`, the peer's public key checked against
    `pinned_certs` first (`PeerRefused`)."""
    ssl_object = transport.get_extra_info("ssl_object")
    if tls.pinned_certs:
        der = ssl_object.getpeercert(binary_form=True) if ssl_object else None
        if der is None or public_key_pin(der) not in tls.pinned_certs:
            raise PeerRefused("peer certificate not pinned")
    if ssl_object is None:
        return PeerSession("", "", None)
    certificate = CertificateNames.of(ssl_object.getpeercert() or {}) if tls_map else None
    return PeerSession(
        (ssl_object.version() or "").removeprefix("TLSv"),
        (ssl_object.cipher() or ("",))[0],
        certificate,
    )


def sniff_tls(
    loop: asyncio.AbstractEventLoop,
    sock: socket.socket,
    timeout_s: float,
    decide: Callable[[bool], None],
) -> None:
    """`allow_non_tls`: peek at the client's first byte (a TLS ClientHello starts with
    `TLS_HANDSHAKE_RECORD`) without taking it from the socket, then `decide(secure)` once;
    a client silent for the TLS timeout goes on in plain text, as with nats-server. The
    caller has paused its transport's reading."""
    peek = socket.socket(fileno=os.dup(sock.fileno()))
    peek.setblocking(False)

    def done(secure: bool) -> None:
        loop.remove_reader(peek.fileno())
        peek.close()
        timer.cancel()
        decide(secure)

    def readable() -> None:
        try:
            first = peek.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return
        except OSError:
            first = b""
        done(first[:1] == bytes([TLS_HANDSHAKE_RECORD]))

    loop.add_reader(peek.fileno(), readable)
    timer = loop.call_later(timeout_s, done, False)


def public_key_pin(der: bytes) -> str:
    """The hex SHA-256 of a DER certificate's SubjectPublicKeyInfo (`pinned_certs`)."""
    fields = _children(_children(der)[0])  # Certificate -> TBSCertificate -> its fields
    if fields and fields[0][0] == 0xA0:  # [0] version, present in v3 certificates
        fields = fields[1:]
    # serialNumber, signature, issuer, validity, subject, subjectPublicKeyInfo
    return hashlib.sha256(fields[5]).hexdigest()


def _children(element: bytes) -> list[bytes]:
    """The DER elements (tag, length and content) inside a constructed DER element."""
    _, start, end = _header(element, 0)
    out = []
    at = start
    while at < end:
        stop = _header(element, at)[2]
        out.append(element[at:stop])
        at = stop
    return out


def _header(data: bytes, at: int) -> tuple[int, int, int]:
    """(tag, content start, element end) of the DER element at `at`."""
    tag, length = data[at], data[at + 1]
    at += 2
    if length & 0x80:
        count = length & 0x7F
        length = int.from_bytes(data[at : at + count], "big")
        at += count
    if at + length > len(data):
        raise ValueError("truncated DER element")
    return tag, at, at + length


# Go's short names for the attributes of a distinguished name (crypto/x509/pkix).
_DN_NAMES = {
    "countryName": "C",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "commonName": "CN",
    "serialNumber": "SERIALNUMBER",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "streetAddress": "STREET",
    "postalCode": "POSTALCODE",
    "domainComponent": "DC",
}


@dataclass(frozen=True, slots=True)
class CertificateNames:
    """What a verified client certificate offers `verify_and_map`, from `getpeercert()`."""

    emails: tuple[str, ...]
    dns_names: tuple[str, ...]
    uris: tuple[str, ...]
    subject: tuple[tuple[tuple[str, str], ...], ...]  # RDNs, most specific first

    @classmethod
    def of(cls, cert: dict[str, Any]) -> CertificateNames:
        alt = cert.get("subjectAltName", ())
        rdns = tuple(
            tuple((_DN_NAMES.get(k, k), v) for k, v in rdn)
            for rdn in reversed(cert.get("subject", ()))
        )
        return cls(
            emails=tuple(v for k, v in alt if k == "email"),
            dns_names=tuple(v for k, v in alt if k == "DNS"),
            uris=tuple(v for k, v in alt if k == "URI"),
            subject=rdns,
        )

    @property
    def distinguished_name(self) -> str:
        """The subject as Go's `RDNSequence.String()` writes it: `CN=x,OU=y,O=z`."""
        return ",".join("+".join(f"{k}={_escape_dn(v)}" for k, v in rdn) for rdn in self.subject)

    def candidates(self) -> list[str]:
        """Names to look up as user names, in nats-server's order."""
        return [*self.emails, *self.dns_names, *self.uris, self.distinguished_name]

    def matches_dn(self, name: str) -> bool:
        """`name` is this subject as a DN, in any order of its RDNs (nats-server's
        `RDNsMatch`), attribute types compared without case."""
        parsed = _parse_dn(name)
        if parsed is None:
            return False
        mine = sorted(tuple(sorted((k.upper(), v) for k, v in rdn)) for rdn in self.subject)
        return mine == sorted(parsed)


def _escape_dn(value: str) -> str:
    out = []
    for i, c in enumerate(value):
        if c in ',+"\\<>;' or (c == "#" and i == 0) or (c == " " and i in (0, len(value) - 1)):
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


def _parse_dn(text: str) -> list[tuple[tuple[str, str], ...]] | None:
    """RFC 4514 text into RDNs of (TYPE, value); None when it is not a DN."""
    rdns: list[tuple[tuple[str, str], ...]] = []
    attrs: list[tuple[str, str]] = []
    buf: list[str] = []
    key: str | None = None
    i = 0
    while i <= len(text):
        c = text[i] if i < len(text) else ","
        if c == "\\" and i + 1 < len(text):
            buf.append(text[i + 1])
            i += 2
            continue
        if c == "=" and key is None:
            key = "".join(buf).strip().upper()
            buf = []
        elif c in ",+":
            if key is None or not key:
                return None
            attrs.append((key, "".join(buf).strip()))
            key, buf = None, []
            if c == ",":
                rdns.append(tuple(sorted(attrs)))
                attrs = []
        else:
            buf.append(c)
        i += 1
    return rdns or None
