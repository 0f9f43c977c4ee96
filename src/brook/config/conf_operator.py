"""Operator mode's keys (ADR 0028, ADR 0033): `operator` (the trusted operators' JWTs,
files or inline), `resolver` (MEMORY, the `full`/`cache` directory resolvers, or the URL
resolver), `resolver_preload` (the accounts' JWTs) and
`resolver_pinned_accounts`. `brook.jwt` is imported by the functions that read JWTs, so
that a server not in operator mode never loads it (start-up is mostly imports)."""

from __future__ import annotations

import os
import re
import urllib.parse
from collections.abc import Mapping
from pathlib import Path

from brook.config.conf_values import (
    block_entries,
    describe,
    read_block,
    read_bool,
    read_int,
    read_str,
)
from brook.config.settings import ConfigError, DirectoryResolver, Settings
from brook.durations import parse_ns


def apply_operator(s: Settings, where: str, v: object) -> None:
    """`operator`: the trusted operators' JWTs (ADR 0028), each a file (decorated as nsc
    writes it, or the bare JWT) or the JWT itself inline, one or a list (opts.go)."""
    items = v if isinstance(v, list) else [v]
    jwts = []
    for i, item in enumerate(items):
        at = f"{where}[{i}]" if isinstance(v, list) else where
        if not isinstance(item, str):
            raise ConfigError(f"{at}: error parsing operators: unsupported type {describe(item)}")
        jwts.append(_operator_jwt(at, item))
    s.operator.jwts = jwts


def _operator_jwt(where: str, name: str) -> str:
    """nats-server's `readOperatorJWT`: a file, else inline text that starts as a JWT."""
    from brook import jwt

    try:
        contents = Path(name).read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:
        if not name.startswith("eyJ"):
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise ConfigError(
                f"{where}: error parsing operator JWT: open {name}: {reason}"
            ) from None
        contents = name
    token = jwt.parse_decorated(contents)
    try:
        jwt.decode_operator(token)
    except jwt.InvalidJwt as exc:
        raise ConfigError(f"{where}: error parsing operator JWT: {exc}") from None
    return token


_RESOLVER_ERROR = (
    'error parsing account resolver, should be MEM or  URL("url") or a map containing '
    "dir and type state=[FULL|CACHE])"
)


def apply_resolver(s: Settings, where: str, v: object) -> None:
    """`resolver`: MEMORY (`MEM`), or a block `{ type: full|cache, dir: ... }` for the
    directory resolvers (ADR 0033), read as opts.go reads them, or `URL("http://...")`,
    an account server over HTTP (ADR 0034)."""
    if isinstance(v, dict):
        s.operator.directory = _directory_resolver(where, read_block(where, v))
        s.operator.resolver = s.operator.directory.kind if s.operator.directory else "MEMORY"
        return
    if not isinstance(v, str):
        raise ConfigError(f"{where}: error parsing operator resolver, wrong type {describe(v)}")
    if re.search(r"(?i)(MEM|MEMORY)\s*", v):
        s.operator.resolver = "MEMORY"
    elif (url := _URL_RESOLVER.search(v)) is not None and url.group(1) is not None:
        base = url.group(1)
        parsed = urllib.parse.urlsplit(base)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ConfigError(f"{where}: error parsing account resolver url {base!r}")
        s.operator.resolver = "URL"
        s.operator.url = base if base.endswith("/") else base + "/"
    else:
        raise ConfigError(f"{where}: {_RESOLVER_ERROR}")


# opts.go's `resolverRe`: URL("http://...") with the quotes optional.
_URL_RESOLVER = re.compile(r'(?i)(?:URL)(?:\(\s*"?([^\s"]*)"?\s*\))?\s*')


_DIR_RESOLVER_KEYS = (
    *("type", "dir", "allow_delete", "hard_delete", "limit", "ttl", "interval", "timeout"),
)


