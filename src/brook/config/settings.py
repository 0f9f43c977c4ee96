"""The one settings model of a Brook server and the single source of its defaults.

Loaders (command-line flags, nats-server style config files) only translate into this
model; they never hold defaults of their own. `validate()` checks cross-field rules and
raises `ConfigError` naming the offending key, so every loader reports errors the same way.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import urllib.parse
from dataclasses import dataclass, field

from brook import limits
from brook.subjects import is_valid_subject

GLOBAL_ACCOUNT = "$G"  # nats-server's global account: users of no configured account
SYSTEM_ACCOUNT = "$SYS"  # nats-server's default system account


class ConfigError(ValueError):
    """A setting is missing, unknown or out of range; the message names the key."""


@dataclass(slots=True)
class SubjectPermission:
    """nats-server's `allow`/`deny` lists of one direction (publish or subscribe).

    `allow` None: no allow list, everything not denied is allowed. For publish an empty
    `allow` list allows nothing (what `allow_responses` leaves when no list is given); for
    subscribe nats-server treats an empty list as none. Subscribe entries may name a
    queue group after the subject (`"foo.> q"`)."""

    allow: list[str] | None = None
    deny: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ResponsePermission:
    """`allow_responses`: a client may publish to the reply subject of each request it
    received, at most `max_msgs` times and within `expires_s` (<= 0: no bound)."""

    max_msgs: int = limits.ALLOW_RESPONSES_MAX_MSGS
    expires_s: float = limits.ALLOW_RESPONSES_EXPIRES_S


@dataclass(slots=True)
class Permissions:
    """A user's authorization (nats-server's `permissions` block); None parts allow all."""

    publish: SubjectPermission | None = None
    subscribe: SubjectPermission | None = None
    responses: ResponsePermission | None = None


def _users_key(account: str) -> str:
    """Where a user of `account` is configured, for error messages."""
    return "authorization.users" if account == GLOBAL_ACCOUNT else f"accounts.{account}.users"


def _duplicate(kind: str, name: str, account: str, earlier: str) -> ConfigError:
    """A user or nkey defined twice; across accounts in nats-server's words (opts.go
    `parseAccounts`: a user belongs to one account)."""
    if account == earlier == GLOBAL_ACCOUNT:
        return ConfigError(f"authorization.users: {kind} {name!r} is defined twice")
    where = _users_key(account if account != GLOBAL_ACCOUNT else earlier)
    return ConfigError(f'{where}: Duplicate {kind} "{name}" detected')


@dataclass(slots=True)
class MapDestination:
    """One destination of a subject mapping (nats-server's `MapDest`): a transform
    destination, the share of messages it gets (percent), and the cluster it is scoped to
    ('' for none: a single server has no cluster, so scoped destinations never apply)."""

    subject: str
    weight: int = 100
    cluster: str = ""


@dataclass(slots=True)
class SubjectMapping:
    """A `mappings` entry: published subjects matching `source` go to one of the
    destinations (ADR 0030). `where` names the entry in the file, for errors found when
    the server compiles it; `weighted` False for the plain `"src": "dest"` form, whose
    errors nats-server words differently."""

    source: str
    destinations: list[MapDestination]
    where: str = ""
    weighted: bool = True


@dataclass(slots=True)
class ExportSettings:
    """An account's stream or service export (nats-server's `exports` entry): who may
    import `subject` (None: any account; a list: those named), and a service's response
    type (`singleton`, `stream`, `chunked`) and threshold."""

    subject: str
    service: bool
    accounts: list[str] | None = None
    response_type: str = "singleton"
    threshold_s: float = limits.SERVICE_RESPONSE_THRESHOLD_S
    # `account_token_position`: when > 0, only an account whose name is that token of the
    # subject it imports may import (the export's token there must be `*`).
    token_position: int = 0
    where: str = ""


@dataclass(slots=True)
class ImportSettings:
    """An account's stream or service import: `subject` of `account` (its export), seen
    here under `to` (a stream's may be `prefix.subject` instead; a service's `to`
    defaults to `subject`)."""

    account: str
    subject: str
    service: bool
    to: str = ""
    prefix: str = ""
    share: bool = False  # a service's: the requester's details in its Nats-Request-Info
    where: str = ""


@dataclass(slots=True)
class AccountSettings:
    """One configured account (`accounts { NAME: {...} }`): its subjects, and its
    JetStream when enabled, are its own. Its users are in `AuthSettings` with `account`
    set to its name (a user belongs to one account)."""

    name: str
    jetstream: bool = False  # `jetstream: enabled` (the server's JetStream must be on)
    # The limits of its `jetstream { max_mem: ... }` block; None: enabled without limits.
    jetstream_limits: JetStreamAccountLimits | None = None
    mappings: list[SubjectMapping] = field(default_factory=list)  # ADR 0030
    exports: list[ExportSettings] = field(default_factory=list)
    imports: list[ImportSettings] = field(default_factory=list)


@dataclass(slots=True)
class User:
    """One user/password entry; `password` may be plain text or a bcrypt hash ($2a$/$2b$/$2y$).
    `permissions` None: the user may publish and subscribe anywhere."""

    user: str
    password: str
    permissions: Permissions | None = None  # what the user may publish and subscribe to
    account: str = GLOBAL_ACCOUNT  # the account whose subjects (and JetStream) it uses
    # nats-server's `allowed_connection_types` (STANDARD, WEBSOCKET, ...): the kinds of
    # connection the user may log in through; empty: any.
    connection_types: frozenset[str] = frozenset()


@dataclass(slots=True)
class NkeyUser:
    """One nkey user: a public user nkey (`U...`); the client proves it holds the key by
    signing the nonce of the server's INFO."""

    nkey: str
    permissions: Permissions | None = None
    account: str = GLOBAL_ACCOUNT
    connection_types: frozenset[str] = frozenset()  # as a `User`'s


