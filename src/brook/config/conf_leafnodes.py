"""The `leafnodes {}` block (nats-server's `parseLeafNodes` and `parseRemoteLeafNodes`)
onto `LeafNodeSettings` (ADR 0032).

Brook honours a spoke's remotes (`url`/`urls`, `account`/`local`, `credentials`/`creds`,
`deny_imports`, `deny_exports`, `tls` with `ca_file`, `cert_file`, `key_file`, `timeout`,
`compression: off`, `nkey`, `ignore_discovered_servers`), a hub's `listen` (`host`, `port`),
`advertise`, `tls` and `authorization` (a
user, an `nkey` or `users`, with the account each binds, and `timeout`) and
`reconnect_delay`; every other
key nats-server knows there is refused by name at load, so no configuration is accepted
that Brook would not carry out.
"""

from __future__ import annotations

import os
import re
from urllib.parse import urlsplit

from brook import nkey
from brook.config.conf_tls import read_tls
from brook.config.conf_values import (
    block_entries,
    host_port,
    on_line,
    read_array,
    read_block,
    read_bool,
    read_duration,
    read_int,
    read_str,
)
from brook.config.settings import (
    GLOBAL_ACCOUNT,
    ConfigError,
    LeafNodeSettings,
    LeafRemoteSettings,
    LeafUser,
    Settings,
    TLSSettings,
)
from brook.subjects import is_valid_subject

_LEAF_KEYS = (
    "remotes", "reconnect", "reconnect_delay", "reconnect_interval", "listen", "port", "host",
    "net", "authorization", "tls", "advertise", "leafnode_advertise", "no_advertise",
)  # fmt: skip
# nats-server's keys of the block that Brook does not carry out yet.
_LEAF_UNSUPPORTED = (
    "min_version", "minimum_version", "compression",
    "isolate_leafnode_interest", "isolate", "write_deadline", "write_timeout", "dial_timeout",
)  # fmt: skip
_REMOTE_KEYS = (
    "url", "urls", "account", "local", "compression", "credentials", "creds", "tls",
    "deny_imports", "deny_import", "deny_exports", "deny_export", "nkey", "seed",
    "ignore_discovered_servers",
)  # fmt: skip
# The keys of a remote's `tls {}` that a dialling side uses; nats-server's others refused.
_REMOTE_TLS_KEYS = ("cert_file", "key_file", "ca_file", "timeout")
_HUB_TLS_KEYS = (*_REMOTE_TLS_KEYS, "verify", "min_version")
_REMOTE_UNSUPPORTED = (
    "no_randomize", "dont_randomize", "hub", "ws_compress",
    "ws_compression", "websocket_compress", "websocket_compression", "ws_no_masking",
    "websocket_no_masking", "jetstream_cluster_migrate", "js_cluster_migrate",
    "isolate_leafnode_interest", "isolate", "request_isolation", "first_info_timeout",
    "dial_timeout", "disabled", "proxy",
)  # fmt: skip
_SCHEMES = ("nats-leaf", "nats", "tls")
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
    leaf = s.leafnodes
    for key, at, value in block_entries(block, where, _LEAF_KEYS):
        if key == "remotes":
            entries = read_array(at, "remotes", value)
            leaf.remotes = [_remote(f"{at}[{i}]", e) for i, e in enumerate(entries)]
        elif key == "listen":
            host, leaf.port = host_port(at, value)
            leaf.host = host or leaf.host
        elif key == "port":
            leaf.port = read_int(at, value)
        elif key in ("host", "net"):
            leaf.host = read_str(at, value)
        elif key == "authorization":
            _authorization(leaf, at, value)
        elif key == "tls":
            leaf.tls = _tls(at, value, _HUB_TLS_KEYS)
        elif key in ("advertise", "leafnode_advertise"):
            leaf.advertise = read_str(at, value)
        elif key == "no_advertise":
            leaf.no_advertise = read_bool(at, value)
        else:
            delay = read_duration(at, value)
            if delay <= 0:
                raise ConfigError(f"{at}: must be a positive duration")
            s.leafnodes.reconnect_delay_s = delay


_AUTH_KEYS = ("user", "username", "pass", "password", "account", "timeout", "users", "nkey")
_AUTH_UNSUPPORTED = ("proxy_required",)
_USER_KEYS = ("user", "username", "pass", "password", "account")


