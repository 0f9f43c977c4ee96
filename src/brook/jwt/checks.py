"""What nats-io/jwt's `Validate` reports as blocking in decoded claims (expiry, not before,
malformed subjects, CIDRs, time ranges, keys), so that a caller refuses a token exactly
when nats-server would."""

from __future__ import annotations

import ipaddress
import re
import time

from brook.jwt.claims import (
    AccountClaims,
    Claims,
    Export,
    Import,
    InvalidJwt,
    OperatorClaims,
    Permission,
    UserClaims,
    UserLimits,
)
from brook.jwt.decoding import decode_activation, is_public_key
from brook.nkey import Prefix


def issues(claims: Claims, now: float | None = None) -> list[str]:
    """What jwt's `Validate` finds blocking in `claims` at `now` (unix seconds; default
    the current time): expiry and not-before, then the checks of each kind. Empty: valid."""
    found: list[str] = []
    second = int(time.time() if now is None else now)
    if claims.expires > 0 and second > claims.expires:
        found.append("claim is expired")
    if claims.not_before > 0 and claims.not_before > second:
        found.append("claim is not yet valid")
    if isinstance(claims, UserClaims):
        _check_user_limits(claims.limits, found)
        if claims.issuer_account and not is_public_key(claims.issuer_account, Prefix.ACCOUNT):
            found.append("account_id is not an account public key")
    elif isinstance(claims, AccountClaims):
        _check_user_limits(claims.default_permissions, found)
        for key, scope in claims.signing_keys.items():
            if not is_public_key(key, Prefix.ACCOUNT):
                what = "a valid account signing key" if scope is None else "an account public key"
                found.append(f"{key} is not {what}")
        _check_exports(claims.exports, found)
        _check_imports(claims.imports, claims.subject, found)
        tiered = claims.limits.tiered_limits
        if "" in tiered:
            found.append('Tiered JetStream Limits can not contain a blank "" tier name')
    elif isinstance(claims, OperatorClaims):
        for key in claims.signing_keys:
            if not is_public_key(key, Prefix.OPERATOR):
                found.append(f"{key} is not an operator public key")
        system = claims.system_account
        if system and not is_public_key(system, Prefix.ACCOUNT):
            found.append(f"{system} is not an account public key")
    return found


def _check_subject(subject: str, found: list[str]) -> None:
    """jwt's Subject.Validate."""
    if not subject:
        found.append("subject cannot be empty")
        return
    if " " in subject:
        found.append(f"subject {subject!r} cannot have spaces")
    if subject[0] == "." or subject[-1] == ".":
        found.append(f"subject {subject!r} cannot start or end with a `.`")
    if ".." in subject:
        found.append(f"subject {subject!r} cannot contain consecutive `.`")


def _check_permission(permission: Permission, found: list[str], *, queues: bool) -> None:
    for entry in (*permission.allow, *permission.deny):
        parts = entry.split(" ")
        if len(parts) > 2:
            found.append(f'Permission Subject "{entry}" contains too many spaces')
            continue
        for part in parts:
            _check_subject(part, found)
        if len(parts) == 2 and not queues:
            found.append(f'Permission Subject "{entry}" is not allowed to contain queue')


def contained(subject: str, other: str) -> bool:
    """jwt's Subject.IsContainedIn: every subject `subject` matches, `other` matches."""
    mine, theirs = subject.split("."), other.split(".")
    if len(mine) < len(theirs) or (len(mine) > len(theirs) and theirs[-1] != ">"):
        return False
    for i, token in enumerate(theirs):
        if i == len(theirs) - 1 and token == ">":
            return True
        if token != mine[i] and token != "*":
            return False
    return True


_KINDS = ("stream", "service")
_RESPONSE_TYPES = ("", "Singleton", "Stream", "Chunked")