@dataclass(slots=True)
class AuthSettings:
    """Client authentication: none, a token, or users (name/password and nkey users), and
    the user a client without credentials logs in as (`no_auth_user`)."""

    token: str | None = None
    users: list[User] = field(default_factory=list)
    nkeys: list[NkeyUser] = field(default_factory=list)
    no_auth_user: str | None = None
    single_user: bool = False  # `users` is the authorization block's one user/password

    @property
    def required(self) -> bool:
        return self.token is not None or bool(self.users) or bool(self.nkeys)

    @property
    def accounts(self) -> set[str]:
        """The accounts the users log in to."""
        return {u.account for u in self.users} | {n.account for n in self.nkeys}

    def validate(self) -> None:
        """nats-server's rules, in its words where it has them (opts.go, auth.go)."""
        from brook.nkey import InvalidNkey, Prefix, decode_public_key

        if self.single_user and self.accounts - {GLOBAL_ACCOUNT}:
            raise ConfigError("accounts: Can not have a single user/pass and accounts")
        if self.token is not None and self.accounts - {GLOBAL_ACCOUNT}:
            raise ConfigError("accounts: Can not have a token and accounts")
        if self.token is not None and (self.users or self.nkeys):
            raise ConfigError("authorization: token and users cannot both be set")
        seen: dict[str, str] = {}  # user name or nkey -> its account
        for u in self.users:
            if not u.user:
                raise ConfigError(f"{_users_key(u.account)}: a user has an empty name")
            if u.user in seen:
                raise _duplicate("user", u.user, u.account, seen[u.user])
            seen[u.user] = u.account
        for n in self.nkeys:
            try:
                decode_public_key(n.nkey, Prefix.USER)
            except InvalidNkey:
                raise ConfigError(
                    f"{_users_key(n.account)}: Not a valid public nkey for a user: {n.nkey!r}"
                ) from None
            if n.nkey in seen:
                raise _duplicate("nkey", n.nkey, n.account, seen[n.nkey])
            seen[n.nkey] = n.account
        if self.no_auth_user is not None:
            self.check_no_auth_user(self.no_auth_user)

    def check_no_auth_user(self, name: str) -> None:
        """`name` (the server's or a WebSocket listener's `no_auth_user`) is one of these
        users or nkeys: nats-server's `validateNoAuthUser`, in its words."""
        if not self.users and not self.nkeys:
            raise ConfigError(f'no_auth_user: "{name}" present, but users/nkeys are not defined')
        if name not in {u.user for u in self.users} | {n.nkey for n in self.nkeys}:
            raise ConfigError(
                f'no_auth_user: "{name}" not present as user or nkey in authorization '
                "block or account configuration"
            )


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


