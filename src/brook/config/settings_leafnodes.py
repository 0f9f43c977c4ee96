"""The `leafnodes {}` block's settings (ADR 0032): the remotes this server dials, the
listener and logins of a hub."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from brook import limits
from brook.config.errors import ConfigError
from brook.config.settings_auth import GLOBAL_ACCOUNT

if TYPE_CHECKING:
    from brook.config.settings_tls import TLSSettings


@dataclass(slots=True)
class LeafRemoteSettings:
    """One entry of `leafnodes { remotes [...] }`: a hub this server dials as a spoke
    (ADR 0032; config/conf_leafnodes.py reads it)."""

    urls: list[str]  # nats-leaf://[user:pass@]host:port, tried in turn
    account: str = GLOBAL_ACCOUNT  # the local account bound to the connection
    credentials: str | None = None  # a creds file: the user JWT, and the seed signing the nonce
    nkey: str | None = None  # a user seed (`nkey`/`seed`): its public key and nonce signature
    # Whether the hub's `leafnode_urls` are left out of the URLs dialled (nats-server's
    # default: they are tried first, then the configured ones).
    ignore_discovered_servers: bool = False
    # Subjects whose messages and interest never come in from the hub (`deny_imports`) or
    # go out to it (`deny_exports`), as nats-server's remote permissions.
    deny_imports: list[str] = field(default_factory=list)
    deny_exports: list[str] = field(default_factory=list)
    # `tls {}`: the hub's certificate checked against `ca_file` (else the system's CAs),
    # `cert_file`/`key_file` presented; TLS is also used when the hub's INFO requires it.
    tls: TLSSettings | None = None


@dataclass(slots=True)
class LeafUser:
    """A spoke's login at this hub (`leafnodes { authorization }`) and the account it
    binds (`$G` when none is named)."""

    user: str
    password: str
    account: str = GLOBAL_ACCOUNT


@dataclass(slots=True)
class LeafNodeSettings:
    """nats-server's `leafnodes {}` block (ADR 0032); Brook honours the keys below and
    refuses the others by name at load."""

    remotes: list[LeafRemoteSettings] = field(default_factory=list)
    reconnect_delay_s: float = limits.LEAF_RECONNECT_DELAY_S
    # The hub's side: spokes accepted on host:port (port 0: none; -1: any free port),
    # logging in as one of `users` (none: any spoke, bound to `$G`).
    host: str = limits.DEFAULT_HOST
    port: int = 0
    # `advertise`: `host[:port]` its INFO tells spokes to dial (`host`, `port`,
    # `leafnode_urls`) instead of the listener's own.
    advertise: str = ""
    # `no_advertise`: the INFO gives no `leafnode_urls`, so spokes dial only the URLs
    # they were configured with.
    no_advertise: bool = False
    users: list[LeafUser] = field(default_factory=list)
    # `authorization { nkey }`: a spoke signing the nonce with this user key logs in,
    # bound to `nkey_account` (a user of `users` named in `authorization` goes first).
    nkey: str = ""
    nkey_account: str = GLOBAL_ACCOUNT
    # `authorization { timeout }`; 0: nats-server's default (`login_timeout_s`)
    auth_timeout_s: float = 0.0
    tls: TLSSettings | None = None  # the listener's: spokes start TLS after its INFO

    @property
    def login_timeout_s(self) -> float:
        """The time a spoke has to log in: `auth_timeout_s`, or nats-server's default
        (`getDefaultAuthTimeout`): the TLS timeout plus a second when the listener has
        TLS (the handshake counts against it, and a refusal must not come mid-handshake),
        else 2 s."""
        if self.auth_timeout_s:
            return self.auth_timeout_s
        return self.tls.timeout_s + 1.0 if self.tls is not None else limits.AUTH_TIMEOUT_S

    def advertised(self, port: int) -> tuple[str, int]:
        """nats-server's `parseHostPort` of `advertise`: its host and port, the listener's
        `port` when it names none (or 0, -1)."""
        host, sep, given = self.advertise.rpartition(":")
        if not sep or "]" in given or (host.count(":") and not host.startswith("[")):
            host, given = self.advertise, ""  # no port (a bare IPv6 address too)
        host = host.strip().removeprefix("[").removesuffix("]")
        try:
            number = int(given) if given.strip() else port
        except ValueError:
            raise ConfigError(
                f"leafnodes.advertise: {self.advertise!r} is not a valid host:port"
            ) from None
        return host, port if number in (0, -1) else number

    def validate(self, account_names: set[str], operator_mode: bool) -> None:
        """Accounts exist; a hub without its own authorization logs spokes in as the
        server's client users (server/leaflogin.py), except in operator mode, where
        nats-server would check spokes' user JWTs, which Brook does not do yet."""
        for remote in self.remotes:
            if remote.account != GLOBAL_ACCOUNT and remote.account not in account_names:
                raise ConfigError(
                    f"leafnodes.remotes: local account {remote.account!r} for remote"
                    f" {remote.urls[0]} does not exist"
                )
        if self.nkey_account != GLOBAL_ACCOUNT and self.nkey_account not in account_names:
            raise ConfigError(
                f"leafnodes.authorization: account {self.nkey_account!r} of nkey {self.nkey!r}"
                " does not exist"
            )
        for u in self.users:
            if u.account != GLOBAL_ACCOUNT and u.account not in account_names:
                raise ConfigError(
                    f"leafnodes.authorization: account {u.account!r} of user {u.user!r}"
                    " does not exist"
                )
        if not -1 <= self.port <= 65535:
            raise ConfigError(f"leafnodes.port: {self.port} is not a TCP port")
        if self.tls is not None:
            self.tls.validate("leafnodes.tls")
        if self.advertise:
            self.advertised(self.port)
        if self.port and not self.users and not self.nkey and operator_mode:
            raise ConfigError(
                "leafnodes.authorization: a leafnode listener without its own authorization"
                " in operator mode (spokes logging in with user JWTs): not supported by Brook"
            )