def _check_exports(exports: tuple[Export, ...], found: list[str]) -> None:
    """jwt's Exports.Validate (its blocking issues)."""
    for e in exports:
        service = e.kind == "service"
        if e.kind not in _KINDS:
            found.append(f"invalid export type: {e.kind!r}")
        if service and e.response_type not in _RESPONSE_TYPES:
            found.append(f"invalid response type for service: {e.response_type!r}")
        if e.kind == "stream":
            if e.response_type:
                found.append(f"invalid response type for stream: {e.response_type!r}")
            if e.allow_trace:
                found.append("AllowTrace only valid for service export")
        if e.latency and not service:
            found.append("latency tracking only permitted for services")
        if e.response_threshold_ns < 0:
            found.append("negative response threshold is invalid")
        if e.response_threshold_ns > 0 and not service:
            found.append("response threshold only valid for services")
        _check_subject(e.subject, found)
        if (position := e.account_token_position) > 0:
            tokens = e.subject.split(".")
            if "*" not in tokens and ">" not in tokens:
                found.append(
                    f"Account Token Position can only be used with wildcard subjects: {e.subject}"
                )
            elif position > len(tokens):
                found.append(
                    f"Account Token Position {position} exceeds length of subject '{e.subject}'"
                )
            elif (token := tokens[position - 1]) != "*":
                found.append(
                    f"Account Token Position {position} matches '{token}' but must match a * "
                    f"in: {e.subject}"
                )
    for kind in _KINDS:
        subjects = [e.subject for e in exports if (e.kind == "service") == (kind == "service")]
        for i, narrow in enumerate(subjects):
            for j, wide in enumerate(subjects):
                if i != j and contained(narrow, wide):
                    found.append(f"{kind} export subject {wide!r} already exports {narrow!r}")


def _check_imports(imports: tuple[Import, ...], account: str, found: list[str]) -> None:
    """jwt's Imports.Validate (its blocking issues) for the account `account`."""
    local: dict[str, list[str]] = {}
    for i in imports:
        service = i.kind == "service"
        if service:
            subject = i.to or i.local_subject or i.subject
            for other in local.get(i.account, ()):
                if contained(subject, other) or contained(other, subject):
                    found.append(
                        f"overlapping subject namespace for {subject!r} and {other!r} in "
                        f"same account {i.account!r}"
                    )
            local.setdefault(i.account, []).append(subject)
        if i.kind not in _KINDS:
            found.append(f"invalid import type: {i.kind!r}")
        if service and i.allow_trace:
            found.append("AllowTrace only valid for stream import")
        if not i.account:
            found.append("account to import from is not specified")
        _check_subject(i.subject, found)
        if i.local_subject and i.to:
            found.append("Local Subject replaces To")
        if i.share and not service:
            found.append(
                "sharing information (for latency tracking) is only valid for services: "
                f"{i.subject!r}"
            )
        if i.token:
            _check_activation(i, account, found)


def _check_activation(i: Import, account: str, found: list[str]) -> None:
    """jwt's Import.Validate of an import's activation token (time checks aside)."""
    try:
        act = decode_activation(i.token)
    except InvalidJwt:
        found.append(f"import {i.subject!r} contains an invalid activation token")
        return
    if i.account not in (act.issuer, act.issuer_account):
        found.append(f"activation token doesn't match account for import {i.subject!r}")
    if act.subject != account:
        found.append(
            f"activation token doesn't match account it is being included in, {i.subject!r}"
        )
    if act.import_kind != i.kind:
        found.append(
            f"mismatch between token import type {act.import_kind} and type of import {i.kind}"
        )
    if act.import_kind not in _KINDS:
        found.append(f"invalid import type: {act.import_kind!r}")
    _check_subject(act.import_subject, found)
    if act.issuer_account and not is_public_key(act.issuer_account, Prefix.ACCOUNT):
        found.append("account_id is not an account public key")
    subject = i.to if i.kind == "service" and i.to else i.subject
    if not contained(subject, act.import_subject):
        found.append(
            f"activation token import subject {act.import_subject!r} doesn't match import "
            f"{i.subject!r}"
        )


_CLOCK = re.compile(r"([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]", re.ASCII)


def _check_user_limits(limits: UserLimits, found: list[str]) -> None:
    _check_permission(limits.sub, found, queues=True)
    _check_permission(limits.pub, found, queues=False)
    for cidr in limits.src:
        try:
            ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            found.append(f"invalid cidr {cidr!r} in user src limits")
        else:
            if "/" not in cidr:  # Go's ParseCIDR wants the prefix length
                found.append(f"invalid cidr {cidr!r} in user src limits")
    for window in limits.times:
        for name, value in (("start", window.start), ("end", window.end)):
            if not value:
                found.append(
                    f"time ranges {name} must contain a{'n' if name == 'end' else ''} {name}"
                )
            elif not _CLOCK.fullmatch(value):
                found.append(f"{name} in time range is invalid {value!r}")
    if limits.locale and not _zone(limits.locale):
        found.append(f"could not parse iana time zone by name: {limits.locale}")


def _zone(name: str) -> bool:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True
