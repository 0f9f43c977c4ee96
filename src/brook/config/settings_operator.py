"""Operator mode's settings (ADR 0028, ADR 0033): the trusted operators' JWTs, the
account resolver and its directory, the pinned accounts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from brook.config.errors import ConfigError

if TYPE_CHECKING:
    from brook.config.settings_auth import AuthSettings


@dataclass(frozen=True, slots=True)
class DirectoryResolver:
    """nats-server's directory account resolvers (`resolver { type: full|cache, dir }`,
    ADR 0033): account JWTs as `<dir>/<account public key>.jwt` files. `full` holds every
    account and takes claim updates for any; `cache` holds up to `limit` (1000 unless set),
    evicting the least recently used, and takes updates only for the accounts it has."""

    kind: str  # "FULL" or "CACHE"
    dir: str
    # `allow_delete` (FULL): `$SYS.REQ.CLAIMS.DELETE` renames a JWT to `<key>.jwt.deleted`,
    # or with `hard_delete` removes it; "none": deletes are refused.
    delete: str = "none"  # "none", "rename" or "hard"
    limit: int = 0  # JWTs held at most; 0: FULL no bound, CACHE 1000
    ttl_s: float = 0.0  # CACHE: a JWT's life from its last use; 0: until its `exp`
    # FULL's sync with other servers and the lookup timeout: nothing to sync with or to
    # ask on a standalone server, so read and checked only.
    interval_s: float = 60.0
    timeout_s: float = 1.9


@dataclass(slots=True)
class OperatorSettings:
    """Decentralized auth, nats-server's operator mode (ADR 0028): the trusted operators'
    JWTs, the account resolver and the account JWTs it holds. Clients then log in with a
    user JWT issued by one of those accounts (server/jwtauth.py), never from
    `authorization`. Off while `jwts` is empty."""

    jwts: list[str] = field(default_factory=list)  # operator JWTs, read from files or inline
    resolver: str | None = None  # "MEMORY", "FULL" or "CACHE"; None: none set
    preload: dict[str, str] = field(default_factory=dict)  # account public key: account JWT
    # The `full` and `cache` resolvers' directory and options (ADR 0033); None: MEMORY.
    directory: DirectoryResolver | None = None
    # `resolver_pinned_accounts`: only users of these accounts (and of the system
    # account) log in; empty: any account the resolver holds.
    pinned_accounts: frozenset[str] = frozenset()

    def validate(self, auth: AuthSettings, websocket_no_auth_user: str | None) -> None:
        """nats-server's `validateTrustedOperators` and `validateNoAuthUser`, in its
        words; what Brook cannot honour beside operators is refused too."""
        if not self.jwts:
            if self.resolver is not None or self.preload or self.pinned_accounts:
                raise ConfigError("resolver: an account resolver needs an operator (operator: ...)")
            return
        if auth.no_auth_user is not None or websocket_no_auth_user is not None:
            raise ConfigError("no_auth_user not compatible with Trusted Operator")
        if self.resolver is None:
            raise ConfigError("operators require an account resolver to be configured")
        if auth.users or auth.nkeys:
            raise ConfigError("operators do not allow users to be configured directly")
        if auth.token is not None:
            raise ConfigError("authorization: a token is never checked in operator mode")
        from brook.nkey import InvalidNkey, Prefix, decode_public_key

        for key in sorted(self.pinned_accounts):
            try:
                decode_public_key(key, Prefix.ACCOUNT)
            except InvalidNkey:
                raise ConfigError(
                    f"resolver_pinned_accounts: pinned account key {key!r} is not a valid "
                    "public account nkey"
                ) from None

    def system_account(self, configured: str | None) -> str | None:
        """The system account: the config's, else (with one operator) the operator JWT's
        `system_account` (opts.go); nats-server's refusal when they differ."""
        from brook import jwt

        operators = [jwt.decode_operator(token) for token in self.jwts]
        named = [op.system_account for op in operators if op.system_account]
        if configured is None:
            return operators[0].system_account or None if len(operators) == 1 else None
        if named and configured not in named:
            raise ConfigError("system_account in config and operator JWT must be identical")
        return configured
