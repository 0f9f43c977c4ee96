"""A `tls {}` block (the client port's or the WebSocket listener's), read as nats-server's
`parseTLS` reads it, with its error texts (ADR 0024)."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from brook import limits
from brook.config.conf_values import block_entries, describe, on_line, read_block
from brook.config.settings import ConfigError, Settings, TLSSettings
from brook.durations import parse_ns, parse_seconds

# nats-server's `tls {}` keys Brook does not serve: refused by name rather than ignored.
_TLS_UNSUPPORTED = frozenset(
    (
        *("insecure", "verify_cert_and_check_known_urls", "allow_insecure_cipher_suites"),
        *("cipher_suites", "curve_preferences", "connection_rate_limit", "cert_store"),
        *("cert_match_by", "cert_match", "ca_certs_match", "cert_match_skip_invalid"),
        *("ocsp_peer", "certs", "certificates"),
    )
)
_TLS_KEYS = (
    *("cert_file", "key_file", "ca_file", "verify", "verify_and_map", "timeout"),
    *("handshake_first", "first", "immediate", "min_version", "pinned_certs"),
)
_PIN_RE = re.compile(r"[a-f0-9]{64}", re.ASCII)


def apply_tls(s: Settings, where: str, v: object) -> None:
    s.tls = read_tls(where, v)


def read_tls(where: str, v: object) -> TLSSettings:
    """A `tls {}` block (the client port's or the WebSocket listener's), read as
    nats-server's `parseTLS` reads it, with its error texts; keys nats-server knows but
    Brook does not serve are refused."""
    block = read_block(where, v)
    tls = TLSSettings()

    def fail(key: str, message: str) -> ConfigError:
        return ConfigError(f"{where}.{key}{on_line(block, key)}: {message}")

    for key in block:
        if str(key).lower() in _TLS_UNSUPPORTED:
            raise fail(str(key).lower(), "not supported by Brook")
    for key, _, value in block_entries(block, where, _TLS_KEYS):
        if key in ("cert_file", "key_file", "ca_file"):
            if not isinstance(value, str):
                raise fail(key, f"error parsing tls config, expected '{key}' to be filename")
            setattr(tls, key, value)
        elif key in ("verify", "verify_and_map"):
            if not isinstance(value, bool):
                raise fail(key, f"error parsing tls config, expected '{key}' to be a boolean")
            setattr(tls, key, value)
        elif key == "timeout":
            tls.timeout_s = _tls_timeout(value, functools.partial(fail, "timeout"))
        elif key in ("handshake_first", "first", "immediate"):
            tls.handshake_first, tls.handshake_first_fallback_s = _handshake_first(
                key, value, functools.partial(fail, key)
            )
        elif key == "min_version":
            if not isinstance(value, str):
                raise fail(key, f"error parsing tls config: 'min_version' wrong type: {value}")
            if value in ("1.0", "1.1"):
                raise fail(key, f"error parsing tls config: unsupported TLS version: TLS {value}")
            if value not in ("1.2", "1.3"):
                raise fail(key, f"error parsing tls config: unknown version: {value}")
            tls.min_version = value
        else:
            tls.pinned_certs = _pinned_certs(value, functools.partial(fail, "pinned_certs"))
    if tls.verify_and_map:
        tls.verify = True
    return tls


def _tls_timeout(value: object, fail: Callable[[str], ConfigError]) -> float:
    """Seconds as a number, or a Go duration string, as nats-server reads `timeout`."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return parse_seconds(value)
        except ValueError as exc:
            raise fail(f"error parsing tls config, 'timeout' {exc}") from None
    raise fail("error parsing tls config, 'timeout' wrong type")


def _handshake_first(
    key: str, value: object, fail: Callable[[str], ConfigError]
) -> tuple[bool, float]:
    """(handshake_first, its fallback delay in seconds), as nats-server's `parseTLS`."""
    if isinstance(value, bool):
        return value, 0.0
    if isinstance(value, str):
        word = value.lower()
        if word in ("true", "on", "false", "off"):
            return word in ("true", "on"), 0.0
        if word in ("auto", "auto_fallback"):
            return True, limits.TLS_HANDSHAKE_FIRST_FALLBACK_S
        ns = parse_ns(value)  # Go's time.ParseDuration: a unit is required
        if ns is None:
            raise fail(f"field {key!r}'s value {value!r} is invalid")
        return True, max(ns, 0) / 1e9
    raise fail(f"field {key!r} should be a boolean or a string, got {describe(value)}")


def _pinned_certs(value: object, fail: Callable[[str], ConfigError]) -> frozenset[str]:
    if not isinstance(value, list):
        raise fail(
            "error parsing tls config, expected 'pinned_certs' to be a list of hex-encoded "
            "sha256 of DER encoded SubjectPublicKeyInfo"
        )
    pins = set()
    for entry in value:
        pin = str(entry).lower()
        if not _PIN_RE.fullmatch(pin):
            raise fail(
                f"error parsing tls config, 'pinned_certs' key {pin} does not look like "
                "hex-encoded sha256 of DER encoded SubjectPublicKeyInfo"
            )
        pins.add(pin)
    return frozenset(pins)
