"""A `tls {}` block's settings (ADR 0024): the client port's, and as read for the
WebSocket, monitoring and leafnode listeners and a leafnode remote."""

from __future__ import annotations

from dataclasses import dataclass

from brook import limits
from brook.config.errors import ConfigError


@dataclass(slots=True)
class TLSSettings:
    """The client port's `tls {}` block (nats-server's names; server/tls.py builds the
    context). `verify_and_map` implies `verify`, as there."""

    cert_file: str = ""
    key_file: str = ""
    ca_file: str = ""
    verify: bool = False
    verify_and_map: bool = False
    timeout_s: float = limits.TLS_TIMEOUT_S
    handshake_first: bool = False
    # With handshake_first: a client silent this long gets INFO in plain text and then
    # the port's usual TLS (nats-server's fallback delay, `auto` or a duration); 0: none.
    handshake_first_fallback_s: float = 0.0
    min_version: str = "1.2"  # "1.2" or "1.3": nats-server refuses anything older
    # hex SHA-256 of each accepted peer's DER SubjectPublicKeyInfo, lower case; empty: any
    pinned_certs: frozenset[str] = frozenset()

    def validate(self, where: str) -> None:
        if not self.cert_file or not self.key_file:
            missing = "cert_file" if not self.cert_file else "key_file"
            raise ConfigError(f"{where}: missing '{missing}' in TLS configuration")
        if self.timeout_s <= 0:
            raise ConfigError(f"{where}.timeout: must be a positive duration")