@dataclass(slots=True)
class WebSocketSettings:
    """nats-server's `websocket {}` block: a second listener whose clients speak NATS in
    WebSocket binary frames (server/websocket.py). Off while `port` is 0."""

    port: int = 0  # 0: no WebSocket listener; -1: any free port
    host: str = limits.DEFAULT_HOST  # nats-server's default, not the client port's host
    no_tls: bool = False  # nats-server refuses a listener without TLS unless this is set
    # `wss://`: the block's own `tls {}` (read as the client port's); it wins over no_tls.
    tls: TLSSettings | None = None
    same_origin: bool = False  # a browser's Origin must be the request's own host
    allowed_origins: list[str] = field(default_factory=list)  # else any Origin
    compression: bool = False  # permessage-deflate, when the client offers it
    headers: dict[str, str] = field(default_factory=dict)  # added to the upgrade's 101
    # The block's own `authorization { user, password | token, timeout }`: WebSocket
    # clients authenticate against it instead of the server's, as in nats-server.
    auth: AuthSettings | None = None
    auth_timeout_s: float | None = None  # None: the server's auth_timeout
    # A user of the server's users list whom WebSocket clients without credentials log in
    # as, instead of the server's no_auth_user (nats-server's override).
    no_auth_user: str | None = None
    # The host[:port] nats-server would gossip to a cluster as this listener's URL; a
    # single server only shows it in /varz, and checks it as nats-server does.
    advertise: str = ""
    handshake_timeout_s: float = 0.0  # the TLS handshake and the upgrade request; 0: none
    ping_interval_s: float | None = None  # NATS PINGs to WebSocket clients; None: the server's
    # Cookies of the upgrade request that stand in for CONNECT's user, pass, auth_token
    # and (operator mode only) jwt when CONNECT has none (browsers cannot set credentials
    # any other way).
    user_cookie: str = ""
    pass_cookie: str = ""
    token_cookie: str = ""
    jwt_cookie: str = ""

    def validate(self, server_auth: AuthSettings, *, operator_mode: bool = False) -> None:
        """nats-server's `validateWebsocketOptions`, in its words; `operator_mode`: the
        server trusts operators (JWT logins)."""
        if not -1 <= self.port <= 65535:
            raise ConfigError(f"websocket.port: {self.port} is not a TCP port")
        if self.port == 0:
            return
        if self.tls is None and not self.no_tls:
            raise ConfigError("websocket requires TLS configuration")
        for origin in self.allowed_origins:
            parts = urllib.parse.urlsplit(origin)
            if parts.scheme not in ("http", "https"):
                raise ConfigError(
                    f"unable to parse allowed origin {origin!r}: allowed origins must be "
                    "absolute URLs with http or https scheme"
                )
            if not parts.netloc:
                raise ConfigError(f"unable to parse allowed origin {origin!r}: host is required")
        for name in self.headers:
            low = name.lower()
            if low in ("host", "content-length", "connection", "upgrade", "nats-no-masking"):
                raise ConfigError(f'websocket: invalid header "{name}" not allowed')
            if low.startswith("sec-websocket-"):
                raise ConfigError(
                    f'websocket: invalid header "{name}", "Sec-WebSocket-" prefix not allowed'
                )
        if self.no_auth_user is not None:
            server_auth.check_no_auth_user(self.no_auth_user)
        if self.jwt_cookie and not operator_mode:
            raise ConfigError(
                "trusted operators or trusted keys configuration is required for JWT "
                f'authentication via cookie "{self.jwt_cookie}"'
            )
        if self.advertise:
            advertised_host_port(self.advertise, self.port)
        if self.auth is not None and server_auth.users:
            if self.auth.users:
                raise ConfigError(
                    "websocket authentication username not compatible with presence of users/nkeys"
                )
            if self.auth.token is not None:
                raise ConfigError(
                    "websocket authentication token not compatible with presence of users/nkeys"
                )


