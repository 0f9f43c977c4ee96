"""An account JWT's claims as nats-server shows them: decoded into nats-io/jwt's Go types
and encoded again (`/accountz?acc=<key>` `decoded_jwt`, monitor.go's `accountInfo`).

What nats-server shows is not the JWT's JSON: jwt's `DecodeAccountClaims` keeps only the
fields its types have, a version 1 token is migrated to the version 2 shape, tiered
JetStream limits clear the untiered ones, and Go's encoder drops the zero values of
`omitempty` fields, keeps empty structs (`authorization: {}`, `default_permissions:
{pub: {}, sub: {}}`), lists signing keys sorted (scoped ones as objects, with the
template's `-1` defaults) and prints a zero sampling rate as `"headers"`; `Validate`,
which nats-server runs first, turns a trace's zero sampling into 100. `_ACCOUNT` below is
jwt v2.8.2's types (account_claims.go, exports.go, imports.go, types.go, signingkeys.go),
their JSON names in Go's field order. A value Go's decoder refuses makes the whole claim
None, as nats-server then shows no `decoded_jwt`.

`validation_issues` is what jwt's `Validate` reports of an account the server serves
(`validation_result_jwt`): nothing blocking, as such an account is refused at its login,
so its time checks (expired, not yet valid) and its imports' deprecated `to`. (The
warning of a self-signed account with limits cannot arise: only an operator's keys issue
a served account.)
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

__all__ = ["account_claims_json", "validation_issues"]

_INT64 = (-(2**63), 2**63 - 1)


class _NotGo(ValueError):
    """A value jwt's Go types do not decode."""


@dataclass(frozen=True, slots=True)
class _Struct:
    """A Go struct: (JSON name, type, omitempty) in field order, embedded ones inlined."""

    fields: tuple[tuple[str, Any, bool], ...]
    defaults: tuple[tuple[str, Any], ...] = ()  # set before decoding (NewUserScope)


@dataclass(frozen=True, slots=True)
class _Pointer:
    to: Any


@dataclass(frozen=True, slots=True)
class _List:
    of: Any


@dataclass(frozen=True, slots=True)
class _Map:
    of: Any


@dataclass(frozen=True, slots=True)
class _Int:
    low: int = _INT64[0]
    high: int = _INT64[1]


STR, INT, BOOL, STRS = "str", _Int(), "bool", _List("str")
UINT, UINT8 = _Int(0, 2**64 - 1), _Int(0, 255)
CIDRS, EXPORT_TYPE, SAMPLING, SIGNING_KEYS = "cidrs", "export_type", "sampling", "signing_keys"

