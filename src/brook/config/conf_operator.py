"""Operator mode's keys (ADR 0028): `operator` (the trusted operators' JWTs, files or
inline), `resolver` (MEMORY only; nats-server's others refused by name) and
`resolver_preload` (the accounts' JWTs)."""

from __future__ import annotations

import re
from pathlib import Path

from brook import jwt
from brook.config.conf_values import describe, read_block
from brook.config.settings import ConfigError, Settings


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
    """`resolver`: MEMORY (`MEM`), the only account resolver Brook serves; nats-server's
    URL and directory resolvers are refused by name."""
    kind = v
    if isinstance(v, dict):
        block = read_block(where, v)
        kind = next((value for key, value in block.items() if str(key).lower() == "type"), "")
    if not isinstance(kind, str):
        raise ConfigError(f"{where}: error parsing operator resolver, wrong type {describe(v)}")
    if isinstance(v, str) and re.search(r"(?i)(MEM|MEMORY)\s*", v):
        kind = "MEMORY"
    if kind.upper() in ("MEM", "MEMORY"):
        s.operator.resolver = "MEMORY"
    elif kind.upper() in ("FULL", "CACHE") or re.match(r"(?i)URL", kind):
        raise ConfigError(f"{where}: the {kind} account resolver is not supported by Brook")
    else:
        raise ConfigError(f"{where}: {_RESOLVER_ERROR}")


def apply_resolver_preload(s: Settings, where: str, v: object) -> None:
    """`resolver_preload { ACCOUNT_PUBLIC_KEY: ACCOUNT_JWT }`: the accounts the memory
    resolver holds; each value must decode as an account JWT (opts.go)."""
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
            claims = jwt.decode_account(value)
        except jwt.InvalidJwt:
            raise ConfigError(f"{at}: invalid account JWT") from None
        if claims.limits.tiered_limits:
            raise ConfigError(
                f"{at}: tiered JetStream limits of account JWTs are not served by Brook"
            )
        preload[key] = value
    s.operator.preload = preload
