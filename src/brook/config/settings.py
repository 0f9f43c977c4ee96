"""The one settings model of a Brook server and the single source of its defaults.

Loaders (command-line flags, nats-server style config files) only translate into this
model; they never hold defaults of their own. `validate()` checks cross-field rules and
raises `ConfigError` naming the offending key, so every loader reports errors the same way.

This module is the model's one import path: `Settings` is here, the settings of its
blocks are in parts named for them, each with its block's own checks (`settings_auth.py`,
`settings_accounts.py`, `settings_operator.py`, `settings_tls.py`, `settings_websocket.py`,
`settings_jetstream.py`, `settings_leafnodes.py`; `ConfigError` in `errors.py`), and are
exported from here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from brook import limits
from brook.config.errors import ConfigError
from brook.config.settings_accounts import (
    AccountSettings,
    ExportSettings,
    ImportSettings,
    MapDestination,
    SubjectMapping,
)
from brook.config.settings_auth import (
    GLOBAL_ACCOUNT,
    SYSTEM_ACCOUNT,
    AuthSettings,
    NkeyUser,
    Permissions,
    ResponsePermission,
    SubjectPermission,
    User,
)
from brook.config.settings_jetstream import (
    JetStreamAccountLimits,
    JetStreamSettings,
    default_store_dir,
)
from brook.config.settings_leafnodes import LeafNodeSettings, LeafRemoteSettings, LeafUser
from brook.config.settings_operator import DirectoryResolver, OperatorSettings
from brook.config.settings_process import ProcessSettings
from brook.config.settings_tls import TLSSettings
from brook.config.settings_websocket import WebSocketSettings, advertised_host_port

__all__ = [
    "GLOBAL_ACCOUNT",
    "SYSTEM_ACCOUNT",
    "AccountSettings",
    "AuthSettings",
    "ConfigError",
    "DirectoryResolver",
    "ExportSettings",
    "ImportSettings",
    "JetStreamAccountLimits",
    "JetStreamSettings",
    "LeafNodeSettings",
    "LeafRemoteSettings",
    "LeafUser",
    "MapDestination",
    "NkeyUser",
    "OperatorSettings",
    "Permissions",
    "ProcessSettings",
    "ResponsePermission",
    "Settings",
    "SubjectMapping",
    "SubjectPermission",
    "TLSSettings",
    "User",
    "WebSocketSettings",
    "advertised_host_port",
    "default_store_dir",
]


@dataclass(slots=True)
class Settings:
    host: str = limits.DEFAULT_HOST  # 0.0.0.0 (or ::) listens on IPv4 and IPv6 alike
    port: int = limits.DEFAULT_PORT  # -1 (nats-server's RANDOM_PORT) or 0 = pick a free port
    http_port: int = 0  # 0 = monitoring disabled; -1 = pick a free port
    http_host: str | None = None  # defaults to `host`
    # nats-server's ports_file_dir: write `<program>_<pid>.ports` (JSON URLs) there once
    # listening, remove it at shutdown; launchers of test servers read it.
    ports_file_dir: str | None = None
    server_name: str | None = None
    max_payload_bytes: int = limits.MAX_PAYLOAD_BYTES
    max_control_line_bytes: int = limits.MAX_CONTROL_LINE_BYTES
    max_connections: int = limits.MAX_CONNECTIONS
    max_subscriptions: int = limits.MAX_SUBSCRIPTIONS_PER_CONNECTION
    max_pending_bytes: int = limits.MAX_PENDING_BYTES
    # Closed client connections kept for /connz?state=closed (nats-server's ring); 0 in
    # a config file means nats-server's default.
    max_closed_clients: int = limits.MAX_CLOSED_CLIENTS
    write_deadline_s: float = limits.WRITE_DEADLINE_S
    ping_interval_s: float = limits.PING_INTERVAL_S
    max_pings_out: int = limits.MAX_PINGS_OUT
    # 0: nats-server's default, `client_auth_timeout_s` (the TLS timeout + 1 s with TLS)
    auth_timeout_s: float = 0.0
    auth: AuthSettings = field(default_factory=AuthSettings)
    operator: OperatorSettings = field(default_factory=OperatorSettings)  # JWT auth
    tls: TLSSettings | None = None  # None: plain TCP only
    allow_non_tls: bool = False  # with tls: clients may also connect without it
    https_port: int = 0  # monitoring over TLS (the `tls` block's certificate); 0 = off
    jetstream: JetStreamSettings = field(default_factory=JetStreamSettings)
    accounts: list[AccountSettings] = field(default_factory=list)  # besides $G
    system_account: str | None = None  # None: `$SYS`, created if not configured
    websocket: WebSocketSettings = field(default_factory=WebSocketSettings)
    leafnodes: LeafNodeSettings = field(default_factory=LeafNodeSettings)
    # The global account's subject mappings, in the order written (ADR 0030)
    mappings: list[SubjectMapping] = field(default_factory=list)
    # `/metrics` has each consumer's series (Brook's own key, ADR 0040); off for servers
    # with so many consumers that a scrape would cost more than they tell.
    metrics_consumers: bool = True
    debug: bool = False
    trace: bool = False
    # Pid file, log file, lame-duck timing (config/settings_process.py; ADR 0041)
    process: ProcessSettings = field(default_factory=ProcessSettings)
    # Where these settings were read from, for a config reload (server/reload.py): the
    # config file, and the `brook serve` command line whose flags override it again.
    # Not settings themselves: equal settings may come from different places.
    config_file: str | None = field(default=None, compare=False)
    serve_args: tuple[str, ...] | None = field(default=None, compare=False)

    @property
    def client_auth_timeout_s(self) -> float:
        """The time a client has to log in: `auth_timeout`, or nats-server's default
        (`getDefaultAuthTimeout`): the TLS timeout plus a second when the client port
        has TLS (the handshake counts against it), else 2 s."""
        if self.auth_timeout_s:
            return self.auth_timeout_s
        return self.tls.timeout_s + 1.0 if self.tls is not None else limits.AUTH_TIMEOUT_S

    def _validate_accounts(self) -> None:
        """nats-server's rules for `accounts` and `system_account` (opts.go)."""
        names = {a.name for a in self.accounts}
        for account_name in self.auth.accounts:
            if account_name != GLOBAL_ACCOUNT and account_name not in names:
                raise ConfigError(f"accounts: user of unknown account {account_name!r}")
        system = self.system_account
        if (
            system is not None
            and system not in names
            and system != SYSTEM_ACCOUNT
            and system not in self.operator.preload
            and self.operator.directory is None  # looked for in its directory at start
        ):
            raise ConfigError(
                f"system_account: {system!r}: error resolving system account: account missing"
            )
        for account in self.accounts:
            if account.jetstream and (
                account.name in (".", "..") or "/" in account.name or "\0" in account.name
            ):
                # Its streams are stored under a directory of its name (ADR 0027).
                raise ConfigError(
                    f"accounts.{account.name}.jetstream: an account with JetStream needs a"
                    " name that is a directory name (no '/', not '.' or '..')"
                )
            if account.jetstream and account.name == self.system_account_name:
                raise ConfigError(
                    f"accounts.{account.name}.jetstream: "
                    "Not allowed to enable JetStream on the system account"
                )
        self._validate_account_reservations()
        self.leafnodes.validate(names, bool(self.operator.jwts))

    def _validate_account_reservations(self) -> None:
        """nats-server's `sufficientResources` as it enables the configured accounts: their
        memory and storage limits, added up in order, must fit the server's, or it does
        not start (nor does Brook)."""
        js = self.jetstream
        memory = storage = 0
        for account in self.accounts:
            limits = account.jetstream_limits
            if not (account.jetstream and js.enabled and limits is not None):
                continue
            memory += max(limits.max_memory, 0)
            storage += max(limits.max_storage, 0)
            for total, maximum, kind in (
                (memory, js.max_memory_store_bytes, "memory resources available (10028)"),
                (storage, js.max_file_store_bytes, "storage resources available (10047)"),
            ):
                if 0 <= maximum < total:
                    raise ConfigError(
                        "Error enabling jetstream on configured accounts: insufficient " + kind
                    )

    @property
    def anonymous_global(self) -> bool:
        """Only the system account has users (no authorization block, no no_auth_user):
        nats-server then lets clients without credentials in to `$G` (server.go
        `sysAccOnlyNoAuthUser`), while INFO still says auth_required."""
        auth = self.auth
        return (
            bool(self.accounts)
            and all(a.name == self.system_account_name for a in self.accounts)
            and auth.token is None
            and GLOBAL_ACCOUNT not in auth.accounts
            and auth.no_auth_user is None
        )

    @property
    def system_account_name(self) -> str:
        return self.system_account or SYSTEM_ACCOUNT

    def replace(self, **changes: object) -> Settings:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def validate(self) -> Settings:
        """Check ranges and cross-field rules; return self so loaders can chain."""
        if not -1 <= self.port <= 65535:
            raise ConfigError(f"port: {self.port} is not a TCP port (0-65535, -1 = any free)")
        if not -1 <= self.http_port <= 65535:
            raise ConfigError(
                f"http_port: {self.http_port} is not a TCP port (0-65535, -1 = any free)"
            )
        if self.operator.jwts and self.accounts:
            raise ConfigError("operators do not allow Accounts to be configured directly")
        self.operator.validate(self.auth, self.websocket.no_auth_user)
        if self.operator.jwts:
            self.system_account = self.operator.system_account(self.system_account)
            if self.operator.pinned_accounts and self.system_account:
                # as nats-server: the system account's users can always log in
                pinned = self.operator.pinned_accounts | {self.system_account}
                self.operator.pinned_accounts = pinned
        self.websocket.validate(self.auth, operator_mode=bool(self.operator.jwts))
        self.process.validate()
        if not 0 < self.max_payload_bytes <= limits.MAX_PAYLOAD_BYTES_HARD:
            raise ConfigError(
                f"max_payload: {self.max_payload_bytes} must be between 1 and "
                f"{limits.MAX_PAYLOAD_BYTES_HARD} bytes"
            )
        if self.max_payload_bytes > self.max_pending_bytes:
            raise ConfigError(
                f"max_payload: {self.max_payload_bytes} cannot exceed max_pending "
                f"({self.max_pending_bytes})"
            )
        if self.max_control_line_bytes < 256:
            raise ConfigError(f"max_control_line: {self.max_control_line_bytes} is below 256")
        for name in ("max_connections", "max_pings_out"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name}: must be positive")
        if self.max_subscriptions < 0:
            raise ConfigError("max_subscriptions: must be 0 (unlimited) or positive")
        if not 0 <= self.max_closed_clients <= limits.MAX_CLOSED_CLIENTS_MAX:
            raise ConfigError(
                f"max_closed_clients: must be 0 (the default, {limits.MAX_CLOSED_CLIENTS}) "
                f"to {limits.MAX_CLOSED_CLIENTS_MAX}"
            )
        for name in ("ping_interval_s", "write_deadline_s"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name.removesuffix('_s')}: must be a positive duration")
        if self.auth_timeout_s < 0:
            raise ConfigError("auth_timeout: must be a positive duration (0: the default)")
        self.jetstream.validate()
        if not -1 <= self.https_port <= 65535:
            raise ConfigError(
                f"https_port: {self.https_port} is not a TCP port (0-65535, -1 = any free)"
            )
        if self.https_port and self.http_port:
            raise ConfigError(
                f"can't specify both HTTP ({self.http_port}) and HTTPs ({self.https_port}) ports"
            )
        if self.https_port and self.tls is None:
            raise ConfigError("https_port: TLS cert and key required for HTTPS")
        if self.tls is not None:
            self.tls.validate("tls")
        ws_tls = self.websocket.tls if self.websocket.port else None
        if ws_tls is not None:
            ws_tls.validate("websocket.tls")
        self.auth.validate()
        if self.operator.jwts and self.websocket.auth is not None:
            raise ConfigError("websocket.authorization: not supported by Brook in operator mode")
        self._validate_accounts()
        return self

    @property
    def maps_certificates(self) -> bool:
        """Some listener maps client certificates to users (`verify_and_map`): a user
        without a password is then a certificate's identity only (nats-server's
        `canTLSMap`)."""
        ws_tls = self.websocket.tls if self.websocket.port else None
        return any(tls is not None and tls.verify_and_map for tls in (self.tls, ws_tls))