_INFO = (("description", STR, True), ("info_url", STR, True))
_NATS_LIMITS = (("subs", INT, True), ("data", INT, True), ("payload", INT, True))
_ACCOUNT_LIMITS = (
    ("imports", INT, True),
    ("exports", INT, True),
    ("wildcards", BOOL, True),
    ("disallow_bearer", BOOL, True),
    ("conn", INT, True),
    ("leaf", INT, True),
)
_JETSTREAM_LIMITS = _Struct(
    (
        ("mem_storage", INT, True),
        ("disk_storage", INT, True),
        ("streams", INT, True),
        ("consumer", INT, True),
        ("max_ack_pending", INT, True),
        ("mem_max_stream_bytes", INT, True),
        ("disk_max_stream_bytes", INT, True),
        ("max_bytes_required", BOOL, True),
    )
)
_PERMISSION = _Struct((("allow", STRS, True), ("deny", STRS, True)))
_PERMISSIONS = (
    ("pub", _PERMISSION, True),
    ("sub", _PERMISSION, True),
    ("resp", _Pointer(_Struct((("max", INT, False), ("ttl", INT, False)))), True),
)
_USER_SCOPE = _Struct(
    (
        ("kind", STR, False),
        ("key", STR, False),
        ("role", STR, False),
        (
            "template",
            _Struct(
                (
                    *_PERMISSIONS,
                    ("src", CIDRS, True),
                    ("times", _List(_Struct((("start", STR, True), ("end", STR, True)))), True),
                    ("times_location", STR, True),
                    *_NATS_LIMITS,
                    ("bearer_token", BOOL, True),
                    ("proxy_required", BOOL, True),
                    ("allowed_connection_types", STRS, True),
                ),
                defaults=(("subs", -1), ("data", -1), ("payload", -1)),
            ),
            False,
        ),
        ("description", STR, False),
    )
)
_IMPORT = _Struct(
    (
        ("name", STR, True),
        ("subject", STR, True),
        ("account", STR, True),
        ("token", STR, True),
        ("to", STR, True),
        ("local_subject", STR, True),
        ("type", EXPORT_TYPE, True),
        ("share", BOOL, True),
        ("allow_trace", BOOL, True),
    )
)
_EXPORT = _Struct(
    (
        ("name", STR, True),
        ("subject", STR, True),
        ("type", EXPORT_TYPE, True),
        ("token_req", BOOL, True),
        ("revocations", _Map(INT), True),
        ("response_type", STR, True),
        ("response_threshold", INT, True),
        (
            "service_latency",
            _Pointer(_Struct((("sampling", SAMPLING, False), ("results", STR, False)))),
            True,
        ),
        ("account_token_position", UINT, True),
        ("advertise", BOOL, True),
        ("allow_trace", BOOL, True),
        *_INFO,
    )
)
_WEIGHTED = _Struct((("subject", STR, False), ("weight", UINT8, True), ("cluster", STR, True)))
_ACCOUNT = _Struct(
    (
        ("imports", _List(_Pointer(_IMPORT)), True),
        ("exports", _List(_Pointer(_EXPORT)), True),
        (
            "limits",
            _Struct(
                (
                    *_NATS_LIMITS,
                    *_ACCOUNT_LIMITS,
                    *_JETSTREAM_LIMITS.fields,
                    ("tiered_limits", _Map(_JETSTREAM_LIMITS), True),
                )
            ),
            True,
        ),
        ("signing_keys", SIGNING_KEYS, True),
        ("revocations", _Map(INT), True),
        ("default_permissions", _Struct(_PERMISSIONS), True),
        ("mappings", _Map(_List(_WEIGHTED)), True),
        (
            "authorization",
            _Struct(
                (
                    ("auth_users", STRS, True),
                    ("allowed_accounts", STRS, True),
                    ("xkey", STR, True),
                )
            ),
            True,
        ),
        ("trace", _Pointer(_Struct((("dest", STR, True), ("sampling", INT, True)))), True),
        ("cluster_traffic", STR, True),
        *_INFO,
        ("tags", STRS, True),
        ("type", STR, True),
        ("version", INT, True),
    )
)
_CLAIMS_DATA = (
    ("aud", STR, True),
    ("exp", INT, True),
    ("jti", STR, True),
    ("iat", INT, True),
    ("iss", STR, True),
    ("name", STR, True),
    ("nbf", INT, True),
    ("sub", STR, True),
)
# jwt's v1NatsAccount: what a version 1 token's `nats` holds.
_V1_FIELDS = ("imports", "exports", "signing_keys", "revocations")
_V1_LIMITS = tuple(name for name, _, _ in (*_NATS_LIMITS, *_ACCOUNT_LIMITS))


def account_claims_json(token: str) -> dict[str, Any] | None:
    """The claims of account JWT `token` (already verified) as nats-server encodes them
    in `decoded_jwt`; None where jwt's decoder would refuse them."""
    try:
        part = token.split(".")[1]
        body = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
        if not isinstance(body, dict):
            return None
        nats = body.get("nats")
        if nats is not None and not isinstance(nats, dict):
            return None
        nats = dict(nats or {})
        if body.get("type"):  # version 1: migrated as jwt's `migrateV1`
            limits = nats.get("limits")
            keys = nats.get("signing_keys")
            if keys is not None and not isinstance(keys, list):
                raise _NotGo("signing_keys")
            nats = {k: v for k, v in nats.items() if k in _V1_FIELDS}
            if isinstance(limits, dict):
                nats["limits"] = {k: v for k, v in limits.items() if k in _V1_LIMITS}
            elif limits is not None:
                raise _NotGo("limits")
            nats |= {"type": body["type"], "tags": body.get("tags"), "version": 1}
        claims = _go(body, _Struct((*_CLAIMS_DATA,)))
        account = _go(nats, _ACCOUNT)
    except (_NotGo, ValueError, IndexError, binascii.Error, RecursionError):
        return None
    limits = account["limits"]
    if limits.get("tiered_limits"):
        for name, _, _ in _JETSTREAM_LIMITS.fields:
            limits.pop(name, None)
    trace = account.get("trace")
    if trace is not None and not trace.get("sampling"):
        trace["sampling"] = 100  # jwt's Validate
    return {**claims, "nats": account}