def advertised_host_port(text: str, default_port: int) -> tuple[str, int]:
    """An `advertise` value as nats-server's `parseHostPort` reads it: `host[:port]`, the
    port defaulting to the listener's; an error in its words."""
    text = text.strip()
    host, sep, port = text.rpartition(":")
    if not sep or host.endswith(":") or (host.startswith("[") and not host.endswith("]")):
        host, port = text, ""  # no port, or an IPv6 address without brackets
    host = host.removeprefix("[").removesuffix("]")
    if not port:
        return host, default_port
    if not port.isdigit() and not (port.startswith("-") and port[1:].isdigit()):
        raise ConfigError(
            f'Unable to get websocket connect URLs: strconv.Atoi: parsing "{port}": invalid syntax'
        )
    number = int(port)
    return host, default_port if number in (0, -1) else number


@dataclass(slots=True)
class TLSSettings:
    """The client port's `tls {}` block (nats-server's names; server/tls.py builds the
    context). `verify_and_map` implies `verify`, as there."""

    cert_file: str = ""
    key_file: str = ""
    ca_file: str = ""
    verify: bool = False
    verify_and_map: bool = False
    timeout_s: float = limits.TLS_TIMEOUT_S
    handshake_first: bool = False
    # With handshake_first: a client silent this long gets INFO in plain text and then
    # the port's usual TLS (nats-server's fallback delay, `auto` or a duration); 0: none.
    handshake_first_fallback_s: float = 0.0
    min_version: str = "1.2"  # "1.2" or "1.3": nats-server refuses anything older
    # hex SHA-256 of each accepted peer's DER SubjectPublicKeyInfo, lower case; empty: any
    pinned_certs: frozenset[str] = frozenset()

    def validate(self, where: str) -> None:
        if not self.cert_file or not self.key_file:
            missing = "cert_file" if not self.cert_file else "key_file"
            raise ConfigError(f"{where}: missing '{missing}' in TLS configuration")
        if self.timeout_s <= 0:
            raise ConfigError(f"{where}.timeout: must be a positive duration")


def default_store_dir() -> str:
    """Where JetStream keeps its data when no `store_dir` is set: nats-server's rule (a
    directory under the system's temporary directory, `$TMPDIR` or /tmp), in a directory
    named for Brook, whose on-disk format is its own (ADR 0010). The server warns, as
    nats-server does, that such data can be lost on reboot."""
    return os.path.join(tempfile.gettempdir(), "brook", "jetstream")


@dataclass(frozen=True, slots=True)
class JetStreamAccountLimits:
    """An account's JetStream limits (nats-server's `JetStreamAccountLimits`), named as
    `$JS.API.INFO` reports them; -1: no limit. Enforced by jetstream/quota.py."""

    max_memory: int = -1
    max_storage: int = -1
    max_streams: int = -1
    max_consumers: int = -1
    max_ack_pending: int = -1
    memory_max_stream_bytes: int = -1
    storage_max_stream_bytes: int = -1
    max_bytes_required: bool = False

    def to_json(self) -> dict[str, int | bool]:
        return dataclasses.asdict(self)

    def max_bytes(self, storage: str) -> int:
        """The account's limit on the bytes of streams of `storage` ("memory", "file")."""
        return self.max_memory if storage == "memory" else self.max_storage


