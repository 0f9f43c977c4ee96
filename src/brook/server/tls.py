"""TLS for the client and monitoring ports, as nats-server configures it, on Python's `ssl`.

`server_context` turns the `tls {}` settings into an `ssl.SSLContext` the way nats-server's
`GenTLSConfig` builds its `tls.Config` (TLS 1.2 at least, a client certificate required
and verified against `ca_file` with `verify`), failing with nats-server's words. The
handshake itself runs in the event loop (`loop.start_tls`, `server/tls_upgrade.py`); what
is decided about the peer afterwards lives here: whether its public key is pinned
(`pinned_certs`: SHA-256 of the DER SubjectPublicKeyInfo, as nats-server's
`matchesPinnedCert`) and which names a certificate offers `verify_and_map`
(`CertificateNames`, in nats-server's order: e-mail addresses, DNS names, URIs, then the
subject's distinguished name).
"""

from __future__ import annotations

import _ssl
import asyncio
import datetime
import functools
import hashlib
import logging
import os
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brook.config.settings import ConfigError, TLSSettings

TLS_HANDSHAKE_RECORD = 0x16
"""The first byte of a TLS ClientHello: how `allow_non_tls` tells TLS from plain text."""

log = logging.getLogger("brook.connection")

_VERSIONS = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}


def server_context(tls: TLSSettings) -> ssl.SSLContext:
    """The server side's context; a bad file or key is a `ConfigError` at start."""
    context = AlertingContext(ssl.PROTOCOL_TLS_SERVER)
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


def tls_material(tls: TLSSettings) -> tuple[object, ...]:
    """What `server_context` makes a context of: the files' bytes and the settings they
    are read with (and the pins, which nats-server's `tls.Config` holds too). A config
    reload compares it (ADR 0042), so a certificate renewed in place is a change, as
    nats-server sees one in its new `tls.Config`."""
    contents: list[bytes | str] = []
    for path in (tls.cert_file, tls.key_file, tls.ca_file):
        try:
            contents.append(Path(path).read_bytes() if path else b"")
        except OSError as exc:  # `server_context` reports it
            contents.append(str(exc))
    return (*contents, tls.verify, tls.min_version, tls.pinned_certs)


class AlertingSSLObject(ssl.SSLObject):
    """A server-side `SSLObject` whose failed handshake still sends its TLS alert, as
    nats-server (Go's crypto/tls) does before it closes (ADR 0024).

    When `do_handshake` fails, OpenSSL has written its alert into the outgoing memory
    BIO, but the event loop's SSL protocol (uvloop's and asyncio's `sslproto`) sends
    that BIO's bytes only after an `SSLWantReadError`/`SSLWantWriteError`: on any other
    `SSLError` it aborts the transport and the alert is lost, so a client sees the
    connection end rather than why. So when an alert is pending the failure is kept and
    reported as `SSLWantReadError`: the loop sends the alert as it sends any handshake
    step and waits. The kept failure is raised at the next call (the client's next
    bytes); a client that closes (as clients do on an alert) or stays silent ends the
    handshake as any other, at its EOF or at the `tls { timeout }`. The failure is
    logged when it happens, since after an EOF or a timeout the loop reports only those.
    A failure without an alert (a first record that is not TLS, as Go sends none
    either) is raised at once, as before."""

    outgoing: ssl.MemoryBIO | None = None  # set by `AlertingContext.wrap_bio`
    _failure: ssl.SSLError | None = None

    def do_handshake(self) -> None:
        if self._failure is not None:
            raise self._failure
        try:
            super().do_handshake()
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            raise
        except ssl.SSLError as exc:
            if self.outgoing is None or not self.outgoing.pending:
                raise
            self._failure = exc
            log.debug("TLS handshake error: %s", exc)
            raise ssl.SSLWantReadError("a TLS alert to send") from None


