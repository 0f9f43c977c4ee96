"""What the server tells monitoring: plain-data snapshots, and the monitor's place in it.

Monitoring sits above the server (docs/architecture.md) yet must not reach into its
objects: `brook.monitor` builds its documents (`/varz`, `/connz` ...) from the snapshots a
`StatisticsFeed` returns and never imports `Server` or `ClientConnection`, and the server
never imports `brook.monitor`. Whoever composes them (`brook.serve()`, `brook serve`) hands
the server a `MonitorFactory`; the server calls it with itself, as a `StatisticsFeed`, when
`http_port` is set. Each snapshot is taken when asked, on the event loop, so it is
consistent with itself.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypedDict

from brook.config.settings import ExportSettings, ImportSettings, Settings
from brook.routing.internal import InternalClient
from brook.server.tls import PeerCertificate

__all__ = [
    "AccountSnapshot",
    "ClosedConnection",
    "ConnectionSnapshot",
    "JetStreamAccountReport",
    "JetStreamAssets",
    "Monitor",
    "MonitorFactory",
    "ServerFeed",
    "ServerStatistics",
    "StatisticsFeed",
    "StreamReport",
    "SublistSnapshot",
    "SubscriptionSnapshot",
    "SystemBus",
    "SystemFactory",
    "SystemServices",
    "UserSnapshot",
]


class ServerStatistics(TypedDict):
    """The server's identity and counters at one moment (`Server.statistics()`)."""

    server_id: str
    server_name: str
    port: int
    websocket_port: int  # the WebSocket listener's port; 0 without one
    started_at: float  # Unix time
    config_loaded_at: float  # Unix time: the start, or the last config reload (/varz)
    connections: int
    total_connections: int
    in_msgs: int
    in_bytes: int
    out_msgs: int
    out_bytes: int
    slow_consumers: int
    stale_connections: int  # clients closed for not answering PINGs
    auth_required: bool  # the client port's INFO says so
    pinned_account_fails: int  # JWT logins refused: their account not pinned (ADR 0033)
    subscriptions: int
    pid: int
    transfers: dict[str, Any] | None  # snapshots and restores in progress; None without JetStream
    store: dict[str, Any] | None  # the file store's space and damage; None without a store_dir
    commits: (
        dict[str, Any] | None
    )  # PubAcks awaiting their fsync, and the bound; None without JetStream
    batches: dict[str, int] | None  # atomic batches staged, their limits; None without JetStream
    # JetStream's usage and API counters (`/varz` `jetstream.stats`); None without JetStream.
    jetstream_stats: dict[str, Any] | None
    # Each account's JetStream usage, reservations and limits (`$JS.API.INFO` without
    # `api`), by account name; None without JetStream.
    jetstream_accounts: dict[str, dict[str, Any]] | None
    leafnodes: int  # leafnode connections, either role
    leafnode_port: int  # the leafnode listener's; 0 without one
    # in_msgs, in_bytes, out_msgs, out_bytes of leafnode connections (closed ones too),
    # which nats-server's server totals include besides the clients' above
    leaf_traffic: tuple[int, int, int, int]


@dataclass(frozen=True, slots=True)
class ConnectionSnapshot:
    """One client connection; field names are those `/connz` sorts by."""

    cid: int
    host: str
    port: int
    started_at: float  # Unix time
    last_activity: float  # Unix time of the last bytes received
    rtt_s: float | None  # None until a PONG answered the server's PING
    pending_bytes: int
    in_msgs: int
    in_bytes: int
    out_msgs: int
    out_bytes: int
    subs: int
    name: str
    lang: str
    version: str
    authorized_user: str  # nats-server's raw auth user (shown with auth=true); "" for none
    tls_version: str = ""  # "1.2" or "1.3" once a TLS handshake is done; "" in plain text
    tls_cipher_suite: str = ""  # Go's name of it, as nats-server shows it
    tls_first: bool = False  # the handshake came before INFO (handshake_first)
    tls_peer_certs: tuple[PeerCertificate, ...] = ()  # what the client presented
    account: str = "$G"  # the account it logged in to
    kind: str = "Client"  # nats-server's `kind` in `/connz`: "Client" or "Leafnode"
    close_reason: str = ""  # why it closed, once it has (Brook's words)
    # nats-server's `issuerForClient`: an nkey user's account, or the key that issued
    # a user JWT; "" for other users.
    issuer_key: str = ""
    jwt: str = ""  # a JWT login's user JWT (a bearer token or not) and its tags
    bearer: bool = False
    tags: tuple[str, ...] = ()
    name_tag: str = ""  # the account JWT's name, else the account's