@dataclass(slots=True)
class JetStreamSettings:
    enabled: bool = False
    store_dir: str | None = None  # None: default_store_dir(); never memory for file streams
    max_memory_store_bytes: int = -1  # -1 = no account limit
    max_file_store_bytes: int = -1
    # 0 ("always"): every PubAck waits for an fsync covering its message (group commit).
    # > 0: nats-server's interval mode: acknowledge after the write, fsync every N seconds;
    # faster, but a power loss can drop acknowledged messages (docs/adr/0004).
    sync_interval_s: float = 0.0
    # The least time between two writes of a durable consumer's state, unless an ack
    # waits for one (ack_sync): 0 writes every change as soon as the last write is done.
    consumer_flush_interval_s: float = limits.CONSUMER_FLUSH_INTERVAL_S
    # Stream restores: the largest upload (-1: no limit) and the longest wait for a chunk.
    restore_max_bytes: int = limits.RESTORE_MAX_BYTES
    restore_idle_timeout_s: float = limits.RESTORE_IDLE_TIMEOUT_S
    # Free space kept on the store's filesystem: file-stream publishes are refused (10023)
    # below it. -1: the smaller of 64 MiB and a twentieth of the filesystem.
    free_space_reserve_bytes: int = -1
    # File-stream PubAcks waiting for their fsync, across all streams, before publishing
    # connections stop being read (jetstream/backlog.py). 0: no bound.
    max_acks_awaiting_sync: int = limits.MAX_ACKS_AWAITING_SYNC
    # Batch publishes (nats-server's `limits { batch { ... } }`; jetstream/batch.py and
    # fast_batch.py): messages per atomic batch, batches in flight per stream and per
    # server (None: nats-server's defaults, which differ for atomic and fast batches; a
    # value bounds both kinds, as there), idle time per batch.
    batch_max_msgs: int = limits.ATOMIC_BATCH_SIZE_MAX
    batch_max_inflight_per_stream: int | None = None
    batch_max_inflight_total: int | None = None
    batch_timeout_s: float = limits.ATOMIC_BATCH_TIMEOUT_NS / 1e9
    # The JetStream domain (`domain`): its API answered under `$JS.<domain>.API.>` too, and
    # named in account info, stream info and PubAcks. "": none.
    domain: str = ""

    @property
    def store_path(self) -> str:
        """The directory JetStream uses: `store_dir`, or the default when it is unset."""
        return self.store_dir or default_store_dir()


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
    users: list[LeafUser] = field(default_factory=list)
    # `authorization { nkey }`: a spoke signing the nonce with this user key logs in,
    # bound to `nkey_account` (a user of `users` named in `authorization` goes first).
    nkey: str = ""
    nkey_account: str = GLOBAL_ACCOUNT
    auth_timeout_s: float = limits.AUTH_TIMEOUT_S
    tls: TLSSettings | None = None  # the listener's: spokes start TLS after its INFO

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

    def validate(self, account_names: set[str], server_auth: bool) -> None:
        """Accounts exist; a hub without its own authorization on a server whose clients
        log in would let nats-server check spokes against the clients' users, which
        Brook does not do yet."""
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
        if self.port and not self.users and not self.nkey and server_auth:
            raise ConfigError(
                "leafnodes.authorization: a leafnode listener without its own authorization"
                " on a server with users (spokes logging in as clients): not supported by Brook"
            )


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
    debug: bool = False
    trace: bool = False

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
        self.leafnodes.validate(names, self.auth.required or bool(self.operator.jwts))

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
        for name in ("ping_interval_s", "write_deadline_s"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name.removesuffix('_s')}: must be a positive duration")
        if self.auth_timeout_s < 0:
            raise ConfigError("auth_timeout: must be a positive duration (0: the default)")
        if not 0 <= self.jetstream.consumer_flush_interval_s <= 60:
            raise ConfigError("jetstream.consumer_flush_interval: must be 0 to 60 seconds")
        if self.jetstream.free_space_reserve_bytes < -1:
            raise ConfigError("jetstream.free_space_reserve: must be a size (0 for none)")
        if domain := self.jetstream.domain:  # nats-server's validateJetStreamOptions
            api = f"$JS.{domain}.API.>"
            if not is_valid_subject(api.encode()):
                raise ConfigError(f'invalid domain name: derived "{api}" is not a valid subject')
            if any(c in domain for c in " \t\r\n\f.*>"):
                raise ConfigError("invalid domain name: may not contain ., * or >")
        if self.jetstream.max_acks_awaiting_sync < 0:
            raise ConfigError("jetstream.max_acks_awaiting_sync: must be 0 (no bound) or positive")
        for name in ("batch_max_msgs", "batch_max_inflight_per_stream", "batch_max_inflight_total"):
            value = getattr(self.jetstream, name)
            if value is not None and value <= 0:
                raise ConfigError(
                    f"jetstream.limits.batch.{name.removeprefix('batch_')}: must be positive"
                )
        if self.jetstream.batch_timeout_s <= 0:
            raise ConfigError("jetstream.limits.batch.timeout: must be a positive duration")
        if self.jetstream.sync_interval_s < 0:
            raise ConfigError("jetstream.sync_interval: must be 'always' or a positive duration")
        if self.jetstream.restore_max_bytes == 0 or self.jetstream.restore_max_bytes < -1:
            raise ConfigError("jetstream.restore_max_bytes: must be positive, or -1 for no limit")
        if not 0 < self.jetstream.restore_idle_timeout_s <= 3600:
            raise ConfigError("jetstream.restore_idle_timeout: must be above 0, at most 1 hour")
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