class AlertingContext(ssl.SSLContext):
    """The server side's `SSLContext`: its `SSLObject`s send the alert of a failed
    handshake (`AlertingSSLObject`), which needs to see its outgoing BIO."""

    sslobject_class = AlertingSSLObject

    def wrap_bio(
        self,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        server_side: bool = False,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLObject:
        ssl_object = super().wrap_bio(incoming, outgoing, server_side, server_hostname, session)
        if isinstance(ssl_object, AlertingSSLObject):
            ssl_object.outgoing = outgoing
        return ssl_object


class PeerRefused(Exception):
    """The handshake succeeded but the peer is refused (its public key is not pinned)."""


@dataclass(frozen=True, slots=True)
class PeerSession:
    """What a connection keeps of a TLS session: for /connz and for `verify_and_map`."""

    version: str  # "1.3", as nats-server's /connz writes it
    cipher_suite: str  # Go's name of it
    certificate: CertificateNames | None  # only with verify_and_map
    peer_certificates: tuple[PeerCertificate, ...]  # what the client presented (/connz)


def peer_session(transport: asyncio.BaseTransport, tls: TLSSettings, tls_map: bool) -> PeerSession:
    """The session a handshake set up on `transport`, the peer's public key checked against
    `pinned_certs` first (`PeerRefused`)."""
    ssl_object = transport.get_extra_info("ssl_object")
    if tls.pinned_certs:
        der = ssl_object.getpeercert(binary_form=True) if ssl_object else None
        if der is None or public_key_pin(der) not in tls.pinned_certs:
            raise PeerRefused("peer certificate not pinned")
    if ssl_object is None:
        return PeerSession("", "", None, ())
    certificate = CertificateNames.of(ssl_object.getpeercert() or {}) if tls_map else None
    return PeerSession(
        (ssl_object.version() or "").removeprefix("TLSv"),
        cipher_suite_name(ssl_object),
        certificate,
        peer_certificates(ssl_object),
    )


def sniff_tls(
    loop: asyncio.AbstractEventLoop,
    sock: socket.socket,
    timeout_s: float,
    decide: Callable[[bytes], None],
) -> None:
    """Peek at the client's first byte without taking it from the socket, then
    `decide(first)` once, with b"" when it stays silent for `timeout_s` or closes:
    `allow_non_tls` goes on with TLS when it is `TLS_HANDSHAKE_RECORD` (a ClientHello),
    a `handshake_first` fallback when there is any. The caller has paused its
    transport's reading."""
    peek = socket.socket(fileno=os.dup(sock.fileno()))
    peek.setblocking(False)

    def done(first: bytes) -> None:
        loop.remove_reader(peek.fileno())
        peek.close()
        timer.cancel()
        decide(first)

    def readable() -> None:
        try:
            first = peek.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return
        except OSError:
            first = b""
        done(first[:1])

    loop.add_reader(peek.fileno(), readable)
    timer = loop.call_later(timeout_s, done, b"")


class FallbackListener:
    """The client port with `handshake_first` and a fallback delay (nats-server's
    `createClient`): each accepted socket is watched for the delay before the event loop
    gets it, so that a TLS-first client's ClientHello stays in the socket for the
    handshake (a transport would read it at once). A client that sends anything within
    the delay is served TLS first (`ssl` on the loop's transport, INFO after the
    handshake); one that stays silent gets a plain transport (INFO, then the port's
    usual upgrade, or with `allow_non_tls` its own choice). Failed handshakes close
    only their client."""

    def __init__(
        self,
        protocol_factory: Callable[[], asyncio.Protocol],
        context: ssl.SSLContext,
        tls: TLSSettings,
    ) -> None:
        self._factory = protocol_factory
        self._context = context
        self._handshake_timeout_s = tls.timeout_s
        self._delay_s = tls.handshake_first_fallback_s
        self._sock: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    def start(self, sock: socket.socket) -> None:
        self._loop = asyncio.get_running_loop()
        self._sock = sock
        sock.setblocking(False)
        sock.listen(1024)
        self._loop.add_reader(sock.fileno(), self._accept)

    def close(self) -> None:
        """Stop accepting; clients still within their delay are closed."""
        if self._sock is not None and self._loop is not None:
            self._loop.remove_reader(self._sock.fileno())
            self._sock.close()
            self._sock = None

    def _accept(self) -> None:
        while self._sock is not None:
            try:
                conn, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # e.g. too many open files: try again on the next readiness
                return
            conn.setblocking(False)
            assert self._loop is not None
            sniff_tls(self._loop, conn, self._delay_s, functools.partial(self._serve, conn))

    def _serve(self, conn: socket.socket, first: bytes) -> None:
        if self._sock is None or self._loop is None:
            conn.close()
            return
        task = self._loop.create_task(self._connect(conn, bool(first)))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _connect(self, conn: socket.socket, secure: bool) -> None:
        assert self._loop is not None
        try:
            if secure:
                await self._loop.connect_accepted_socket(
                    self._factory,
                    conn,
                    ssl=self._context,
                    ssl_handshake_timeout=self._handshake_timeout_s,
                )
            else:
                await self._loop.connect_accepted_socket(self._factory, conn)
        except Exception as exc:  # a failed handshake: this client only
            log.debug("TLS handshake error: %s", str(exc) or type(exc).__name__)
            conn.close()


def public_key_pin(der: bytes) -> str:
    """The hex SHA-256 of a DER certificate's SubjectPublicKeyInfo (`pinned_certs`)."""
    return hashlib.sha256(_tbs_fields(der)[5]).hexdigest()


def _tbs_fields(der: bytes) -> list[bytes]:
    """A DER certificate's TBSCertificate fields without the version: serialNumber,
    signature, issuer, validity, subject, subjectPublicKeyInfo, then the extensions."""
    fields = _children(_children(der)[0])  # Certificate -> TBSCertificate -> its fields
    if fields and fields[0][0] == 0xA0:  # [0] version, present in v3 certificates
        fields = fields[1:]
    return fields


@dataclass(frozen=True, slots=True)
class PeerCertificate:
    """A certificate the client presented, as `/connz?auth=true` shows it (nats-server's
    `TLSPeerCert`)."""

    subject: str  # Go's `pkix.Name.String()`
    spki_sha256: str
    cert_sha256: str

    @classmethod
    def of(cls, der: bytes) -> PeerCertificate:
        return cls(
            subject=go_name_string(_tbs_fields(der)[4]),
            spki_sha256=public_key_pin(der),
            cert_sha256=hashlib.sha256(der).hexdigest(),
        )


# OpenSSL's names of the TLS 1.2 suites Go's crypto/tls implements -> Go's (IANA) names,
# which nats-server's /connz shows; TLS 1.3 suites have the IANA names in both.
_GO_CIPHER_NAMES = {
    "ECDHE-ECDSA-AES128-GCM-SHA256": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "ECDHE-RSA-AES128-GCM-SHA256": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "ECDHE-ECDSA-AES256-GCM-SHA384": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "ECDHE-RSA-AES256-GCM-SHA384": "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "ECDHE-ECDSA-CHACHA20-POLY1305": "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    "ECDHE-RSA-CHACHA20-POLY1305": "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    "ECDHE-ECDSA-AES128-SHA": "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "ECDHE-RSA-AES128-SHA": "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "ECDHE-ECDSA-AES256-SHA": "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "ECDHE-RSA-AES256-SHA": "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "ECDHE-ECDSA-AES128-SHA256": "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "ECDHE-RSA-AES128-SHA256": "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
    "AES128-GCM-SHA256": "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "AES256-GCM-SHA384": "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "AES128-SHA": "TLS_RSA_WITH_AES_128_CBC_SHA",
    "AES256-SHA": "TLS_RSA_WITH_AES_256_CBC_SHA",
    "AES128-SHA256": "TLS_RSA_WITH_AES_128_CBC_SHA256",
}


def cipher_suite_name(ssl_object: ssl.SSLObject) -> str:
    """The negotiated suite under the name Go's `tls.CipherSuiteName` gives it."""
    name = (ssl_object.cipher() or ("",))[0]
    return _GO_CIPHER_NAMES.get(name, name)


def peer_certificates(ssl_object: ssl.SSLObject) -> tuple[PeerCertificate, ...]:
    """The chain the client presented (its certificate first), as nats-server lists
    `PeerCertificates`."""
    return tuple(PeerCertificate.of(der) for der in _presented_chain(ssl_object))


def _presented_chain(ssl_object: ssl.SSLObject) -> list[bytes]:
    """The DER certificates the peer sent, in its order. Python 3.13 made `_ssl`'s
    `get_unverified_chain` (OpenSSL's `SSL_get_peer_cert_chain`) public on `SSLObject`;
    3.10 to 3.12 have the same call on the `_sslobj` under it, returning `_ssl`
    certificates, which 3.13's method turns into DER exactly so."""
    public = getattr(ssl_object, "get_unverified_chain", None)
    if public is not None:  # Python 3.13+
        return list(public() or ())
    inner: Any = getattr(ssl_object, "_sslobj", None)
    chain = getattr(inner, "get_unverified_chain", None)
    if chain is not None:
        return [cert.public_bytes(_ssl.ENCODING_DER) for cert in chain() or ()]
    der = ssl_object.getpeercert(binary_form=True)  # no such call: the peer's own alone
    return [der] if der else []


def certificate_not_after(pem_file: str) -> datetime.datetime | None:
    """The end of the validity of the first certificate in a PEM file (`/varz`'s
    `tls_cert_not_after`, as nats-server's `tlsCertNotAfter`); None when unreadable."""
    try:
        with open(pem_file, encoding="ascii", errors="replace") as f:
            der = ssl.PEM_cert_to_DER_cert(f.read())
        not_after = _children(_tbs_fields(der)[3])[1]
        _, start, end = _header(not_after, 0)
        text = not_after[start:end].decode("ascii")
    except (OSError, ValueError, IndexError):
        return None
    if not_after[0] == 0x17:  # UTCTime: two-digit years, 1950-2049 (RFC 5280)
        year = int(text[:2])
        text = f"{year + (1900 if year >= 50 else 2000)}{text[2:]}"
    try:
        return datetime.datetime.strptime(text, "%Y%m%d%H%M%SZ").replace(tzinfo=datetime.UTC)
    except ValueError:
        return None


# X.500 attribute types Go parses into `pkix.Name`'s fields, by DER-encoded OID, in the
# order its `ToRDNSequence` writes them back, with the names `RDNSequence.String` uses.
_GO_NAME_FIELDS: dict[bytes, str] = {
    b"\x55\x04\x06": "C",
    b"\x55\x04\x08": "ST",
    b"\x55\x04\x07": "L",
    b"\x55\x04\x09": "STREET",
    b"\x55\x04\x11": "POSTALCODE",
    b"\x55\x04\x0a": "O",
    b"\x55\x04\x0b": "OU",
    b"\x55\x04\x03": "CN",
    b"\x55\x04\x05": "SERIALNUMBER",
}
_SINGLE_VALUED = ("CN", "SERIALNUMBER")  # Go keeps the last one only
_GO_PRINTABLE = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 '()+,-./:=?"
)