@dataclass(frozen=True, slots=True)
class ClosedConnection:
    """A client or leafnode connection that has closed, as `/connz?state=closed` lists
    it: the connection as it was at its close, when, and the subscriptions it had then
    (a leaf's: the interest the other side showed)."""

    connection: ConnectionSnapshot | LeafSnapshot
    stopped_at: float  # Unix time
    subscriptions: tuple[SubscriptionSnapshot, ...]


@dataclass(frozen=True, slots=True)
class LeafSnapshot:
    """One leafnode connection (`/leafz`, ADR 0032)."""

    cid: int
    name: str  # the server at the other end
    is_spoke: bool  # this side dialled (a remote of `leafnodes { remotes }`)
    account: str
    ip: str
    port: int
    rtt_s: float | None
    in_msgs: int
    out_msgs: int
    in_bytes: int
    out_bytes: int
    subscriptions: tuple[str, ...]  # the subjects of the interest the other side showed
    # What `/connz` shows of it (nats-server lists leafs with its clients): its interest
    # as subscriptions, the wall-clock start, and the CONNECT's `name`, `version` and
    # login (nkey, else user), which only the accepting side has ("" on the spoke's).
    interest: tuple[SubscriptionSnapshot, ...] = ()
    started_at: float = 0.0
    last_activity: float = 0.0  # wall-clock time of the last bytes read
    pending_bytes: int = 0
    tls_version: str = ""  # "1.3", as for a client; "" in plain text
    tls_cipher_suite: str = ""
    tls_peer_certs: tuple[PeerCertificate, ...] = ()  # what the other side presented
    connect_name: str = ""
    connect_version: str = ""
    connect_user: str = ""
    close_reason: str = ""  # why it closed, once it has


@dataclass(frozen=True, slots=True)
class SubscriptionSnapshot:
    subject: str
    queue: str  # "" outside a queue group
    sid: str
    msgs: int  # delivered so far
    max: int  # auto-unsubscribe after this many; 0 for none
    cid: int = 0  # the client's; 0 for the server's own subscribers (JetStream, $SYS)
    account: str = ""  # the account whose subject space holds it


@dataclass(frozen=True, slots=True)
class SublistSnapshot:
    """One account's subscription index (`/subsz`, `/accountz`): nats-server's
    `SublistStats` as counts (`Sublist.statistics()`), and its subscriptions when asked."""

    account: str
    stats: Mapping[str, int]
    subscriptions: list[SubscriptionSnapshot]  # empty unless asked for


@dataclass(frozen=True, slots=True)
class JetStreamAssets:
    """What `/healthz` checks: the store's stream directories against the open streams.

    The collections are read-only views of the engine's own, valid while the probe runs.
    """

    account: str
    root: Path  # the directory of its file streams
    streams: Collection[str]  # streams open and served
    consumers: Mapping[str, Collection[str]]  # consumer names by stream


@dataclass(frozen=True, slots=True)
class StreamReport:
    """One stream for `/jsz`: nats-server's `StreamDetail` as JSON but its consumers (name,
    created, cluster, config when asked, state, mirror, sources), and its consumers'
    infos (the public ones, and the direct ones of mirrors and sources apart) when asked."""

    detail: dict[str, Any]
    consumers: list[dict[str, Any]]
    direct_consumers: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class JetStreamAccountReport:
    """One account's JetStream for `/jsz`: usage, API counters, the totals of its streams,
    and the streams themselves when asked."""

    name: str
    memory: int
    storage: int
    reserved_memory: int  # the account's limits; -1 for none
    reserved_storage: int
    api_total: int
    api_errors: int
    streams: int
    consumers: int
    messages: int
    bytes: int
    details: list[StreamReport]


@dataclass(frozen=True, slots=True)
class UserSnapshot:
    """Who a connection logged in as (`$SYS.REQ.USER.INFO`): nats-server's `UserInfo`
    fields; `permissions` is its public form of the user's permissions, None for none."""

    user: str
    account: str
    permissions: dict[str, Any] | None
    account_name: str  # the account JWT's name, else the account's
    user_name: str = ""  # the user JWT's name
    expires_ns: int = 0  # until its login ends, in whole seconds; 0: never


@dataclass(frozen=True, slots=True)
class AccountSnapshot:
    """One account (`/accountz`, `$SYS.REQ.ACCOUNT.<a>.INFO`)."""

    name: str
    system: bool  # the system account
    jetstream: bool
    clients: int
    updated_at: float  # Unix time of its configuration
    system_services: bool  # the system account's services run (their imports and exports)
    # in_msgs, in_bytes, out_msgs, out_bytes of its connections that have closed
    closed_traffic: tuple[int, ...] = (0, 0, 0, 0)
    # Its subject mappings: source -> (destination, cumulative weight), in their order.
    mappings: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    leafnodes: int = 0  # its leafnode connections
    # in_msgs, in_bytes, out_msgs, out_bytes of its leafnode connections, closed included
    leaf_traffic: tuple[int, int, int, int] = (0, 0, 0, 0)
    jwt: AccountJwtSnapshot | None = None  # a JWT account's (operator mode)


