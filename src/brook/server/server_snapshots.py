"""What monitoring reads of a `Server` (`ServerSnapshots`, a part of `Server`: ADR 0031):
its statistics and traffic totals, its clients', subscriptions', leaf connections' and
accounts' plain-data snapshots (`server/statistics.py`), the JetStream usage of every
account, and who sent a request (`$SYS.REQ.USER.INFO`). Monitoring gets them through
the `StatisticsFeed` protocol, never the server's objects (ADR 0016)."""

from __future__ import annotations

import collections
import dataclasses
import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from brook import limits
from brook.routing.sublist import Subscription
from brook.server.connection import ClientConnection
from brook.server.permissions import public_permissions
from brook.server.statistics import (
    AccountJwtSnapshot,
    AccountSnapshot,
    ClosedConnection,
    ConnectionSnapshot,
    JetStreamAccountReport,
    JetStreamAssets,
    LeafSnapshot,
    ServerStatistics,
    StreamReport,
    SublistSnapshot,
    SubscriptionSnapshot,
    UserSnapshot,
)
from brook.server.tls import PeerCertificate, cipher_suite_name, peer_certificates

if TYPE_CHECKING:
    from brook.config.settings import Settings
    from brook.jetstream.backlog import CommitBacklog
    from brook.leafnode.connection import LeafConnection
    from brook.leafnode.manager import LeafNodes
    from brook.server.accounts import Account, Accounts
    from brook.server.auth import Authenticator
    from brook.server.statistics import SystemServices
    from brook.server.websocket import WebSocketListener


def _subscription_snapshot(sub: Subscription, cid: int, account: str = "") -> SubscriptionSnapshot:
    return SubscriptionSnapshot(
        subject=sub.subject.decode("utf-8", "replace"),
        queue=sub.queue.decode("utf-8", "replace") if sub.queue else "",
        sid=sub.sid.decode("utf-8", "replace"),
        msgs=sub.delivered,
        max=sub.max_msgs,
        cid=cid,
        account=account,
    )


def _leaf_snapshot(c: LeafConnection) -> LeafSnapshot:
    interest = c.interest()
    connect = {} if c.solicited else c.remote.info  # as nats-server's `c.opts`: the spoke's
    ssl_object = c.transport.get_extra_info("ssl_object") if c.transport is not None else None
    tls: tuple[str, str, tuple[PeerCertificate, ...]] = ("", "", ())
    if ssl_object is not None:  # a TLS leaf: its session as a client's (server/tls.py)
        version = (ssl_object.version() or "").removeprefix("TLSv")
        tls = (version, cipher_suite_name(ssl_object), peer_certificates(ssl_object))
    now = time.time()
    return LeafSnapshot(
        cid=c.cid,
        name=c.remote.name,
        is_spoke=c.solicited,
        account=c.leafs.account,
        ip=c.peer[0],
        port=c.peer[1],
        rtt_s=c.rtt_s,
        in_msgs=c.counters.in_msgs,
        out_msgs=c.counters.out_msgs,
        in_bytes=c.counters.in_bytes,
        out_bytes=c.counters.out_bytes,
        subscriptions=tuple(sub.subject.decode() for sub in interest),
        interest=tuple(_subscription_snapshot(sub, c.cid, c.leafs.account) for sub in interest),
        # the connection's times are event-loop times; `/connz` shows wall-clock ones
        started_at=now - (c.loop.time() - c.started_at),
        last_activity=now - (c.loop.time() - c.last_in),
        pending_bytes=c.pending_bytes,
        tls_version=tls[0],
        tls_cipher_suite=tls[1],
        tls_peer_certs=tls[2],
        connect_name=str(connect.get("name") or ""),
        connect_version=str(connect.get("version") or ""),
        connect_user=str(connect.get("nkey") or connect.get("user") or ""),  # `getRawAuthUser`
        close_reason=c.close_reason,
    )


