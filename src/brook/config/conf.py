"""The meaning half of the nats-server config format: parsed config in, `Settings` out.

Brook reads the same files as nats-server so one config can drive either server. The text
is parsed by `brook.config.conf_syntax` (re-exported here: `parse_conf`, `parse_size`);
this module maps the resulting dict onto `Settings`, accepting the key names and aliases
nats-server accepts (`net` for `host`, `max_conn`, the jetstream block's
`store`/`max_mem`/... spellings, `authorization` with a token, one user or a `users` list
of passwords and nkeys, `no_auth_user`)
and the value shapes it accepts (`listen: "host:port"`, sizes like `1MB`, durations read
by `brook.durations.parse_seconds`). Each block has its reader in a module of its own
(`conf_auth.py`, `conf_accounts.py`, `conf_exports.py`, `conf_mappings.py`,
`conf_jetstream.py`, `conf_operator.py`, `conf_process.py`, `conf_tls.py`,
`conf_websocket.py`), each value
its checker in `conf_values.py`; this module is the table of top-level keys.

Deliberate differences from nats-server, each to avoid a silent surprise:
* a duration written as a suffixed number (`ping_interval: 2m`) is two minutes, not the two
  million seconds nats-server would read;
* `settings_from_conf` rejects keys it does not know instead of ignoring them, so a typo
  never leaves a default silently in place. Keys defined only to be referenced as
  `$variables` are exempt, as in nats-server.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path

from brook.config.conf_accounts import apply_accounts
from brook.config.conf_auth import apply_authorization, apply_no_auth_user
from brook.config.conf_jetstream import apply_jetstream, sync_interval
from brook.config.conf_leafnodes import apply_leafnodes
from brook.config.conf_mappings import apply_mappings
from brook.config.conf_operator import (
    apply_operator,
    apply_resolver,
    apply_resolver_pinned_accounts,
    apply_resolver_preload,
)
from brook.config.conf_process import PROCESS_KEYS
from brook.config.conf_syntax import parse_conf, parse_size
from brook.config.conf_tls import apply_tls
from brook.config.conf_values import (
    block_entries,
    host_port,
    read_bool,
    read_duration,
    read_int,
    read_size,
    read_str,
)
from brook.config.conf_websocket import apply_websocket
from brook.config.settings import ConfigError, Settings

__all__ = [
    "config_digest",
    "load_conf_file",
    "parse_conf",
    "parse_size",
    "settings_from_conf",
    "sync_interval",
]

_Handler = Callable[[Settings, str, object], None]


def _address(host_attr: str, port_attr: str) -> _Handler:
    def apply(s: Settings, where: str, v: object) -> None:
        host, port = host_port(where, v)
        setattr(s, port_attr, port)
        if host is not None:
            setattr(s, host_attr, host)

    return apply


def _set(attr: str, convert: Callable[[str, object], object]) -> _Handler:
    def apply(s: Settings, where: str, v: object) -> None:
        setattr(s, attr, convert(where, v))

    return apply


# Plain keys: conf key(s), Settings attribute, converter. Aliases are nats-server's.
_PLAIN = (
    ("host net", "host", read_str),
    ("port", "port", read_int),
    ("http_port monitor_port", "http_port", read_int),
    ("https_port", "https_port", read_int),
    ("allow_non_tls", "allow_non_tls", read_bool),
    ("server_name", "server_name", read_str),
    ("ports_file_dir", "ports_file_dir", read_str),
    ("max_payload", "max_payload_bytes", read_size),
    ("max_control_line", "max_control_line_bytes", read_size),
    ("max_connections max_conn", "max_connections", read_int),
    ("max_subscriptions max_subs", "max_subscriptions", read_int),
    ("max_pending", "max_pending_bytes", read_size),
    ("max_closed_clients", "max_closed_clients", read_int),
    ("write_deadline", "write_deadline_s", read_duration),
    ("ping_interval", "ping_interval_s", read_duration),
    ("ping_max", "max_pings_out", read_int),
    ("debug", "debug", read_bool),
    ("trace", "trace", read_bool),
    ("metrics_consumers", "metrics_consumers", read_bool),  # Brook's own (ADR 0040)
)
_TOP: dict[str, _Handler] = {
    key: _set(attr, convert) for keys, attr, convert in _PLAIN for key in keys.split()
} | {
    "listen": _address("host", "port"),
    "http": _address("http_host", "http_port"),
    "https": _address("http_host", "https_port"),
    "authorization": apply_authorization,
    "no_auth_user": apply_no_auth_user,
    **dict.fromkeys(
        ("operator", "operators", "roots", "root", "root_operators", "root_operator"),
        apply_operator,
    ),
    **dict.fromkeys(("resolver", "account_resolver", "accounts_resolver"), apply_resolver),
    "resolver_preload": apply_resolver_preload,
    "resolver_pinned_accounts": apply_resolver_pinned_accounts,
    "jetstream": apply_jetstream,
    "accounts": apply_accounts,
    "system_account": _set("system_account", read_str),
    "system": _set("system_account", read_str),
    "websocket": apply_websocket,
    "ws": apply_websocket,
    "mappings": apply_mappings,
    "maps": apply_mappings,
    "tls": apply_tls,
    "leafnodes": apply_leafnodes,
    "leaf": apply_leafnodes,
    **PROCESS_KEYS,
}


def settings_from_conf(data: Mapping[str, object], base: Settings | None = None) -> Settings:
    """Translate parsed config onto a copy of `base` (default `Settings()`), then validate.

    Unknown keys and wrongly typed values raise `ConfigError` naming the dotted key path.
    """
    settings = copy.deepcopy(base) if base is not None else Settings()
    for key, where, value in block_entries(data, "", _TOP):
        _TOP[key](settings, where, value)
    return settings.validate()


def load_conf_file(path: str, base: Settings | None = None) -> Settings:
    """Read, parse and translate one config file; errors name the file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror or exc}") from None
    data = parse_conf(text, path=path)
    try:
        settings = settings_from_conf(data, base)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    settings.config_file = path  # read again by a config reload (server/reload.py)
    return settings


def config_digest(path: str) -> str:
    """nats-server's digest of a config file (`-t` prints it): the SHA-256 of the parsed
    config encoded as Go's `json.Encoder` does (sorted keys, no spaces, `<`, `>` and `&`
    escaped, a newline after), so that the same file has the same digest under both."""
    data = parse_conf(Path(path).read_text(encoding="utf-8"), path=path)
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, escaped)
    text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return "sha256:" + hashlib.sha256((text + "\n").encode()).hexdigest()