def go_name_string(name: bytes) -> str:
    """A DER X.501 Name as Go's `pkix.Name.String()` writes it: the attributes it knows
    regrouped in its own order (most specific first), the others after them as
    `OID=#hex` of their values re-encoded by `asn1.Marshal`."""
    known: dict[str, list[str]] = {}
    extra: list[str] = []
    for rdn in _children(name):
        for attribute in _children(rdn):
            oid, value = _children(attribute)
            oid_body = oid[_header(oid, 0)[1] :]
            text = _der_string(value)
            label = _GO_NAME_FIELDS.get(oid_body)
            if label is None:
                extra.append(f"{_oid_string(oid_body)}=#{_go_marshal_string(text).hex()}")
            elif label in _SINGLE_VALUED:
                known[label] = [text]
            else:
                known.setdefault(label, []).append(text)
    rdns = [
        "+".join(f"{label}={_escape_dn(v)}" for v in known[label])
        for label in _GO_NAME_FIELDS.values()
        if label in known
    ]
    return ",".join([*reversed(rdns), *reversed(extra)])


def _der_string(element: bytes) -> str:
    _, start, end = _header(element, 0)
    body = element[start:end]
    if element[0] == 0x1E:  # BMPString
        return body.decode("utf-16-be", errors="replace")
    return body.decode("utf-8" if element[0] == 0x0C else "latin-1", errors="replace")


def _go_marshal_string(text: str) -> bytes:
    """Go's `asn1.Marshal` of a string: a PrintableString when it can be, else UTF8String."""
    body = text.encode()
    tag = 0x13 if all(c in _GO_PRINTABLE for c in text) else 0x0C
    size = len(body)
    if size < 0x80:
        return bytes((tag, size)) + body
    length = size.to_bytes((size.bit_length() + 7) // 8, "big")
    return bytes((tag, 0x80 | len(length))) + length + body


def _oid_string(body: bytes) -> str:
    arcs: list[int] = []
    value = 0
    for byte in body:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    if not arcs:
        return ""
    first = min(arcs[0] // 40, 2)
    return ".".join(str(a) for a in (first, arcs[0] - 40 * first, *arcs[1:]))


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
