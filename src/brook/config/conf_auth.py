"""The client auth setup of the config format: the `authorization` block (a token, one
user, or a `users` list of passwords and nkeys with their `permissions`, as nats-server's
`parseAuthorization` reads them) and `no_auth_user`; the user and permissions readers are
shared with an account's `users` (`conf_accounts.py`)."""

from __future__ import annotations

import json

from brook.config.conf_values import (
    bad,
    block_entries,
    read_block,
    read_duration,
    read_int,
    read_str,
)
from brook.config.settings import (
    GLOBAL_ACCOUNT,
    AuthSettings,
    ConfigError,
    NkeyUser,
    Permissions,
    ResponsePermission,
    Settings,
    SubjectPermission,
    User,
)
from brook.subjects import is_valid_subject


def read_user(where: str, v: object) -> User | NkeyUser:
    """A `users` entry: `{user, password}` or `{nkey}` (nats-server's parseUsers), each
    with its own `permissions` and `allowed_connection_types` if it has any."""
    name = password = nkey = None
    permissions = None
    types: frozenset[str] = frozenset()
    known = ("user", "username", "password", "pass", "nkey", *_PERMISSIONS, *_CONNECTION_TYPES)
    for key, at, value in block_entries(read_block(where, v), where, known):
        if key in ("user", "username"):
            name = read_str(at, value)
        elif key == "nkey":
            nkey = read_str(at, value)
        elif key in _PERMISSIONS:
            permissions = read_permissions(at, value)
        elif key in _CONNECTION_TYPES:
            types = _connection_types(at, value)
        else:
            password = read_str(at, value)
    if nkey is not None:
        if name is not None or password is not None:
            raise ConfigError(f"{where}: Nkey users do not take usernames or passwords")
        return NkeyUser(nkey, permissions, connection_types=types)
    if name is None:
        raise ConfigError(f"{where}: a user entry needs a user")
    # No password: a certificate's user (verify_and_map).
    return User(name, password or "", permissions, connection_types=types)


def _connection_types(where: str, v: object) -> frozenset[str]:
    """`allowed_connection_types`: a string or a list of them, each one of nats-server's
    connection types in any case, the unknown ones named as its
    `convertAllowedConnectionTypes` names them. Brook serves STANDARD and WEBSOCKET
    clients; a user allowed neither never logs in."""
    from brook.jwt import CONNECTION_TYPES  # here: brook.jwt is for operator mode

    values = [v] if isinstance(v, str) else v
    if not isinstance(values, list):
        raise bad(where, "a string or an array of strings", v)
    types = [read_str(f"{where}[{i}]", value).upper() for i, value in enumerate(values)]
    unknown = [kind for kind in types if kind not in CONNECTION_TYPES]
    if unknown:
        quoted = " ".join(json.dumps(kind) for kind in unknown)  # Go's %q of a []string
        raise ConfigError(f"{where}: invalid connection types [{quoted}]")
    return frozenset(types)


# nats-server's spellings in a user entry, and of the authorization block's defaults for
# the users that have none (`permissions` there means the defaults too, as in nats-server)
_PERMISSIONS = ("permission", "permissions", "authorization")
_CONNECTION_TYPES = ("allowed_connection_types", "connection_types", "clients")
_DEFAULT_PERMISSIONS = ("default_permission", "default_permissions", "permissions")
_PUBLISH = ("pub", "publish", "import")
_SUBSCRIBE = ("sub", "subscribe", "export")
_RESPONSES = ("publish_allow_responses", "allow_responses")


def read_permissions(where: str, v: object) -> Permissions:
    """A `permissions` block as nats-server's `parseUserPermissions` reads it."""
    perms = Permissions()
    for key, at, value in block_entries(
        read_block(where, v), where, (*_PUBLISH, *_SUBSCRIBE, *_RESPONSES)
    ):
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
    for key, at, value in block_entries(v, where, ("allow", "deny")):
        subjects = _perm_subjects(at, value, queues=queues)
        if key == "allow":
            perm.allow = subjects or None
        else:
            perm.deny = subjects
    return perm


def _perm_subjects(where: str, v: object, *, queues: bool) -> list[str]:
    items = v if isinstance(v, list) else [v]
    subjects = [
        read_str(f"{where}[{i}]" if isinstance(v, list) else where, s) for i, s in enumerate(items)
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
    for key, at, value in block_entries(read_block(where, v), where, known):
        if key.startswith("max"):
            responses.max_msgs = read_int(at, value) or responses.max_msgs
        else:
            if not isinstance(value, str):  # nats-server reads only a duration string
                raise bad(at, "a duration string (like '1m' or '500ms')", value)
            negative = value.startswith("-")
            seconds = read_duration(at, value.removeprefix("-")) * (-1 if negative else 1)
            responses.expires_s = seconds or responses.expires_s
    return responses


def apply_authorization(s: Settings, where: str, v: object) -> None:
    """The block describes the whole client auth setup, so it replaces any earlier one
    (`no_auth_user`, a key of its own outside the block, is kept)."""
    known = ("token", "user", "username", "password", "pass", "users", "timeout")
    token = name = password = None
    entries: list[User | NkeyUser] = []
    defaults: Permissions | None = None
    for key, at, value in block_entries(
        read_block(where, v), where, (*known, *_DEFAULT_PERMISSIONS)
    ):
        if key in _DEFAULT_PERMISSIONS:
            defaults = read_permissions(at, value)
        elif key == "token":
            token = read_str(at, value)
        elif key in ("user", "username"):
            name = read_str(at, value)
        elif key in ("password", "pass"):
            password = read_str(at, value)
        elif key == "users":
            if not isinstance(value, list):
                raise bad(at, "an array of {user, password} or {nkey} blocks", value)
            entries = [read_user(f"{at}[{i}]", entry) for i, entry in enumerate(value)]
        else:
            s.auth_timeout_s = read_duration(at, value)
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


def apply_no_auth_user(s: Settings, where: str, v: object) -> None:
    s.auth.no_auth_user = read_str(where, v)
