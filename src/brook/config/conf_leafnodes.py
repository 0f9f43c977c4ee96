"""The `leafnodes {}` block (nats-server's `parseLeafNodes` and `parseRemoteLeafNodes`)
onto `LeafNodeSettings` (ADR 0032).

Brook honours a spoke's remotes (`url`/`urls`, `account`/`local`, `credentials`/`creds`,
`compression: off`) and
`reconnect_delay`; every other key nats-server knows there is refused by name at load,
so no configuration is accepted that Brook would not carry out.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from brook.config.conf_values import (
    block_entries,
    on_line,
    read_array,
    read_block,
    read_duration,
    read_str,
)
from brook.config.settings import GLOBAL_ACCOUNT, ConfigError, LeafRemoteSettings, Settings

_LEAF_KEYS = ("remotes", "reconnect", "reconnect_delay", "reconnect_interval")
# nats-server's keys of the block that Brook does not carry out yet.
_LEAF_UNSUPPORTED = (
    "listen", "port", "host", "net", "authorization", "tls", "advertise",
    "leafnode_advertise", "no_advertise", "min_version", "minimum_version", "compression",
    "isolate_leafnode_interest", "isolate", "write_deadline", "write_timeout", "dial_timeout",
)  # fmt: skip
_REMOTE_KEYS = ("url", "urls", "account", "local", "compression", "credentials", "creds")
_REMOTE_UNSUPPORTED = (
    "no_randomize", "dont_randomize", "nkey", "seed", "tls", "hub",
    "deny_imports", "deny_import", "deny_exports", "deny_export", "ws_compress",
    "ws_compression", "websocket_compress", "websocket_compression", "ws_no_masking",
    "websocket_no_masking", "jetstream_cluster_migrate", "js_cluster_migrate",
    "isolate_leafnode_interest", "isolate", "request_isolation", "first_info_timeout",
    "dial_timeout", "disabled", "proxy", "ignore_discovered_servers",
)  # fmt: skip
_SCHEMES = ("nats-leaf", "nats")
_DEFAULT_PORT = 7422  # nats-server's DEFAULT_LEAFNODE_PORT


def _refuse(block: object, where: str, keys: tuple[str, ...]) -> None:
    assert isinstance(block, dict)
    for key in block:
        if str(key).lower() in keys:
            at = f"{where}.{str(key).lower()}"
            raise ConfigError(f"{at}{on_line(block, str(key))}: not supported by Brook")


def apply_leafnodes(s: Settings, where: str, v: object) -> None:
    block = read_block(where, v)
    _refuse(block, where, _LEAF_UNSUPPORTED)
    for key, at, value in block_entries(block, where, _LEAF_KEYS):
        if key == "remotes":
            entries = read_array(at, "remotes", value)
            s.leafnodes.remotes = [_remote(f"{at}[{i}]", e) for i, e in enumerate(entries)]
        else:
            delay = read_duration(at, value)
            if delay <= 0:
                raise ConfigError(f"{at}: must be a positive duration")
            s.leafnodes.reconnect_delay_s = delay


def _remote(where: str, v: object) -> LeafRemoteSettings:
    if not isinstance(v, dict):
        raise ConfigError(f"{where}: Expected remote leafnode entry to be a map/struct, got {v!r}")
    _refuse(v, where, _REMOTE_UNSUPPORTED)
    urls: list[str] = []
    account = GLOBAL_ACCOUNT
    credentials = None
    for key, at, value in block_entries(v, where, _REMOTE_KEYS):
        if key in ("url", "urls"):
            given = value if isinstance(value, list) else [value]
            urls += [_url(at, u) for u in given]
        elif key in ("account", "local"):
            account = read_str(at, value)
        elif key in ("credentials", "creds"):
            credentials = os.path.expanduser(read_str(at, value))
        elif value not in (False, "off", "disabled"):
            raise ConfigError(f"{at}: Brook's leafnode connections are not compressed (off)")
    if not urls:
        raise ConfigError(f"{where}: a remote leafnode needs a url")
    return LeafRemoteSettings(urls=urls, account=account, credentials=credentials)


def _url(where: str, v: object) -> str:
    text = read_str(where, v)
    try:
        parts = urlsplit(text if "://" in text else f"nats-leaf://{text}")
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"{where}: {text!r}: {exc}") from None
    if parts.scheme not in _SCHEMES or not parts.hostname:
        raise ConfigError(
            f"{where}: {text!r}: Brook dials nats-leaf:// or nats:// URLs (no TLS yet)"
        )
    return f"{parts.scheme}://{parts.netloc}" + ("" if port else f":{_DEFAULT_PORT}")