def validation_issues(decoded: dict[str, Any], now: float) -> list[dict[str, Any]]:
    """nats-server's `ExtVrIssues` of `decoded` (`account_claims_json`'s) at `now` (unix
    seconds), in `Validate`'s order."""
    second = int(now)
    issues = []
    expires, not_before = decoded.get("exp", 0), decoded.get("nbf", 0)
    if expires > 0 and second > expires:
        issues.append(_issue("claim is expired", time_check=True))
    if not_before > 0 and not_before > second:
        issues.append(_issue("claim is not yet valid", time_check=True))
    for imported in decoded["nats"].get("imports") or ():
        if imported is not None and imported.get("to"):
            warning = "the field to has been deprecated (use LocalSubject instead)"
            issues.append(_issue(warning, time_check=False))
    return issues


def _issue(description: str, *, time_check: bool) -> dict[str, Any]:
    return {"description": description, "blocking": False, "time_check": time_check}


def _omitted(value: Any) -> bool:
    """Go's `omitempty`: false, 0, "", a nil pointer, an empty list or map."""
    return value is None or value is False or value == 0 or value in ("", [], {})


def _go(value: Any, kind: Any) -> Any:
    """`value` (JSON, None for null or absent) decoded into Go type `kind` and encoded
    again, before any omission."""
    if isinstance(kind, _Struct):
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise _NotGo(kind)
        preset = dict(kind.defaults)
        out: dict[str, Any] = {}
        for name, field, omitempty in kind.fields:
            given = value.get(name)
            shown = _go(given, field) if given is not None or name not in preset else None
            if shown is None and name in preset:
                shown = preset[name]
            # `omitempty` never leaves out a struct, however empty
            if not (omitempty and not isinstance(field, _Struct) and _omitted(shown)):
                out[name] = shown
        return out
    if isinstance(kind, _Pointer):
        return None if value is None else _go(value, kind.to)
    if isinstance(kind, _List):
        if value is None:
            return None
        if not isinstance(value, list):
            raise _NotGo(kind)
        return [_go(v, kind.of) for v in value]
    if isinstance(kind, _Map):
        if value is None:
            return None
        if not isinstance(value, dict):
            raise _NotGo(kind)
        return {k: _go(value[k], kind.of) for k in sorted(value)}  # Go sorts map keys
    if isinstance(kind, _Int):
        if value is None:
            return 0
        if type(value) is not int or not kind.low <= value <= kind.high:
            raise _NotGo(kind)
        return value
    return _SCALARS[kind](value)


def _string(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _NotGo("string")
    return value


def _bool(value: Any) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise _NotGo("bool")
    return value


def _cidrs(value: Any) -> list[str] | None:
    """jwt's CIDRList: a list as given, or a comma-separated string lower-cased, trimmed,
    without empty or repeated entries (`TagList.Add`)."""
    if not isinstance(value, str):
        return _go(value, STRS)  # type: ignore[no-any-return]
    out: list[str] = []
    for entry in value.lower().split(","):
        entry = entry.strip()
        if entry and entry not in out:
            out.append(entry)
    return out


def _export_type(value: Any) -> str:
    if value is None:
        return ""
    if value not in ("stream", "service"):
        raise _NotGo("export type")
    return str(value)


def _sampling(value: Any) -> Any:
    """jwt's SamplingRate: `"headers"` (any case) or 0 print as `"headers"`, 1-100 as
    the number; anything else Go cannot encode."""
    if value is None or (isinstance(value, str) and value.lower() == "headers"):
        return "headers"
    rate = _go(value, INT)
    if rate == 0:
        return "headers"
    if not 1 <= rate <= 100:
        raise _NotGo("sampling rate")
    return rate


def _signing_keys(value: Any) -> list[Any] | None:
    """jwt's SigningKeys: plain keys and `user_scope` objects, listed by key."""
    if value is None:
        return None
    if not isinstance(value, list):
        raise _NotGo("signing keys")
    keys: dict[str, Any] = {}
    for entry in value:
        if isinstance(entry, str):
            keys[entry] = entry
        elif isinstance(entry, dict):
            if entry.get("kind") != "user_scope":
                raise _NotGo("signing key scope")
            scope = _go(entry, _USER_SCOPE)
            keys[scope["key"]] = scope
    return [keys[k] for k in sorted(keys)]


_SCALARS: dict[str, Any] = {
    STR: _string,
    BOOL: _bool,
    CIDRS: _cidrs,
    EXPORT_TYPE: _export_type,
    SAMPLING: _sampling,
    SIGNING_KEYS: _signing_keys,
}