def _authorization(leaf: LeafNodeSettings, where: str, v: object) -> None:
    """nats-server's `parseLeafAuthorization`: one user (with the account it binds) or a
    `users` list, and the auth timeout."""
    block = read_block(where, v)
    _refuse(block, where, _AUTH_UNSUPPORTED)
    single: dict[str, str] = {}
    for key, at, value in block_entries(block, where, _AUTH_KEYS):
        if key == "timeout":
            leaf.auth_timeout_s = read_duration(at, value)
        elif key == "users":
            entries = read_array(at, "users", value)
            leaf.users += [_user(f"{at}[{i}]", e) for i, e in enumerate(entries)]
        elif key == "nkey":
            leaf.nkey = read_str(at, value)
            try:
                nkey.decode_public_key(leaf.nkey, nkey.Prefix.USER)
            except nkey.InvalidNkey:
                text = "Not a valid public nkey for leafnode authorization"
                raise ConfigError(f"{at}: {text}") from None
        else:
            single[key] = read_str(at, value)
    if leaf.nkey and leaf.users:
        raise ConfigError(f"{where}: can not have a single nkey and a users array")
    if leaf.nkey:
        leaf.nkey_account = single.pop("account", GLOBAL_ACCOUNT)
    if single:
        leaf.users.insert(0, _user(where, single))


def _user(where: str, v: object) -> LeafUser:
    block = read_block(where, v)
    _refuse(block, where, _AUTH_UNSUPPORTED)
    entries = block_entries(block, where, _USER_KEYS)
    fields = {key: read_str(at, value) for key, at, value in entries}
    user = fields.get("user", fields.get("username", ""))
    if not user:
        raise ConfigError(f"{where}: a leafnode user needs a name")
    password = fields.get("password", fields.get("pass", ""))
    if re.match(r"\$2[abxy]\$\d{2}\$", password):
        raise ConfigError(f"{where}: a bcrypt password for a leafnode user: not supported by Brook")
    return LeafUser(user, password, fields.get("account", GLOBAL_ACCOUNT))


def _remote(where: str, v: object) -> LeafRemoteSettings:
    if not isinstance(v, dict):
        raise ConfigError(f"{where}: Expected remote leafnode entry to be a map/struct, got {v!r}")
    _refuse(v, where, _REMOTE_UNSUPPORTED)
    urls: list[str] = []
    account = GLOBAL_ACCOUNT
    credentials = None
    seed = None
    ignore_discovered = False
    tls = None
    denies: dict[str, list[str]] = {"imports": [], "exports": []}
    for key, at, value in block_entries(v, where, _REMOTE_KEYS):
        if key in ("url", "urls"):
            given = value if isinstance(value, list) else [value]
            urls += [_url(at, u) for u in given]
        elif key in ("account", "local"):
            account = read_str(at, value)
        elif key in ("credentials", "creds"):
            credentials = os.path.expanduser(read_str(at, value))
        elif key in ("nkey", "seed"):
            seed = read_str(at, value)
            try:
                role, _ = nkey.seed_public_key(seed)
            except nkey.InvalidNkey:
                role = -1
            if role != nkey.Prefix.USER:
                raise ConfigError(f"{at}: Remote leafnode nkey is not a valid seed: {seed!r}")
        elif key.startswith("deny_"):
            denies[key.removeprefix("deny_").removesuffix("s") + "s"] += _subjects(at, value)
        elif key == "tls":
            tls = _tls(at, value, _REMOTE_TLS_KEYS)
        elif key == "ignore_discovered_servers":
            ignore_discovered = read_bool(at, value)
        elif value not in (False, "off", "disabled"):
            raise ConfigError(f"{at}: Brook's leafnode connections are not compressed (off)")
    if not urls:
        raise ConfigError(f"{where}: a remote leafnode needs a url")
    if credentials is not None and seed is not None:
        raise ConfigError(f"{where}: Remote leafnode can not have both creds and nkey defined")
    return LeafRemoteSettings(
        urls=urls,
        account=account,
        credentials=credentials,
        nkey=seed,
        ignore_discovered_servers=ignore_discovered,
        deny_imports=denies["imports"],
        deny_exports=denies["exports"],
        tls=tls,
    )


def _tls(where: str, v: object, keys: tuple[str, ...]) -> TLSSettings:
    """A `tls {}` block of the leafnode side, with only the `keys` that side uses."""
    block = read_block(where, v)
    for name in block:
        if str(name).lower() not in keys:
            raise ConfigError(
                f"{where}.{str(name).lower()}{on_line(block, str(name))}: not supported by"
                " Brook for leafnodes"
            )
    return read_tls(where, block)


def _subjects(where: str, v: object) -> list[str]:
    """A subject or a list of them, each valid (nats-server's `checkPermSubjectArray`)."""
    given = v if isinstance(v, list) else [v]
    subjects = [read_str(where, s) for s in given]
    for subject in subjects:
        if not is_valid_subject(subject.encode()):
            raise ConfigError(f"{where}: invalid subject {subject!r}")
    return subjects


def _url(where: str, v: object) -> str:
    text = read_str(where, v)
    try:
        parts = urlsplit(text if "://" in text else f"nats-leaf://{text}")
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"{where}: {text!r}: {exc}") from None
    if parts.scheme not in _SCHEMES or not parts.hostname:
        raise ConfigError(f"{where}: {text!r}: Brook dials nats-leaf://, nats:// or tls:// URLs")
    return f"{parts.scheme}://{parts.netloc}" + ("" if port else f":{_DEFAULT_PORT}")