@dataclass(frozen=True, slots=True)
class AccountJwtSnapshot:
    """What `/accountz` shows of an account JWT (ADR 0034): the token, its issuer, name
    and tags, the users it revokes, and its exports and the imports linked from it."""

    token: str
    issuer: str
    name: str
    tags: tuple[str, ...]
    revocations: dict[str, int]
    exports: list[ExportSettings]
    imports: list[ImportSettings]
    complete: bool  # every import it declares linked


class StatisticsFeed(Protocol):
    """What monitoring may ask of a server: settings and snapshots, nothing live."""

    @property
    def settings(self) -> Settings: ...

    @property
    def server_id(self) -> str: ...

    def statistics(self) -> ServerStatistics: ...

    def connections(self) -> list[ConnectionSnapshot]: ...

    def subscriptions(self, cid: int) -> list[SubscriptionSnapshot]: ...

    def leaf_connections(self) -> list[LeafSnapshot]: ...

    def closed_connections(self) -> list[ClosedConnection]:
        """The most recently closed client connections, oldest first (at most
        `max_closed_clients`)."""
        ...

    def jetstream_assets(self) -> list[JetStreamAssets] | None:
        """Each account's JetStream assets (None when JetStream is off)."""
        ...

    def jetstream_accounts(
        self, *, streams: bool = False, consumers: bool = False, config: bool = False
    ) -> list[JetStreamAccountReport] | None:
        """Each account's JetStream (None when JetStream is off), with its streams when
        `streams`, their consumers when `consumers`, configurations when `config`."""
        ...

    def account_snapshots(self) -> list[AccountSnapshot]:
        """Every account, the system account included."""
        ...

    def requester(self, account: str, reply: bytes) -> UserSnapshot | None:
        """The client of `account` that awaits replies on `reply` (the one that sent a
        request there), if exactly one client does."""
        ...

    def sublists(self, account: str = "", *, details: bool = False) -> list[SublistSnapshot]:
        """Each account's subscription index (only `account`'s when given), with every
        subscription in it when `details`."""
        ...


class Monitor(Protocol):
    """The monitoring listener as the server starts, stops and reports it."""

    async def start(self, sock: socket.socket) -> None: ...

    async def stop(self) -> None: ...

    def reachable_urls(self) -> list[str]: ...


MonitorFactory = Callable[[StatisticsFeed], Monitor]


@dataclass(frozen=True, slots=True)
class SystemBus:
    """Where the system account's services speak (ADR 0029): an in-process client in the
    system account's subject space, and one in each other account's, through which that
    account reaches the services nats-server imports into every account."""

    system_account: str
    system: InternalClient
    imports: dict[str, InternalClient]  # by account name; accounts added later too


class SystemServices(Protocol):
    """nats-server's `$SYS` requests and events, as the server starts, stops and tells them."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def client_connected(self, client: ConnectionSnapshot) -> None: ...

    def client_closed(self, client: ConnectionSnapshot) -> None: ...

    def server_info(self) -> dict[str, Any]:
        """nats-server's `ServerInfo` of a `$SYS` reply (its sequence number the next)."""
        ...

    def server_event(self, kind: str) -> None:
        """`$SYS.SERVER.<id>.<kind>`: `LAMEDUCK` on entering lame-duck mode, `SHUTDOWN`
        as a shutdown begins (nats-server's `ServerInfo` as the payload)."""

    def add_account(self, name: str, client: InternalClient) -> None:
        """An account added while the server runs: the services imported into it,
        through `client` (its own); once per account."""


class ServerFeed(StatisticsFeed, Protocol):
    """What the system services may ask of a server: its snapshots, a config reload
    (`$SYS.REQ.SERVER.<id>.RELOAD`, ADR 0042), a connection closed or told of lame-duck
    mode (`KICK`, `LDM`)."""

    def reload(self) -> None:
        """Reload the configuration; `ConfigError` with the reason when refused."""
        ...

    def kick(self, cid: int) -> None:
        """Close client or leaf connection `cid` (`$SYS.REQ.SERVER.<id>.KICK`); LookupError
        with nats-server's text when there is none."""
        ...

    def lame_duck_client(self, cid: int) -> None:
        """Send client `cid` lame-duck mode's INFO (`$SYS.REQ.SERVER.<id>.LDM`);
        LookupError with nats-server's text when it cannot."""
        ...


SystemFactory = Callable[[ServerFeed, SystemBus], SystemServices]
