"""Query parameters read as nats-server's monitoring handlers read them (server/monitor.go).

`decodeBool` is Go's `strconv.ParseBool`, `decodeInt` Go's `strconv.Atoi` (64-bit); an
empty or missing parameter is false or 0. A malformed one is refused with status 400 and
nats-server's own plain-text message, which `BadParameter` carries for `brook.monitor.http`
to send as is.
"""

from __future__ import annotations

import json

from brook import strconv

__all__ = ["BadParameter", "NotHere", "decode_subs", "go_bool", "go_int", "go_uint64", "text"]

_BOOLS = {w: True for w in ("1", "t", "T", "TRUE", "true", "True")} | {
    w: False for w in ("0", "f", "F", "FALSE", "false", "False")
}
_INT64_MAX = 2**63 - 1


class BadParameter(ValueError):
    """A parameter nats-server refuses with 400 and this plain-text message."""


class NotHere(BadParameter):
    """A request that does not concern this server (nats-server's `errSkipZreq`, such as
    `leader-only` without JetStream): over HTTP a 400, over `$SYS` no answer at all."""


def text(query: dict[str, list[str]], name: str) -> str:
    """The first value of `name`, "" when absent (Go's `URL.Query().Get`)."""
    values = query.get(name)
    return values[0] if values else ""


def go_bool(query: dict[str, list[str]], name: str) -> bool:
    raw = text(query, name)
    if raw == "":
        return False
    if raw not in _BOOLS:
        raise BadParameter(
            f"Error decoding boolean for '{name}': "
            f"strconv.ParseBool: parsing {json.dumps(raw)}: invalid syntax"
        )
    return _BOOLS[raw]


def go_int(query: dict[str, list[str]], name: str) -> int:
    raw = text(query, name)
    if raw == "":
        return 0
    if not strconv.INTEGER.fullmatch(raw):
        reason = "invalid syntax"
    elif not -_INT64_MAX - 1 <= int(raw) <= _INT64_MAX:
        reason = "value out of range"
    else:
        return int(raw)
    raise BadParameter(
        f"Error decoding int for '{name}': strconv.Atoi: parsing {json.dumps(raw)}: {reason}"
    )


def decode_subs(query: dict[str, list[str]]) -> tuple[bool, bool]:
    """nats-server's `decodeSubs`: (subs, detail); `subs=detail` (any case) is the detail
    form, anything else a Go boolean."""
    if text(query, "subs").lower() == "detail":
        return False, True
    return go_bool(query, "subs"), False


def go_uint64(query: dict[str, list[str]], name: str) -> int:
    """Go's `strconv.ParseUint(s, 10, 64)`: digits only, no sign."""
    raw = text(query, name)
    if raw == "":
        return 0
    if not raw.isascii() or not raw.isdigit():
        reason = "invalid syntax"
    elif int(raw) >= 2**64:
        reason = "value out of range"
    else:
        return int(raw)
    raise BadParameter(
        f"Error decoding uint64 for '{name}': strconv.ParseUint: parsing {json.dumps(raw)}: "
        f"{reason}"
    )
