"""The meaning half of the nats-server config format: parsed config in, `Settings` out.

Brook reads the same files as nats-server so one config can drive either server. The text
is parsed by `brook.config.conf_syntax` (re-exported here: `parse_conf`, `parse_size`);
this module maps the resulting dict onto `Settings`, accepting the key names and aliases
nats-server accepts (`net` for `host`, `max_conn`, the jetstream block's
`store`/`max_mem`/... spellings, `authorization` with a token, one user or a `users` list
of passwords and nkeys, `no_auth_user`)
and the value shapes it accepts (`listen: "host:port"`, sizes like `1MB`, durations read
by `brook.durations.parse_seconds`).

Deliberate differences from nats-server, each to avoid a silent surprise:
* a duration written as a suffixed number (`ping_interval: 2m`) is two minutes, not the two
  million seconds nats-server would read;
* `settings_from_conf` rejects keys it does not know instead of ignoring them, so a typo
  never leaves a default silently in place. Keys defined only to be referenced as
  `$variables` are exempt, as in nats-server.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import os
import re
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

from brook import jwt, limits
from brook.config.conf_syntax import SuffixedInt, parse_conf, parse_size
from brook.config.settings import (
    GLOBAL_ACCOUNT,
    AccountSettings,
    AuthSettings,
    ConfigError,
    DirectoryResolver,
    ExportSettings,
    ImportSettings,
    JetStreamAccountLimits,
    MapDestination,
    NkeyUser,
    Permissions,
    ResponsePermission,
    Settings,
    SubjectMapping,
    SubjectPermission,
    TLSSettings,
    User,
    WebSocketSettings,
)
from brook.durations import parse_ns, parse_seconds
from brook.strconv import INTEGER
from brook.subjects import is_valid_subject

__all__ = ["load_conf_file", "parse_conf", "parse_size", "settings_from_conf"]

_Handler = Callable[[Settings, str, object], None]


_KINDS = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"))


def _describe(v: object) -> str:
    if isinstance(v, list | dict):
        return "an array" if isinstance(v, list) else "a block"
    kind = next((name for t, name in _KINDS if isinstance(v, t)), type(v).__name__)
    return f"{kind} {v!r}"


def _bad(where: str, expected: str, v: object) -> ConfigError:
    return ConfigError(f"{where}: expected {expected}, got {_describe(v)}")


def _int(where: str, v: object) -> int:
    if isinstance(v, int) and not isinstance(v, bool):
        return int(v)
    raise _bad(where, "an integer", v)


def _str(where: str, v: object) -> str:
    if isinstance(v, str):
        return v
    raise _bad(where, "a string", v)


def _bool(where: str, v: object) -> bool:
    if isinstance(v, bool):
        return v
    raise _bad(where, "a boolean (true or false)", v)


def _size(where: str, v: object) -> int:
    if isinstance(v, str):
        with contextlib.suppress(ValueError):
            return parse_size(v)
    elif isinstance(v, int) and not isinstance(v, bool):
        return int(v)
    raise _bad(where, "a size (bytes, or like 64KB, 1MB, 1G)", v)


def _duration(where: str, v: object) -> float:
    text = v.text if isinstance(v, SuffixedInt) else v
    if isinstance(text, str):
        with contextlib.suppress(ValueError):
            return parse_seconds(text)
    elif isinstance(text, int | float) and not isinstance(text, bool):
        return float(text)
    raise _bad(where, "a duration (seconds, or like 2s, 500ms, 1m)", v)


def _block(where: str, v: object) -> Mapping[str, object]:
    if isinstance(v, dict):
        return v
    raise _bad(where, "a block { ... }", v)


def _entries(
    block: Mapping[str, object], path: str, known: Collection[str]
) -> Iterator[tuple[str, str, object]]:
    """Yield (key, dotted path, value) for known keys; reject any other by its full path
    and, for parsed text, the file and line it is on."""
    used: Collection[str] = getattr(block, "used_vars", ())
    for raw_key, value in block.items():
        key = str(raw_key).lower()
        where = f"{path}.{key}" if path else key
        if key in known:
            yield key, where, value
        elif key not in used:
            raise ConfigError(f"unknown configuration key {where!r}{_on_line(block, key)}")


def _on_line(block: Mapping[str, object], key: str) -> str:
    """' (line N)' where the parsed text put `key`; '' for blocks not read from text."""
    line = getattr(block, "lines", {}).get(key)
    return f" (line {line})" if line else ""


def _host_port(where: str, v: object) -> tuple[str | None, int]:
    if isinstance(v, int) and not isinstance(v, bool):
        return None, int(v)
    if isinstance(v, str):
        host, _, port = v.rpartition(":")
        if re.fullmatch(r"-?[0-9]+", port, re.ASCII):  # -1: any free port, as nats-server
            host = host.removeprefix("[").removesuffix("]")  # [::1]:4222
            return host or None, int(port)
    raise _bad(where, "'host:port', ':port' or a port number", v)


def _address(host_attr: str, port_attr: str) -> _Handler:
    def apply(s: Settings, where: str, v: object) -> None:
        host, port = _host_port(where, v)
        setattr(s, port_attr, port)
        if host is not None:
            setattr(s, host_attr, host)

    return apply


def _user(where: str, v: object) -> User | NkeyUser:
    """A `users` entry: `{user, password}` or `{nkey}` (nats-server's parseUsers), each
    with its own `permissions` if it has any."""
    name = password = nkey = None
    permissions = None
    for key, at, value in _entries(
        _block(where, v), where, ("user", "username", "password", "pass", "nkey", *_PERMISSIONS)
    ):
        if key in ("user", "username"):
            name = _str(at, value)
        elif key == "nkey":
            nkey = _str(at, value)
        elif key in _PERMISSIONS:
            permissions = _permissions(at, value)
        else:
            password = _str(at, value)
    if nkey is not None:
        if name is not None or password is not None:
            raise ConfigError(f"{where}: Nkey users do not take usernames or passwords")
        return NkeyUser(nkey, permissions)
    if name is None:
        raise ConfigError(f"{where}: a user entry needs a user")
    return User(name, password or "", permissions)  # no password: a certificate's (verify_and_map)


# nats-server's spellings in a user entry, and of the authorization block's defaults for
# the users that have none (`permissions` there means the defaults too, as in nats-server)
_PERMISSIONS = ("permission", "permissions", "authorization")
_DEFAULT_PERMISSIONS = ("default_permission", "default_permissions", "permissions")
_PUBLISH = ("pub", "publish", "import")
_SUBSCRIBE = ("sub", "subscribe", "export")
_RESPONSES = ("publish_allow_responses", "allow_responses")


def _permissions(where: str, v: object) -> Permissions:
    """A `permissions` block as nats-server's `parseUserPermissions` reads it."""
    perms = Permissions()
    for key, at, value in _entries(_block(where, v), where, (*_PUBLISH, *_SUBSCRIBE, *_RESPONSES)):
        if key in _PUBLISH:
            perms.publish = _subject_permission(at, value, queues=False)
        elif key in _SUBSCRIBE:
            perms.subscribe = _subject_permission(at, value, queues=True)
        else:
            perms.responses = _responses(at, value)
    if perms.responses is not None:
        # As nats-server: allowing responses turns off the blanket publish allow.
        perms.publish = perms.publish or SubjectPermission()
        if perms.publish.allow is None:
            perms.publish.allow = []
    return perms


def _subject_permission(where: str, v: object, *, queues: bool) -> SubjectPermission | None:
    """A subject, a list of subjects (allowed), or a block of `allow` and `deny` lists;
    an empty block or list restricts nothing, as in nats-server."""
    if not isinstance(v, dict):
        allow = _perm_subjects(where, v, queues=queues)
        return SubjectPermission(allow=allow or None)
    if not v:
        return None
    perm = SubjectPermission()
    for key, at, value in _entries(v, where, ("allow", "deny")):
        subjects = _perm_subjects(at, value, queues=queues)
        if key == "allow":
            perm.allow = subjects or None
        else:
            perm.deny = subjects
    return perm


def _perm_subjects(where: str, v: object, *, queues: bool) -> list[str]:
    items = v if isinstance(v, list) else [v]
    subjects = [
        _str(f"{where}[{i}]" if isinstance(v, list) else where, s) for i, s in enumerate(items)
    ]
    for subject in subjects:
        if is_valid_subject(subject.encode()):
            continue
        parts = subject.split()
        if not queues or len(parts) != 2:
            raise ConfigError(f"{where}: subject {subject!r} is not a valid subject")
        if not is_valid_subject(parts[0].encode()):
            raise ConfigError(f"{where}: subject {parts[0]!r} is not a valid subject")
        if not is_valid_subject(parts[1].encode()):
            raise ConfigError(f"{where}: queue {parts[1]!r} is not a valid queue")
    return subjects


def _responses(where: str, v: object) -> ResponsePermission | None:
    """`allow_responses`: true/false, or a block of `max` and `expires` (0 keeps the
    default, a negative value means no bound, as in nats-server)."""
    if isinstance(v, bool):
        return ResponsePermission() if v else None
    responses = ResponsePermission()
    known = ("max", "max_msgs", "max_messages", "max_responses", "expires", "expiration", "ttl")
    for key, at, value in _entries(_block(where, v), where, known):
        if key.startswith("max"):
            responses.max_msgs = _int(at, value) or responses.max_msgs
        else:
            if not isinstance(value, str):  # nats-server reads only a duration string
                raise _bad(at, "a duration string (like '1m' or '500ms')", value)
            negative = value.startswith("-")
            seconds = _duration(at, value.removeprefix("-")) * (-1 if negative else 1)
            responses.expires_s = seconds or responses.expires_s
    return responses


def _authorization(s: Settings, where: str, v: object) -> None:
    """The block describes the whole client auth setup, so it replaces any earlier one
    (`no_auth_user`, a key of its own outside the block, is kept)."""
    known = ("token", "user", "username", "password", "pass", "users", "timeout")
    token = name = password = None
    entries: list[User | NkeyUser] = []
    defaults: Permissions | None = None
    for key, at, value in _entries(_block(where, v), where, (*known, *_DEFAULT_PERMISSIONS)):
        if key in _DEFAULT_PERMISSIONS:
            defaults = _permissions(at, value)
        elif key == "token":
            token = _str(at, value)
        elif key in ("user", "username"):
            name = _str(at, value)
        elif key in ("password", "pass"):
            password = _str(at, value)
        elif key == "users":
            if not isinstance(value, list):
                raise _bad(at, "an array of {user, password} or {nkey} blocks", value)
            entries = [_user(f"{at}[{i}]", entry) for i, entry in enumerate(value)]
        else:
            s.auth_timeout_s = _duration(at, value)
    users = [e for e in entries if isinstance(e, User)]
    nkeys = [e for e in entries if isinstance(e, NkeyUser)]
    if (name is None) != (password is None):
        raise ConfigError(f"{where}: user and password must be given together")
    if name is not None and password is not None:
        if entries:
            raise ConfigError(f"{where}: user/password and users cannot both be set")
        users = [User(name, password)]
    else:  # nats-server's defaults go to the users list only, not to a single user
        for entry in entries:
            entry.permissions = entry.permissions or defaults
    # The users of configured accounts (an `accounts` block read earlier) are kept.
    s.auth = AuthSettings(
        token=token,
        users=[*users, *(u for u in s.auth.users if u.account != GLOBAL_ACCOUNT)],
        nkeys=[*nkeys, *(n for n in s.auth.nkeys if n.account != GLOBAL_ACCOUNT)],
        no_auth_user=s.auth.no_auth_user,
        single_user=name is not None,
    )


# The keys of an account's block Brook honours; nats-server's others (exports, imports,
# limits, nkey, msg_trace...) are refused by name until they are built.
_ACCOUNT_KEYS = (
    *("users", "jetstream", "default_permissions", "mappings", "maps", "exports", "imports"),
)


def _accounts(s: Settings, where: str, v: object) -> None:
    """nats-server's `accounts` (opts.go `parseAccounts`): a list of names, or a block of
    accounts, each with its `users` (who log in to it) and `jetstream`."""
    if isinstance(v, list):
        names = [_str(f"{where}[{i}]", name) for i, name in enumerate(v)]
        blocks: dict[str, object] = {name: None for name in names}
        if len(blocks) != len(names):
            twice = next(n for n in names if names.count(n) > 1)
            raise ConfigError(f"{where}: Duplicate Account Entry: {twice}")
    else:
        spelled: Mapping[str, str] = getattr(v, "spelled", {})  # names are case-sensitive
        blocks = {spelled.get(key, key): block for key, block in _block(where, v).items()}
    used: Collection[str] = getattr(v, "used_vars", ())
    for name, block in blocks.items():
        if name.lower() in used:
            continue
        at = f"{where}.{name}"
        line = _on_line(v, name.lower()) if isinstance(v, dict) else ""
        if name == GLOBAL_ACCOUNT:
            raise ConfigError(f'{at}: "{name}" is a Reserved Account{line}')
        if any(a.name == name for a in s.accounts):
            raise ConfigError(f"{where}: Duplicate Account Entry: {name}{line}")
        account = AccountSettings(name)
        s.accounts.append(account)
        if block is None:
            continue
        if not isinstance(block, dict):
            raise ConfigError(f"{at}: Expected map entries for accounts{line}")
        entries: list[User | NkeyUser] = []
        defaults: Permissions | None = None
        for key, key_at, value in _entries(block, at, _ACCOUNT_KEYS):
            if key == "users":
                if not isinstance(value, list):
                    raise _bad(key_at, "an array of {user, password} or {nkey} blocks", value)
                entries = [_user(f"{key_at}[{i}]", entry) for i, entry in enumerate(value)]
            elif key == "jetstream":
                account.jetstream, account.jetstream_limits = _account_jetstream(key_at, value)
            elif key in ("mappings", "maps"):
                if account.mappings:
                    raise _mappings_twice(key_at)
                account.mappings = _mapping_entries(key_at, value)
            elif key == "exports":
                account.exports = [
                    _export(f"{key_at}[{i}]", e)
                    for i, e in enumerate(_array(key_at, "Exports", value))
                ]
            elif key == "imports":
                account.imports = _imports(key_at, _array(key_at, "Imports", value))
            else:
                defaults = _permissions(key_at, value)
        for entry in entries:
            entry.account = name
            entry.permissions = entry.permissions or defaults
            if isinstance(entry, User):
                s.auth.users.append(entry)
            else:
                s.auth.nkeys.append(entry)


# An account's `jetstream { ... }` keys, nats-server's spellings (opts.go
# `parseJetStreamForAccount`), by the `JetStreamAccountLimits` field each sets.
_ACCOUNT_JS_KEYS = {
    "max_memory": ("max_memory", "max_mem", "mem", "memory"),
    "max_storage": ("max_store", "max_file", "max_disk", "store", "disk"),
    "max_streams": ("max_streams", "streams"),
    "max_consumers": ("max_consumers", "consumers"),
    "max_bytes_required": ("max_bytes_required", "max_stream_bytes", "max_bytes"),
    "memory_max_stream_bytes": ("mem_max_stream_bytes", "memory_max_stream_bytes"),
    "storage_max_stream_bytes": ("disk_max_stream_bytes", "store_max_stream_bytes"),
    "max_ack_pending": ("max_ack_pending",),
}
_ACCOUNT_JS_FIELDS = {key: name for name, keys in _ACCOUNT_JS_KEYS.items() for key in keys}


def _go_type(v: object) -> str:
    """Go's name for the type of a parsed value (nats-server's `%T`)."""
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int64"
    if isinstance(v, float):
        return "float64"
    if isinstance(v, str):
        return "string"
    return "[]interface {}" if isinstance(v, list) else "map[string]interface {}"


def _array(where: str, kind: str, v: object) -> list[object]:
    if not isinstance(v, list):
        raise ConfigError(f"{where}: {kind} should be an array, got {_go_type(v)}")
    return v


# nats-server's keys of exports and imports Brook does not serve: refused by name.
_EXPORT_UNSUPPORTED = ("latency", "account_token_position", "allow_trace")
_IMPORT_UNSUPPORTED = ("share", "allow_trace")
_RESPONSE_TYPES = {"single": "singleton", "singleton": "singleton", "stream": "stream"}
_RESPONSE_TYPES |= {"chunk": "chunked", "chunked": "chunked"}
_THRESHOLD = ("threshold", "response_threshold", "response_max_time", "response_time")


def _unsupported(block: Mapping[str, object], where: str, keys: Collection[str]) -> None:
    for key in block:
        if str(key).lower() in keys:
            key = str(key).lower()
            raise ConfigError(f"{where}.{key}{_on_line(block, key)}: not supported by Brook")


def _export(where: str, v: object) -> ExportSettings:
    """An `exports` entry, as nats-server's `parseExportStreamOrService` reads it."""
    if not isinstance(v, dict):
        raise ConfigError(
            f"{where}: Export Items should be a map with type entry, got {_go_type(v)}"
        )
    _unsupported(v, where, _EXPORT_UNSUPPORTED)
    export: ExportSettings | None = None
    response: str | None = None
    threshold: float | None = None
    accounts: list[str] | None = None
    known = ("stream", "service", "response", "response_type", "accounts", *_THRESHOLD)
    for key, at, value in _entries(v, where, known):
        at += _on_line(v, key)
        if key in ("stream", "service"):
            if export is not None:
                seen = "service" if export.service else "stream"
                raise ConfigError(f'{at}: Detected {key} "{value}" but already saw a {seen}')
            if not isinstance(value, str):
                raise ConfigError(f"{at}: Expected {key} name to be string, got {_go_type(value)}")
            export = ExportSettings(value, service=key == "service", where=where)
        elif key in ("response", "response_type"):
            if not isinstance(value, str):
                raise ConfigError(
                    f"{at}: Expected response type to be string, got {_go_type(value)}"
                )
            response = _RESPONSE_TYPES.get(value.lower())
            if response is None:
                raise ConfigError(f'{at}: Unknown response type: "{value}"')
        elif key in _THRESHOLD:
            if not isinstance(value, str):
                raise ConfigError(
                    f"{at}: Expected response threshold to be a parseable time duration, "
                    f"got {_go_type(value)}"
                )
            try:
                threshold = parse_seconds(value)
            except ValueError:
                raise ConfigError(
                    f"{at}: Expected response threshold to be a parseable time duration, "
                    f'got "{value}"'
                ) from None
        else:
            accounts = [_str(f"{at}[{i}]", a) for i, a in enumerate(_array(at, "accounts", value))]
    if export is None:
        raise ConfigError(f"{where}: an export needs a stream or a service subject")
    if (response is not None or threshold is not None) and not export.service:
        raise ConfigError(f"{where}: Detected response directive on non-service")
    export.accounts = accounts
    export.response_type = response or export.response_type
    export.threshold_s = export.threshold_s if threshold is None else threshold
    return export


def _imports(where: str, entries: list[object]) -> list[ImportSettings]:
    """An account's `imports`, each as nats-server's `parseImportStreamOrService` reads
    it; a service imported twice under one subject from one account is refused."""
    imports = [_import(f"{where}[{i}]", entry) for i, entry in enumerate(entries)]
    for i, entry in enumerate(imports):
        for earlier in imports[:i]:
            if (
                entry.service
                and earlier.service
                and (entry.to, entry.account) == (earlier.to, earlier.account)
            ):
                raise ConfigError(
                    f'{entry.where}: Duplicate service import subject "{entry.to}", previously '
                    f'used in import for account "{earlier.account}", subject "{earlier.subject}"'
                )
    return imports


def _import(where: str, v: object) -> ImportSettings:
    if not isinstance(v, dict):
        raise ConfigError(
            f"{where}: Import Items should be a map with type entry, got {_go_type(v)}"
        )
    _unsupported(v, where, _IMPORT_UNSUPPORTED)
    found: ImportSettings | None = None
    to = prefix = ""
    for key, at, value in _entries(v, where, ("stream", "service", "prefix", "to")):
        at += _on_line(v, key)
        if key in ("stream", "service"):
            if found is not None:
                seen = "service" if found.service else "stream"
                raise ConfigError(f"{at}: Detected {key} but already saw a {seen}")
            if not isinstance(value, dict):
                kind = key.capitalize()
                raise ConfigError(
                    f"{at}: {kind} entry should be an account map, got {_go_type(value)}"
                )
            account = subject = ""
            for name, name_at, text in _entries(value, at, ("account", "subject")):
                if name == "account":
                    account = _str(name_at, text)
                else:
                    subject = _str(name_at, text)
            if not account or not subject:
                raise ConfigError(f"{at}: Expect an account name and a subject")
            found = ImportSettings(account, subject, service=key == "service", where=where)
        elif key == "prefix":
            prefix = _str(at, value)
        else:
            to = _str(at, value)
    if found is None:
        raise ConfigError(f"{where}: an import needs a stream or a service")
    if not found.service and prefix and to:
        raise ConfigError(f"{where}: Stream import can not have a 'prefix' and a 'to' property")
    found.to = to or (found.subject if found.service else "")
    found.prefix = "" if found.service else prefix
    return found


def _account_jetstream(where: str, v: object) -> tuple[bool, JetStreamAccountLimits | None]:
    """An account's `jetstream`: `enabled`/`disabled`, a boolean, or a block of limits
    (which enables it; what it leaves out is unlimited), with nats-server's errors."""
    if isinstance(v, bool):
        return v, None
    if isinstance(v, str):
        if v.lower() in ("enabled", "enable", "disabled", "disable"):
            return v.lower().startswith("enable"), None
        raise ConfigError(f"{where}: Expected 'enabled' or 'disabled' for string value, got '{v}'")
    limits = JetStreamAccountLimits()
    for key, at, value in _entries(_block(where, v), where, _ACCOUNT_JS_FIELDS):
        field_name = _ACCOUNT_JS_FIELDS[key]
        if field_name == "max_bytes_required":
            if not isinstance(value, bool):
                raise ConfigError(f'{at}: Expected a parseable bool for "{key}", got {value}')
        elif not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(f'{at}: Expected a parseable size for "{key}", got {value}')
        change: dict[str, Any] = {field_name: value if isinstance(value, bool) else int(value)}
        limits = dataclasses.replace(limits, **change)
    return True, limits


def _operator(s: Settings, where: str, v: object) -> None:
    """`operator`: the trusted operators' JWTs (ADR 0028), each a file (decorated as nsc
    writes it, or the bare JWT) or the JWT itself inline, one or a list (opts.go)."""
    items = v if isinstance(v, list) else [v]
    jwts = []
    for i, item in enumerate(items):
        at = f"{where}[{i}]" if isinstance(v, list) else where
        if not isinstance(item, str):
            raise ConfigError(f"{at}: error parsing operators: unsupported type {_describe(item)}")
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


def _resolver(s: Settings, where: str, v: object) -> None:
    """`resolver`: MEMORY (`MEM`), or a block `{ type: full|cache, dir: ... }` for the
    directory resolvers (ADR 0031), read as opts.go reads them; the URL resolver (an
    account server over HTTP) is refused by name."""
    if isinstance(v, dict):
        s.operator.directory = _directory_resolver(where, _block(where, v))
        s.operator.resolver = s.operator.directory.kind if s.operator.directory else "MEMORY"
        return
    if not isinstance(v, str):
        raise ConfigError(f"{where}: error parsing operator resolver, wrong type {_describe(v)}")
    if re.search(r"(?i)(MEM|MEMORY)\s*", v):
        s.operator.resolver = "MEMORY"
    elif re.match(r"(?i)URL", v):
        raise ConfigError(f"{where}: the {v} account resolver is not supported by Brook")
    else:
        raise ConfigError(f"{where}: {_RESOLVER_ERROR}")


_DIR_RESOLVER_KEYS = (
    *("type", "dir", "allow_delete", "hard_delete", "limit", "ttl", "interval", "timeout"),
)


def _directory_resolver(where: str, block: Mapping[str, object]) -> DirectoryResolver | None:
    """opts.go's resolver map, its errors in its words; None for `type: MEM`."""
    found: dict[str, tuple[str, object]] = {
        key: (at, value) for key, at, value in _entries(block, where, _DIR_RESOLVER_KEYS)
    }

    def text(key: str) -> str:
        return _str(found[key][0], found[key][1]) if key in found else ""

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
    delete = _bool(*found["allow_delete"]) if "allow_delete" in found else False
    hard = _bool(*found["hard_delete"]) if "hard_delete" in found else False
    limit = _int(*found["limit"]) if "limit" in found else 0
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


def _resolver_pinned_accounts(s: Settings, where: str, v: object) -> None:
    """`resolver_pinned_accounts`: one account public key or a list of them (opts.go)."""
    items = v if isinstance(v, list) else [v]
    if not isinstance(v, list | str):
        raise ConfigError(
            f"{where}: error parsing resolver_pinned_accounts: unsupported type {_describe(v)}"
        )
    keys: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise ConfigError(
                f"{where}: error parsing resolver_pinned_accounts: unsupported type in array "
                f"{_describe(item)}"
            )
        keys.append(item)
    s.operator.pinned_accounts = frozenset(keys)


def _resolver_preload(s: Settings, where: str, v: object) -> None:
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
        if claims.limits.jetstream_bounded:
            raise ConfigError(
                f"{at}: JetStream limits of account JWTs are not enforced by Brook yet"
            )
        preload[key] = value
    s.operator.preload = preload


def _no_auth_user(s: Settings, where: str, v: object) -> None:
    s.auth.no_auth_user = _str(where, v)


_WS_ORIGINS = ("allowed_origins", "allowed_origin", "allow_origins", "allow_origin", "origins")
_WS_KEYS = (
    *("port", "host", "net", "listen", "no_tls", "same_origin", "compression", "compress"),
    *("authorization", "authentication", "headers", "origin", "tls", "no_auth_user"),
    *("advertise", "handshake_timeout", "ping_interval"),
    *("jwt_cookie", "user_cookie", "pass_cookie", "token_cookie"),
    *_WS_ORIGINS,
)


def _websocket(s: Settings, where: str, v: object) -> None:
    """nats-server's `websocket {}` block (opts.go `parseWebsocket`)."""
    block = _block(where, v)
    ws = WebSocketSettings()
    for key, at, value in _entries(block, where, _WS_KEYS):
        if key == "port":
            ws.port = _int(at, value)
        elif key in ("host", "net"):
            ws.host = _str(at, value)
        elif key == "listen":
            host, ws.port = _host_port(at, value)
            ws.host = host if host is not None else ws.host
        elif key == "no_tls":
            ws.no_tls = _bool(at, value)
        elif key == "tls":  # nats-server reads it as the client port's (`parseTLS`)
            ws.tls = _tls_settings(at, value)
        elif key == "no_auth_user":
            ws.no_auth_user = _str(at, value)
        elif key == "same_origin":
            ws.same_origin = _bool(at, value)
        elif key in ("compression", "compress"):
            ws.compression = _bool(at, value)
        elif key == "advertise":
            ws.advertise = _str(at, value)
        elif key in ("handshake_timeout", "ping_interval"):
            setattr(ws, f"{key}_s", _duration(at, value))
        elif key in ("jwt_cookie", "user_cookie", "pass_cookie", "token_cookie"):
            setattr(ws, key, _str(at, value))
        elif key in ("authorization", "authentication"):
            _websocket_auth(ws, at, value)
        elif key == "headers":
            ws.headers = {
                str(name): _str(f"{at}.{name}", header)
                for name, header in _block(at, value).items()
            }
        elif isinstance(value, str):  # an origin, or a list of them
            ws.allowed_origins = [value]
        elif isinstance(value, list) and all(isinstance(o, str) for o in value):
            ws.allowed_origins = [str(o) for o in value]
        else:
            raise _bad(at, "a string or an array of strings", value)
    s.websocket = ws


def _websocket_auth(ws: WebSocketSettings, where: str, v: object) -> None:
    """The listener's own credentials (nats-server's `parseSimpleAuth`): one user and
    password, or a token, and the time a client has to send them."""
    known = ("user", "username", "password", "pass", "token", "timeout")
    token = name = password = None
    for key, at, value in _entries(_block(where, v), where, known):
        if key == "token":
            token = _str(at, value)
        elif key in ("user", "username"):
            name = _str(at, value)
        elif key in ("password", "pass"):
            password = _str(at, value)
        else:
            ws.auth_timeout_s = _duration(at, value)
    if (name is None) != (password is None):
        raise ConfigError(f"{where}: user and password must be given together")
    if name is not None and token is not None:
        raise ConfigError(f"{where}: token and user cannot both be set")
    if name is not None or token is not None:
        users = [User(name, password)] if name is not None and password is not None else []
        ws.auth = AuthSettings(token=token, users=users)


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


def _tls(s: Settings, where: str, v: object) -> None:
    s.tls = _tls_settings(where, v)


def _tls_settings(where: str, v: object) -> TLSSettings:
    """A `tls {}` block (the client port's or the WebSocket listener's), read as
    nats-server's `parseTLS` reads it, with its error texts; keys nats-server knows but
    Brook does not serve are refused."""
    block = _block(where, v)
    tls = TLSSettings()

    def fail(key: str, message: str) -> ConfigError:
        return ConfigError(f"{where}.{key}{_on_line(block, key)}: {message}")

    for key in block:
        if str(key).lower() in _TLS_UNSUPPORTED:
            raise fail(str(key).lower(), "not supported by Brook")
    for key, _, value in _entries(block, where, _TLS_KEYS):
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
    raise fail(f"field {key!r} should be a boolean or a string, got {_describe(value)}")


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


# nats-server's spellings of the jetstream block's keys
_JS_ENABLED = ("enabled", "enable")
_JS_STORE_DIR = ("store_dir", "store", "storedir")
_JS_MAX_MEMORY = ("max_memory_store", "max_mem_store", "max_mem")
_JS_MAX_FILE = ("max_file_store", "max_file")
_JS_SYNC = ("sync_interval", "sync")
_JS_CONSUMER_FLUSH = ("consumer_flush_interval",)  # Brook's own (see JetStreamSettings)
_JS_RESTORE_MAX = ("restore_max_bytes",)  # Brook's own
_JS_RESTORE_IDLE = ("restore_idle_timeout",)  # Brook's own
_JS_RESERVE = ("free_space_reserve",)  # Brook's own
_JS_ACKS_AWAITING_SYNC = ("max_acks_awaiting_sync",)  # Brook's own
_JS_LIMITS = ("limits",)


def sync_interval(where: str, v: object) -> float:
    """nats-server's `sync_interval`: `always` (fsync before every ack) or a duration."""
    if isinstance(v, str) and v.strip().lower() == "always":
        return 0.0
    seconds = _duration(where, v)
    if seconds <= 0:
        raise _bad(where, "'always' or a positive duration", v)
    return seconds


def _jetstream(s: Settings, where: str, v: object) -> None:
    """`true`, `"enabled"` or a block; a block enables JetStream unless `enabled: false`."""
    js = s.jetstream
    if isinstance(v, bool):
        js.enabled = v
    elif isinstance(v, str) and v.lower() in ("enabled", "enable", "disabled", "disable"):
        js.enabled = v.lower().startswith("enable")
    elif isinstance(v, dict):
        enabled = True
        known = (
            *_JS_ENABLED,
            *_JS_STORE_DIR,
            *_JS_MAX_MEMORY,
            *_JS_MAX_FILE,
            *_JS_SYNC,
            *_JS_CONSUMER_FLUSH,
            *_JS_RESTORE_MAX,
            *_JS_RESTORE_IDLE,
            *_JS_RESERVE,
            *_JS_ACKS_AWAITING_SYNC,
            *_JS_LIMITS,
        )
        for key, at, value in _entries(v, where, known):
            if key in _JS_ENABLED:
                enabled = _bool(at, value)
            elif key in _JS_STORE_DIR:
                js.store_dir = _str(at, value)
            elif key in _JS_MAX_MEMORY:
                js.max_memory_store_bytes = _size(at, value)
            elif key in _JS_SYNC:
                js.sync_interval_s = sync_interval(at, value)
            elif key in _JS_CONSUMER_FLUSH:
                js.consumer_flush_interval_s = _duration(at, value)
            elif key in _JS_RESTORE_MAX:
                js.restore_max_bytes = _size(at, value)
            elif key in _JS_RESTORE_IDLE:
                js.restore_idle_timeout_s = _duration(at, value)
            elif key in _JS_RESERVE:
                js.free_space_reserve_bytes = _size(at, value)
            elif key in _JS_ACKS_AWAITING_SYNC:
                js.max_acks_awaiting_sync = _int(at, value)
            elif key in _JS_LIMITS:
                _jetstream_limits(s, at, value)
            else:
                js.max_file_store_bytes = _size(at, value)
        js.enabled = enabled
    else:
        raise _bad(where, "a boolean, 'enabled', 'disabled' or a block { ... }", v)


def _jetstream_limits(s: Settings, where: str, v: object) -> None:
    """nats-server's `jetstream { limits { batch { ... } } }`: the atomic batch limits
    (the only JetStream limits Brook takes from that block yet)."""
    if not isinstance(v, dict):
        raise _bad(where, "a block { ... }", v)
    for _, at, batch in _entries(v, where, ("batch",)):
        if not isinstance(batch, dict):
            raise _bad(at, "a block { ... }", batch)
        js = s.jetstream
        keys = ("max_inflight_per_stream", "max_inflight_total", "max_msgs", "timeout")
        for key, at_key, value in _entries(batch, at, keys):
            if key == "timeout":
                js.batch_timeout_s = _duration(at_key, value)
            else:
                setattr(js, f"batch_{key}", _int(at_key, value))


def _mappings(s: Settings, where: str, v: object) -> None:
    """The global account's `mappings` (or `maps`)."""
    if s.mappings:
        raise _mappings_twice(where)
    s.mappings = _mapping_entries(where, v)


def _mappings_twice(where: str) -> ConfigError:
    # nats-server reads both `mappings` and `maps`, in the random order of a Go map.
    return ConfigError(f"{where}: an account's mappings are given twice (mappings and maps)")


def _mapping_entries(where: str, v: object) -> list[SubjectMapping]:
    """nats-server's `mappings` block (of the global account or of one in `accounts`),
    read as its `parseAccountMappings` reads it, with its texts: a subject to one
    destination, to one `{destination, weight, cluster}` entry, or to a list of them.
    What the destinations mean (weights adding up, valid transforms) is checked when the
    server compiles them (`routing/mappings.py`)."""
    block = _block(where, v)
    mappings = []
    spelled: Mapping[str, str] = getattr(block, "spelled", {})
    for key, value in block.items():
        source = spelled.get(key, key)  # subjects are case-sensitive
        at = f'{where}."{source}"{_on_line(block, key)}'
        if not is_valid_subject(source.encode()):
            raise ConfigError(f'{at}: Subject "{source}" is not a valid subject')
        if isinstance(value, str):
            if not value:  # as an entry without a destination, below
                raise ConfigError(f"{at}: a mapping needs a destination subject")
            mappings.append(SubjectMapping(source, [MapDestination(value)], at, False))
            continue
        if isinstance(value, list):
            destinations = [_map_destination(f"{at}[{i}]", d) for i, d in enumerate(value)]
        else:
            destinations = [_map_destination(at, value)]
        mappings.append(SubjectMapping(source, destinations, at))
    return mappings


def _map_destination(where: str, v: object) -> MapDestination:
    """One `{destination, weight, cluster}` entry (nats-server's `parseAccountMapDest`)."""
    if not isinstance(v, dict):
        raise ConfigError(f"{where}: Expected an entry for the mapping destination")
    subject: str | None = None
    weight: int | None = None
    cluster = ""
    spelled: Mapping[str, str] = getattr(v, "spelled", {})
    for name, value in v.items():
        key = spelled.get(name, name)
        at = f"{where}.{name}{_on_line(v, name)}"
        if name in ("dest", "destination"):
            subject = _str(at, value)
        elif name == "weight":
            weight = _map_weight(at, value)
        elif name == "cluster":
            cluster = _str(at, value)
        else:
            raise ConfigError(f'{at}: Unknown field "{key}" for mapping destination')
    if weight is None:
        raise ConfigError(f'{where}: Missing weight for mapping destination "{subject or ""}"')
    if not subject:  # nats-server takes it, then fails on the first message mapped there
        raise ConfigError(f"{where}: a mapping needs a destination subject")
    return MapDestination(subject, weight, cluster)


def _map_weight(where: str, v: object) -> int:
    """A percentage, 0 to 100: an integer, or a string of one with an optional `%`."""
    if isinstance(v, str):
        text = v.removesuffix("%")
        if not INTEGER.fullmatch(text) or not -(1 << 63) <= int(text) < 1 << 63:
            raise ConfigError(f'{where}: Invalid weight "{text}" for mapping destination')
        weight = int(text)
    elif isinstance(v, int) and not isinstance(v, bool):
        weight = int(v)
    else:
        shown = str(v).lower() if isinstance(v, bool) else v  # Go's %v of the value
        raise ConfigError(f"{where}: Unknown entry type for weight of {shown}")
    if not 0 <= weight <= 100:
        raise ConfigError(f"{where}: Invalid weight {weight} for mapping destination")
    return weight


def _set(attr: str, convert: Callable[[str, object], object]) -> _Handler:
    def apply(s: Settings, where: str, v: object) -> None:
        setattr(s, attr, convert(where, v))

    return apply


# Plain keys: conf key(s), Settings attribute, converter. Aliases are nats-server's.
_PLAIN = (
    ("host net", "host", _str),
    ("port", "port", _int),
    ("http_port monitor_port", "http_port", _int),
    ("https_port", "https_port", _int),
    ("allow_non_tls", "allow_non_tls", _bool),
    ("server_name", "server_name", _str),
    ("ports_file_dir", "ports_file_dir", _str),
    ("max_payload", "max_payload_bytes", _size),
    ("max_control_line", "max_control_line_bytes", _size),
    ("max_connections max_conn", "max_connections", _int),
    ("max_subscriptions max_subs", "max_subscriptions", _int),
    ("max_pending", "max_pending_bytes", _size),
    ("write_deadline", "write_deadline_s", _duration),
    ("ping_interval", "ping_interval_s", _duration),
    ("ping_max", "max_pings_out", _int),
    ("debug", "debug", _bool),
    ("trace", "trace", _bool),
)
_TOP: dict[str, _Handler] = {
    key: _set(attr, convert) for keys, attr, convert in _PLAIN for key in keys.split()
} | {
    "listen": _address("host", "port"),
    "http": _address("http_host", "http_port"),
    "authorization": _authorization,
    "no_auth_user": _no_auth_user,
    **dict.fromkeys(
        ("operator", "operators", "roots", "root", "root_operators", "root_operator"), _operator
    ),
    **dict.fromkeys(("resolver", "account_resolver", "accounts_resolver"), _resolver),
    "resolver_preload": _resolver_preload,
    "resolver_pinned_accounts": _resolver_pinned_accounts,
    "jetstream": _jetstream,
    "accounts": _accounts,
    "system_account": _set("system_account", _str),
    "system": _set("system_account", _str),
    "websocket": _websocket,
    "ws": _websocket,
    "mappings": _mappings,
    "maps": _mappings,
    "tls": _tls,
}


def settings_from_conf(data: Mapping[str, object], base: Settings | None = None) -> Settings:
    """Translate parsed config onto a copy of `base` (default `Settings()`), then validate.

    Unknown keys and wrongly typed values raise `ConfigError` naming the dotted key path.
    """
    settings = copy.deepcopy(base) if base is not None else Settings()
    for key, where, value in _entries(data, "", _TOP):
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
        return settings_from_conf(data, base)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
