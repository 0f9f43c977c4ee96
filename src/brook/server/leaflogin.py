"""A leafnode spoke logging in as one of the server's client users: nats-server's
`isLeafNodeAuthorized` falls back to `isClientAuthorized` when `leafnodes {}` has no
authorization of its own (ADR 0032). The spoke's CONNECT is checked as a client's
(users and passwords, nkeys, the token, `no_auth_user`, `allowed_connection_types`
naming LEAFNODE) and its connection binds the user's account, limited by the user's
permissions. Imported only by servers with a leafnode listener."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from brook.config.settings import SubjectPermission
from brook.leafnode.manager import ClientLogin
from brook.leafnode.peers import SpokeLogin, SubjectFilter
from brook.server.auth import Authenticator, verify_bcrypt


def _filter(permission: SubjectPermission | None) -> SubjectFilter | None:
    """A user's allow and deny lists as subject patterns; a subscribe entry naming a
    queue group (`"foo.> q"`) allows its subject, and denies nothing whole."""
    if permission is None:
        return None
    allow = permission.allow
    return SubjectFilter(
        allow=tuple(p.split()[0].encode() for p in allow if p.strip())
        if allow is not None
        else None,
        deny=tuple(p.encode() for p in permission.deny if len(p.split()) == 1),
    )


def client_login(authenticator: Callable[[], Authenticator]) -> ClientLogin:
    """The `LeafNodes` `client_login` of a server whose current authenticator (a config
    reload replaces it) `authenticator()` returns."""

    def log_in(connect: dict[str, Any], nonce: str) -> SpokeLogin | None:
        login = authenticator().login(connect, nonce, leaf=True)
        if login is None or login.jwt is not None:  # user JWTs: refused at load
            return None
        if login.bcrypt is not None and not verify_bcrypt(*login.bcrypt):
            # bcrypt blocks the event loop for tens of milliseconds: paid once per spoke
            # connection, which is rare next to client connections.
            return None
        entry = login.entry
        perms = entry.permissions if entry is not None else None
        if perms is None:
            return SpokeLogin(login.account)
        return SpokeLogin(login.account, _filter(perms.publish), _filter(perms.subscribe))

    return log_in