class ServerSnapshots:
    """`Server`'s monitoring part (a mixin, ADR 0031)."""

    if TYPE_CHECKING:  # what it uses of `Server`, which sets all of it
        settings: Settings
        server_id: str
        server_name: str
        port: int
        started_at: float
        config_loaded_at: float
        accounts: Accounts
        authenticator: Authenticator
        clients: dict[int, ClientConnection]
        websocket: WebSocketListener | None
        leafnodes: LeafNodes | None
        system: SystemServices | None
        commit_backlog: CommitBacklog | None
        transfers: Any
        slow_consumers: int
        stale_connections: int
        total_connections: int
        closed_clients: collections.deque[ClosedConnection]
        _closed_traffic: list[int]
        _closed_by_account: dict[str, list[int]]

    def statistics(self) -> ServerStatistics:
        accounts = self.accounts
        operator = self.authenticator.operator
        jetstream = bool(accounts.with_jetstream)
        return {
            "server_id": self.server_id,
            "server_name": self.server_name,
            "port": self.port,
            "websocket_port": self.websocket.port if self.websocket is not None else 0,
            "started_at": self.started_at,
            "config_loaded_at": self.config_loaded_at,
            "connections": len(self.clients),
            "total_connections": self.total_connections,
            "in_msgs": self.in_msgs,
            "in_bytes": self.in_bytes,
            "out_msgs": self.out_msgs,
            "out_bytes": self.out_bytes,
            "slow_consumers": self.slow_consumers,
            "stale_connections": self.stale_connections,
            "auth_required": self.authenticator.advertised,
            "pinned_account_fails": operator.pinned_fails if operator is not None else 0,
            "subscriptions": sum(a.router.sublist.count for a in accounts),
            "pid": os.getpid(),
            "transfers": self.transfers.statistics() if self.transfers is not None else None,
            "store": (
                accounts.store_statistics()
                if jetstream and self.settings.jetstream.store_dir
                else None
            ),
            "commits": (
                self.commit_backlog.statistics() if self.commit_backlog is not None else None
            ),
            "batches": (
                accounts.batch_limits.statistics()
                if jetstream and accounts.batch_limits is not None
                else None
            ),
            "jetstream_stats": self._jetstream_stats() if jetstream else None,
            "jetstream_accounts": accounts.jetstream_accounts() if jetstream else None,
            "leafnodes": len(self.leaf_connections()),
            "leafnode_port": self.leafnodes.port if self.leafnodes is not None else 0,
            "leaf_traffic": self._leaf_traffic(),
        }

    def _leaf_traffic(self, account: str | None = None) -> tuple[int, int, int, int]:
        """Leafnode traffic over every account (or `account`'s), closed connections too."""
        totals = [0, 0, 0, 0]
        if self.leafnodes is not None:
            for name, leafs in self.leafnodes.accounts.items():
                if account is None or name == account:
                    for i, n in enumerate(leafs.traffic()):
                        totals[i] += n
        return totals[0], totals[1], totals[2], totals[3]

    def _jetstream_stats(self) -> dict[str, Any]:
        """JetStream's usage and API counters over every account, as nats-server's `/varz`
        `jetstream.stats`."""
        accounts = self.accounts
        server = accounts.server_limits
        assert server is not None  # JetStream has started
        total, errors = accounts.api_counters()
        return {
            "memory": server.used_bytes("memory"),
            "storage": server.used_bytes("file"),
            "reserved_memory": server.reserved_bytes("memory"),
            "reserved_storage": server.reserved_bytes("file"),
            "accounts": len(accounts.with_jetstream),
            "ha_assets": 0,
            "api": {"level": limits.JETSTREAM_API_LEVEL, "total": total, "errors": errors},
        }

    def connections(self) -> list[ConnectionSnapshot]:
        """Every registered client connection, in no particular order."""
        return [self._connection_snapshot(c) for c in self.clients.values()]

    def _connection_snapshot(self, c: ClientConnection) -> ConnectionSnapshot:
        return ConnectionSnapshot(
            cid=c.cid,
            host=c.host,
            port=c.port,
            started_at=c.started_at,
            last_activity=c.last_activity,
            rtt_s=c.rtt_s,
            pending_bytes=c.pending_bytes,
            in_msgs=c.in_msgs,
            in_bytes=c.in_bytes,
            out_msgs=c.out_msgs,
            out_bytes=c.out_bytes,
            subs=len(c.subs),
            name=c.name,
            lang=c.lang,
            version=c.version,
            authorized_user=c.auth_user,
            tls_version=c.tls_version,
            tls_cipher_suite=c.tls_cipher_suite,
            tls_first=c.tls_first,
            tls_peer_certs=c.peer_certificates,
            account=c.account.name,
            close_reason=c.close_reason,
            issuer_key=c.issuer_key,
            jwt=c.jwt_user.token if c.jwt_user is not None else "",
            bearer=c.jwt_user is not None and c.jwt_user.bearer,
            tags=c.jwt_user.tags if c.jwt_user is not None else (),
            name_tag=self._name_tag(c.account.name),
        )

    def _name_tag(self, account: str) -> str:
        """nats-server's `getNameTag`: the account JWT's name, else the account's."""
        operator = self.authenticator.operator
        claims = operator.claims(account) if operator is not None else None
        return claims.name if claims is not None and claims.name else account

    def account_snapshots(self) -> list[AccountSnapshot]:
        clients: dict[str, int] = {}
        for c in self.clients.values():
            if c.connected:
                clients[c.account.name] = clients.get(c.account.name, 0) + 1
        leafnodes: dict[str, int] = {}
        for leaf in self.leaf_connections():
            leafnodes[leaf.account] = leafnodes.get(leaf.account, 0) + 1
        return [
            AccountSnapshot(
                name=a.name,
                system=a.is_system,
                jetstream=a.jetstream is not None,
                clients=clients.get(a.name, 0),
                updated_at=self.started_at,
                system_services=self.system is not None,
                closed_traffic=tuple(self._closed_by_account.get(a.name, (0, 0, 0, 0))),
                mappings=a.mappings.describe() if a.mappings is not None else {},
                leafnodes=leafnodes.get(a.name, 0),
                leaf_traffic=self._leaf_traffic(a.name),
                jwt=self._account_jwt(a.name),
            )
            for a in self.accounts
        ]

    def _account_jwt(self, account: str) -> AccountJwtSnapshot | None:
        operator = self.authenticator.operator
        claims = operator.claims(account) if operator is not None else None
        if claims is None:
            return None
        exports, imports, complete = self.accounts.links.jwt_links(account)
        return AccountJwtSnapshot(
            claims.token,
            claims.issuer,
            claims.name,
            claims.tags,
            claims.revocations,
            exports,
            imports,
            complete,
        )

    def requester(self, account: str, reply: bytes) -> UserSnapshot | None:
        where = self.accounts.get(account)
        if where is None:
            return None
        result = where.router.sublist.match(reply)
        subscribers = {s.client for s in result.plain}
        subscribers.update(m.client for members in result.queues for m in members)
        clients = [c for c in subscribers if isinstance(c, ClientConnection)]
        if len(clients) != 1:
            return None
        client = clients[0]
        account_name = client.account.name
        user = client.jwt_user
        if user is None:
            entry = client.login.entry if client.login is not None else None
            perms = entry.permissions if entry is not None else None
            return UserSnapshot(
                user=client.user,
                account=account_name,
                permissions=public_permissions(perms) if perms is not None else None,
                account_name=account_name,
            )
        # A JWT login (nats-server's `UserInfo` from the client's JWT state): the names
        # of the user and account JWTs (nats-server's name tags), and the whole seconds
        # until the login ends (`claimExpiration`).
        left_ns = 0
        if user.user_ends_at is not None:
            left_ns = int(max(user.user_ends_at - time.time(), 0.0)) * 1_000_000_000
        return UserSnapshot(
            user=client.user,
            account=account_name,
            permissions=(
                public_permissions(user.permissions) if user.permissions is not None else None
            ),
            account_name=self._name_tag(account_name),
            user_name=user.name,
            expires_ns=left_ns,
        )

    def closed_connections(self) -> list[ClosedConnection]:
        return list(self.closed_clients)

    def _closed_connection(
        self, c: ClientConnection, subs: Mapping[bytes, Subscription]
    ) -> ClosedConnection:
        """`c`, which has just closed with `subs`, as the closed-connections ring keeps it."""
        return ClosedConnection(
            connection=dataclasses.replace(self._connection_snapshot(c), subs=len(subs)),
            stopped_at=time.time(),
            subscriptions=tuple(_subscription_snapshot(s, c.cid) for s in subs.values()),
        )

    def leaf_closed(self, c: LeafConnection) -> None:
        """Leafnode connection `c` has closed: keep it with the closed clients, as
        nats-server does."""
        leaf = _leaf_snapshot(c)
        self.closed_clients.append(ClosedConnection(leaf, time.time(), leaf.interest))

    def subscriptions(self, cid: int) -> list[SubscriptionSnapshot]:
        """The subscriptions of client `cid`, in the order it made them."""
        client = self.clients.get(cid)
        if client is None:
            return []
        return [_subscription_snapshot(s, cid) for s in client.subs.values()]

    def jetstream_accounts(
        self, *, streams: bool = False, consumers: bool = False, config: bool = False
    ) -> list[JetStreamAccountReport] | None:
        engines = self.accounts.with_jetstream
        if not engines:
            return None
        return [
            self._jetstream_account(a, streams=streams, consumers=consumers, config=config)
            for a in engines
        ]

    @staticmethod
    def _jetstream_account(
        account: Account, *, streams: bool, consumers: bool, config: bool
    ) -> JetStreamAccountReport:
        js, stream_api = account.jetstream, account.stream_api
        assert js is not None
        assert stream_api is not None
        memory, storage = js.usage()
        totals = [0, 0, 0, 0]  # streams, consumers, messages, bytes
        details = []
        for stream in js.streams.values():
            state = stream.store.state()
            totals[0] += 1
            totals[1] += stream.consumer_count
            totals[2] += state.messages
            totals[3] += state.bytes
            if not streams:
                continue
            public: list[dict[str, Any]] = []
            direct: list[dict[str, Any]] = []
            if consumers:
                for runner in js.consumers.get(stream.name, {}).values():
                    info = runner.info(server_version=None, api_level=limits.JETSTREAM_API_LEVEL)
                    if not config:
                        info.pop("config", None)
                    (direct if runner.config.direct else public).append(info)
            details.append(StreamReport(stream_api.detail(stream, config=config), public, direct))
        api = account.api
        return JetStreamAccountReport(
            name=account.name,
            memory=memory,
            storage=storage,
            # no account has JetStream limits of its own yet: nats-server's -1
            reserved_memory=-1,
            reserved_storage=-1,
            api_total=api.total if api is not None else 0,
            api_errors=api.errors if api is not None else 0,
            streams=totals[0],
            consumers=totals[1],
            messages=totals[2],
            bytes=totals[3],
            details=details,
        )

    def sublists(self, account: str = "", *, details: bool = False) -> list[SublistSnapshot]:
        out = []
        for each in self.accounts:
            if account and each.name != account:
                continue
            sublist = each.router.sublist
            subs = []
            if details:
                subs = [
                    _subscription_snapshot(s, getattr(s.client, "cid", 0), each.name)
                    for s in sublist.subscriptions()
                ]
            out.append(SublistSnapshot(each.name, sublist.statistics(), subs))
        return out

    def jetstream_assets(self) -> list[JetStreamAssets] | None:
        if not self.settings.jetstream.enabled:
            return None
        return [
            JetStreamAssets(a.name, js.root, js.streams.keys(), js.consumers)
            for a in self.accounts.with_jetstream
            if (js := a.jetstream) is not None
        ]

    def leaf_connections(self) -> list[LeafSnapshot]:
        if self.leafnodes is None:
            return []
        return [_leaf_snapshot(c) for c in self.leafnodes.connections()]

    def _traffic(self, index: int, attr: str) -> int:
        live: int = sum(getattr(c, attr) for c in self.clients.values())
        return self._closed_traffic[index] + live

    @property
    def in_msgs(self) -> int:
        return self._traffic(0, "in_msgs")

    @property
    def in_bytes(self) -> int:
        return self._traffic(1, "in_bytes")

    @property
    def out_msgs(self) -> int:
        return self._traffic(2, "out_msgs")

    @property
    def out_bytes(self) -> int:
        return self._traffic(3, "out_bytes")