def _directory_resolver(where: str, block: Mapping[str, object]) -> DirectoryResolver | None:
    """opts.go's resolver map, its errors in its words; None for `type: MEM`."""
    found: dict[str, tuple[str, object]] = {
        key: (at, value) for key, at, value in block_entries(block, where, _DIR_RESOLVER_KEYS)
    }

    def text(key: str) -> str:
        return read_str(found[key][0], found[key][1]) if key in found else ""

    def duration(key: str) -> float:
        if key not in found:
            return 0.0
        value = text(key)
        ns = parse_ns(value)
        if ns is None:
            raise ConfigError(f'{where}: time: invalid duration "{value}"')
        return ns / 1e9

    kind = text("type").upper()
    if kind in ("MEM", "MEMORY"):
        return None
    if kind not in ("FULL", "CACHE"):
        raise ConfigError(f"{where}: {_RESOLVER_ERROR}")
    delete = read_bool(*found["allow_delete"]) if "allow_delete" in found else False
    hard = read_bool(*found["hard_delete"]) if "hard_delete" in found else False
    limit = read_int(*found["limit"]) if "limit" in found else 0
    ttl_s, interval_s, timeout_s = duration("ttl"), duration("interval"), duration("timeout")
    directory = text("dir")
    if not directory:
        raise ConfigError(f"{where}: dir has no value and needs to point to a directory")
    if os.path.exists(directory) and not (
        os.path.isdir(directory) and os.access(directory, os.X_OK)
    ):
        raise ConfigError(f"{where}: dir needs to point to an accessible directory")
    if kind == "CACHE":
        for key, words in (
            ("interval", "CACHE does not accept sync"),
            ("allow_delete", "CACHE does not accept allow_delete"),
            ("hard_delete", "CACHE does not accept hard_delete"),
        ):
            if (
                key in found
                and (key != "allow_delete" or delete)
                and (key != "interval" or interval_s)
            ):
                raise ConfigError(f"{where}: {words}")
    else:
        if ttl_s:
            raise ConfigError(f"{where}: FULL does not accept ttl")
        if "hard_delete" in found and not delete:
            raise ConfigError(f"{where}: hard_delete has no effect without delete")
    if "timeout" in found and timeout_s <= 0:
        raise ConfigError(f"{where}: Fetch timeout {found['timeout'][1]} is too smal")
    return DirectoryResolver(
        kind=kind,
        dir=directory,
        delete=("hard" if hard else "rename") if delete else "none",
        limit=max(limit, 0),
        ttl_s=ttl_s,
        interval_s=interval_s if interval_s > 0 else 60.0,
        timeout_s=timeout_s or 1.9,
    )


def apply_resolver_pinned_accounts(s: Settings, where: str, v: object) -> None:
    """`resolver_pinned_accounts`: one account public key or a list of them (opts.go)."""
    items = v if isinstance(v, list) else [v]
    if not isinstance(v, list | str):
        raise ConfigError(
            f"{where}: error parsing resolver_pinned_accounts: unsupported type {describe(v)}"
        )
    keys: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise ConfigError(
                f"{where}: error parsing resolver_pinned_accounts: unsupported type in array "
                f"{describe(item)}"
            )
        keys.append(item)
    s.operator.pinned_accounts = frozenset(keys)


def apply_resolver_preload(s: Settings, where: str, v: object) -> None:
    """`resolver_preload { ACCOUNT_PUBLIC_KEY: ACCOUNT_JWT }`: the accounts the memory
    resolver holds; each value must decode as an account JWT (opts.go)."""
    from brook import jwt

    if not isinstance(v, dict):
        raise ConfigError(f"{where}: preload should be a map of account_public_key:account_jwt")
    preload = {}
    for key, value in v.items():
        # The config parser lower-cases keys; public keys are upper-case base32.
        key = str(key).upper()
        at = f"{where}.{key}"
        if not isinstance(value, str):
            raise ConfigError(f"{at}: preload map value should be a string JWT")
        try:
            jwt.decode_account(value)
        except jwt.InvalidJwt:
            raise ConfigError(f"{at}: invalid account JWT") from None
        preload[key] = value
    s.operator.preload = preload
