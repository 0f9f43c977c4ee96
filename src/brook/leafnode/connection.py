"""One leafnode connection (ADR 0032): the handshake, interest both ways, messages both
ways, keep-alive, loop detection. The soliciting side (a spoke dialling a hub:
`solicit.py` makes it, `login.py` fills its CONNECT) and the accepting side (`accept.py`)
share everything after the handshake.

In the account's router the connection is a subscriber: for each subject its peer showed
interest in (plain or queue) it holds one plain subscription, and for each message the
router hands it, it sends one `LMSG`/`HMSG` with the queue groups its peer serves (those
no local member has). As the router's `InterestPeer` it hears of every local
subscription and tells its peer (`LS+`/`LS-`, queue weights), as nats-server's
`updateSmap`.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from dataclasses import dataclass, field
from typing import Any, cast

from brook import limits
from brook.leafnode import codec, jsdomain, login
from brook.leafnode.leaf_core import LeafCore, LeafCounters
from brook.leafnode.peers import (
    AccountLeafs,
    SpokeLogin,
    SubjectFilter,
    covered,
    denied,
)
from brook.protocol.errors import STALE_CONNECTION, ProtocolError
from brook.routing.mappings import SubjectMappings
from brook.routing.output import QueuedOutput
from brook.routing.sublist import MatchResult, Sublist, Subscription
from brook.routing.subscriber import Subscriber

log = logging.getLogger("brook.leafnode")

LOOP_DETECTED = (
    'Loop detected for leafnode account="{account}". Delaying attempt to reconnect for {delay}'
)


@dataclass(frozen=True, slots=True)
class LeafLimits:
    """What a leaf connection takes from the server's settings."""

    server_id: str
    server_name: str
    max_payload: int
    max_control_line: int
    ping_interval_s: float
    max_pings_out: int
    max_pending: int
    jetstream: bool = False  # the account's
    # The server's JetStream and its domain ("": none, or JetStream off), and the
    # account's mappings, applied to messages that come in (domains: jsdomain.py).
    server_jetstream: bool = False
    domain: str = ""
    mappings: SubjectMappings | None = None


@dataclass(slots=True)
class _Remote:
    """The peer's side as its INFO told it."""

    server_id: str = ""
    name: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    domain: str = ""  # its JetStream domain


def _peer_of(transport: asyncio.BaseTransport) -> tuple[str, int]:
    peer = transport.get_extra_info("peername")
    return (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) else ("", 0)


def interest_key(sub: Subscription) -> bytes:
    """nats-server's `keyFromSub`: `subject`, or `subject queue`."""
    return sub.subject if sub.queue is None else sub.subject + b" " + sub.queue


def _is_leaf(sub: Subscription) -> bool:
    return isinstance(sub.client, LeafConnection)


# LeafCore after QueuedOutput: its `_send` overrides LeafCore's declaration of it.
class LeafConnection(QueuedOutput, LeafCore, asyncio.Protocol, Subscriber):
    """A leaf connection bound to one account (`leafs`); its per-message paths (`on_msg`,
    `deliver`) are `LeafCore`'s, compiled (leafnode/leaf_core.py)."""

    def __init__(
        self,
        leafs: AccountLeafs,
        config: LeafLimits,
        *,
        url_user: tuple[str, str | None] | None = None,
        credentials: str | None = None,
        nkey_seed: str | None = None,
        tls: ssl.SSLContext | None = None,
        hostname: str = "",
        deny_imports: tuple[bytes, ...] = (),
        deny_exports: tuple[bytes, ...] = (),
        tls_timeout_s: float = limits.TLS_TIMEOUT_S,
        cid: int = 0,
        solicited: bool = True,
        spoke: SpokeLogin | None = None,
    ) -> None:
        """`spoke`: on a hub, whom the spoke logged in as (its user's permissions)."""
        self.leafs = leafs
        self.router = leafs.router
        self.config = config
        self.mappings = config.mappings
        self.solicited = solicited
        self.cid = cid
        self.peer: tuple[str, int] = ("", 0)
        self.echo = False  # nats-server: leaf connections never echo
        self._url_user = url_user
        self._credentials = credentials
        self._nkey_seed = nkey_seed
        self._tls = tls
        # A remote's denies (nats-server's leaf permissions): what its hub must not
        # send (interest not shown, messages dropped) and what is not sent to it.
        self._deny_imports = deny_imports
        self._deny_exports = deny_exports
        # On a hub, the spoke's user's permissions (nats-server reverses them for the
        # leaf's direction): `publish` what the spoke may send in and be shown interest
        # in, `subscribe` what is sent out to it; allow lists None: no allow list.
        self._allow_in: tuple[bytes, ...] | None = None
        self._allow_out: tuple[bytes, ...] | None = None
        self.spoke = spoke  # read by a config reload's check (`LeafNodes.reauthorize`)
        self.nonce = ""  # on a hub, the one its INFO gave the spoke to sign
        if spoke is not None and spoke.publish is not None:
            self._deny_imports = deny_imports + spoke.publish.deny
            self._allow_in = spoke.publish.allow
        if spoke is not None and spoke.subscribe is not None:
            self._deny_exports = deny_exports + spoke.subscribe.deny
            self._allow_out = spoke.subscribe.allow
        self._deny_out = self._deny_exports  # and the domains' (jsdomain.domain_block)
        # Whether anything is filtered each way: one test per message when nothing is.
        self._checks_in = bool(self._deny_imports) or self._allow_in is not None
        self._checks_out = bool(self._deny_out) or self._allow_out is not None
        self._hostname = hostname
        self._tls_timeout_s = tls_timeout_s
        self._upgrade: asyncio.Task[None] | None = None
        self.loop = asyncio.get_event_loop()
        self.transport: asyncio.Transport | None = None
        self.closed: asyncio.Future[None] = self.loop.create_future()
        self.remote = _Remote()
        self.counters = LeafCounters()
        self.started_at = 0.0
        self.last_in = 0.0  # event-loop time of the last bytes read (`/connz`)
        self.rtt_s: float | None = None
        self._ping_sent_at = 0.0
        self.ready = False  # the handshake is done: interest and messages flow
        self.loop_detected = False
        self.close_reason = ""
        self.leafnode_urls: list[str] = []  # the latest the hub's INFO gave
        self._parser = codec.LeafParser(
            self, max_control_line=config.max_control_line, max_payload=config.max_payload
        )
        self._got_info = False
        self._init_output()
        self._timer: asyncio.TimerHandle | None = None
        self._pings_out = 0
        # What this side told the peer: interest key -> count (nats-server's smap).
        self._smap: dict[bytes, int] = {}
        # What the peer told this side: key -> its subscription in `_interest` (a sublist
        # asked which of the peer's keys a subject matches) and its weight.
        self._interest = Sublist()
        self._keys: dict[bytes, tuple[Subscription, int]] = {}
        # One plain subscription in the router per subject of the peer's keys, counted.
        self._routed: dict[bytes, list[Any]] = {}
        # `deliver`'s decisions for the subject of the router match result `_plan_result`.
        self._plan_result: MatchResult | None = None
        self._plan_first: Subscription | None = None
        self._plan_plain = False
        self._plan_groups: tuple[bytes, ...] | None = None

    # ------------------------------------------------------------------ transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self.transport = cast(asyncio.Transport, transport)
        self.started_at = self.last_in = self.loop.time()
        self.peer = _peer_of(self.transport)
        self._timer = self.loop.call_later(limits.LEAF_FIRST_INFO_TIMEOUT_S, self._no_info)

    def _no_info(self) -> None:
        if not self._got_info:
            log.error("Leafnode: no INFO from %s in time", self._peer_address())
            self.close("first INFO timeout")

    def data_received(self, data: bytes) -> None:
        self.last_in = self.loop.time()
        try:
            self._parser.feed(data)
        except ProtocolError as exc:
            self.protocol_error(exc)

    def protocol_error(self, exc: ProtocolError) -> None:
        """What the peer sent cannot be parsed: its -ERR (when nats-server sends one), closed."""
        log.error("Leafnode protocol error from %s: %s", self._peer_address(), exc.reason)
        if exc.err_text:
            self._send(codec.err(exc.err_text))
        self.close("protocol violation")

    def adopt(
        self,
        transport: asyncio.Transport,
        parser: codec.LeafParser,
        connect: dict[str, Any],
        info: dict[str, Any],
    ) -> None:
        """The accepting side, once the spoke's CONNECT is checked (`accept.py`): take
        the socket and the parser (the rest of its read included) over, replace an older
        connection from the same server (nats-server: "Duplicate Remote LeafNode
        Connection"), tell the spoke its account (INFO with `connect_info`) and show it
        the account's interest."""
        self.transport = transport
        self._parser = parser
        parser.handler = self
        self._got_info = True
        self.started_at = self.loop.time()
        self.peer = _peer_of(transport)
        name = str(connect.get("name") or connect.get("server_id") or "")
        self.remote = _Remote(
            server_id=str(connect.get("server_id", "")),
            name=name,
            info=connect,
            domain=str(connect.get("domain") or ""),
        )
        for other in list(self.leafs.connections):
            if not other.solicited and name and other.remote.name == name:
                other._send(codec.err("Duplicate Remote LeafNode Connection"))
                other.close("Duplicate Remote LeafNode Connection")
                log.warning("Replacing connection from same server %s", name)
        told = info | {"connect_info": True, "remote_account": self.leafs.account}
        self.nonce = str(info.get("nonce", ""))
        spoke = self.spoke
        if spoke is not None:  # nats-server: the spoke applies its user's permissions too
            if spoke.subscribe is not None:
                told["import"] = spoke.subscribe.as_info()
            if spoke.publish is not None:
                told["export"] = spoke.publish.as_info()
        self._send(codec.info(told))
        self._finish()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.ready:
            self.ready = False
            self.leafs.remove(self)
            for sub, _ in self._routed.values():
                self.router.unsubscribe(sub)
            self._routed.clear()
            for key, (_, weight) in self._keys.items():
                self.leafs.remote_interest(self, key, -weight)
            self._keys.clear()
            log.info(
                "Leafnode connection closed: %s (account %s, remote %s)",
                self.close_reason or "connection closed",
                self.leafs.account,
                self.remote.name,
            )
        if not self.closed.done():
            self.closed.set_result(None)

    def send_error(self, text: str) -> None:
        """`-ERR '<text>'` to the peer (before a close)."""
        self._send(codec.err(text))

    def close(self, reason: str) -> None:
        if self.transport is None:
            return
        self.close_reason = self.close_reason or reason
        self._parser.stop()
        self._flush()
        self.transport.close()

    def _peer_address(self) -> str:
        if self.transport is None:
            return "?"
        peer = self.transport.get_extra_info("peername")
        return f"{peer[0]}:{peer[1]}" if peer else "?"

    # ------------------------------------------------------------------ output

    def _output_limit(self) -> int:
        return self.config.max_pending

    def _output_over_limit(self) -> None:
        log.error("Leafnode %s is a slow consumer, closing", self.remote.name)
        self.close_reason = "Slow Consumer (Pending Bytes)"
        if self.transport is not None:
            self.transport.abort()

    # ------------------------------------------------------------------ operations in

    def on_op(self, op: codec.LeafOp) -> None:
        if isinstance(op, codec.Sub):
            self._on_sub(op.subject, op.queue, op.weight)
        elif isinstance(op, codec.Unsub):
            self._on_unsub(op.subject if op.queue is None else op.subject + b" " + op.queue)
        elif isinstance(op, codec.Simple):
            if op.op == b"PING":
                self._send(codec.PONG)
            elif op.op == b"PONG":
                self._pings_out = 0
                if self._ping_sent_at:
                    self.rtt_s = self.loop.time() - self._ping_sent_at
                    self._ping_sent_at = 0.0
        elif isinstance(op, codec.Info):
            self._on_info(op.fields)
        elif isinstance(op, codec.Err):
            self._on_err(op.text)
        else:  # CONNECT to a soliciting side
            self._send(codec.err("Unknown Protocol Operation"))
            self.close("protocol violation")

    def _on_info(self, fields: dict[str, Any]) -> None:
        first = not self._got_info
        self._got_info = True
        urls = fields.get("leafnode_urls")
        if self.solicited and isinstance(urls, list) and urls:
            self.leafnode_urls = [str(u) for u in urls]  # the hub's, for the next dial
        if first:
            if not fields.get("client_id") or (
                fields.get("leafnode_urls") is None and not fields.get("info_on_connect")
            ):
                # nats-server 2.15: a solicited leaf must first receive a leafnode INFO,
                # which has a client id and `leafnode_urls` or `info_on_connect` (a
                # `no_advertise` hub's has no `leafnode_urls`).
                log.error("Attempted to connect to a non-leafnode port %s", self._peer_address())
                self.close("wrong port")
                return
            self.remote = _Remote(
                server_id=str(fields.get("server_id", "")),
                name=str(fields.get("server_name") or fields.get("server_id", "")),
                info=fields,
                domain=str(fields.get("domain") or ""),
            )
            if self._timer is not None:
                self._timer.cancel()
            if fields.get("tls_required") or self._tls is not None:
                # nats-server: TLS begins after the hub's first INFO, before CONNECT.
                self._upgrade = asyncio.ensure_future(self._start_tls(fields))
            else:
                self._connect(fields)
        elif fields.get("connect_info") and not self.ready:
            if self.solicited:
                self._take_permissions(fields)
            self._finish()

    def _take_permissions(self, fields: dict[str, Any]) -> None:
        """A hub that logged this spoke in as one of its client users tells it the
        user's permissions in the INFO after CONNECT (`export`: what it may send,
        `import`: what it may receive); a nats-server spoke applies them as its own, so
        it never sends what the hub would close the leaf for, and so does Brook's."""
        export, imported = (
            SubjectFilter.of(fields.get("export")),
            SubjectFilter.of(fields.get("import")),
        )
        if export is not None:
            self._deny_exports = self._deny_exports + export.deny
            self._allow_out = export.allow
        if imported is not None:
            self._deny_imports = self._deny_imports + imported.deny
            self._allow_in = imported.allow
            self._checks_in = bool(self._deny_imports) or self._allow_in is not None

    async def _start_tls(self, fields: dict[str, Any]) -> None:
        transport = self.transport
        if transport is None:
            return
        context = self._tls or ssl.create_default_context()
        try:
            upgraded = await self.loop.start_tls(
                transport,
                self,
                context,
                server_hostname=self._hostname,
                ssl_handshake_timeout=self._tls_timeout_s,
            )
        except (OSError, ssl.SSLError, TimeoutError) as exc:
            log.error("TLS handshake error with leafnode %s: %s", self._hostname, exc)
            self.close_reason = "TLS Handshake Failure"
            transport.abort()
            return
        if upgraded is None or self.transport is None:
            return
        self.transport = upgraded
        self._connect(fields)

    def _connect(self, fields: dict[str, Any]) -> None:
        """Send CONNECT; without `info_on_connect` the handshake is done with it."""
        try:
            connect = login.connect_fields(
                self.config,
                self.leafs.account,
                str(fields.get("nonce", "")),
                deny_imports=self._deny_imports,
                credentials=self._credentials,
                nkey_seed=self._nkey_seed,
                url_user=self._url_user,
            )
        except (OSError, ValueError) as exc:
            log.error("Leafnode credentials %s: %s", self._credentials, exc)
            self.close("credentials")
            return
        self._send(codec.connect(connect))
        if not fields.get("info_on_connect"):
            self._finish()

    def _finish(self) -> None:
        """The handshake is done: bind to the account, show it our interest."""
        self.ready = True
        self._deny_out = self._deny_exports + jsdomain.domain_block(
            self.config.domain, self.remote.domain
        )
        self._checks_out = bool(self._deny_out) or self._allow_out is not None
        self._plan_result = None  # `deliver`'s plans read the denies
        self.leafs.add(self)
        log.info(
            "Leafnode connection created for account: %s (remote %s)",
            self.leafs.account,
            self.remote.name,
        )
        smap = self._smap
        for sub in self.router.sublist.subscriptions():
            if not _is_leaf(sub) and self._shows(sub.subject):
                key = interest_key(sub)
                smap[key] = smap.get(key, 0) + 1
        for other in self.leafs.connections:
            if other is not self and self._passes_on(other):
                for key, (sub, weight) in other._keys.items():
                    if self._shows(sub.subject):
                        smap[key] = smap.get(key, 0) + weight
        if self.config.mappings is not None:  # messages to their sources are routed here
            for source in self.config.mappings.sources():
                if self._shows(source):
                    smap[source] = smap.get(source, 0) + 1
        smap[self.leafs.lds] = smap.get(self.leafs.lds, 0) + 1
        self._send(b"".join(codec.sub(key, n) for key, n in smap.items()))
        self._send_ping()  # the first measures the round trip (`/leafz` rtt)
        self._arm_ping()

    def _on_err(self, text: str) -> None:
        log.error("Leafnode error from %s: %s", self.remote.name or self._peer_address(), text)
        if "Loop detected" in text:
            self.loop_detected = True
        self.close(text)

    def _on_sub(self, subject: bytes, queue: bytes | None, weight: int) -> None:
        if not self.ready:
            self._send(codec.err("Authorization Violation"))
            self.close("protocol violation")
            return
        if subject == self.leafs.lds:
            text = LOOP_DETECTED.format(
                account=self.leafs.account, delay=f"{limits.LEAF_LOOP_DELAY_S:g}s"
            )
            log.error(text)
            self._send(codec.err(text))
            self.loop_detected = True
            self.close("loop detected")
            return
        if (
            denied(subject)
            or covered(self._deny_exports, subject)
            or (self._allow_out is not None and not covered(self._allow_out, subject))
        ):
            return  # messages on it are never sent
        key = subject if queue is None else subject + b" " + queue
        weight = max(weight, 1) if queue is not None else 1
        known = self._keys.get(key)
        if known is not None:
            if queue is None:
                return
            sub, old = known
            self._keys[key] = (sub, weight)
            self.leafs.remote_interest(self, key, weight - old)
            return
        sub = Subscription(self, subject, key, queue)
        self._interest.insert(sub)
        self._plan_result = None  # `deliver`'s plans read the peer's interest
        self._keys[key] = (sub, weight)
        routed = self._routed.get(subject)
        if routed is None:
            rsub = Subscription(self, subject, b"leaf")
            self._routed[subject] = [rsub, 1]
            self.router.subscribe(rsub)
        else:
            routed[1] += 1
        self.leafs.remote_interest(self, key, weight)

    def _on_unsub(self, key: bytes) -> None:
        known = self._keys.pop(key, None)
        if known is None:
            return
        sub, weight = known
        self._interest.remove(sub)
        self._plan_result = None
        routed = self._routed[sub.subject]
        routed[1] -= 1
        if routed[1] == 0:
            del self._routed[sub.subject]
            self.router.unsubscribe(routed[0])
        self.leafs.remote_interest(self, key, -weight)

    # ------------------------------------------------------------------ keep-alive

    def _arm_ping(self) -> None:
        self._timer = self.loop.call_later(self.config.ping_interval_s, self._ping)

    def _ping(self) -> None:
        if self.transport is None:
            return
        if self._pings_out >= self.config.max_pings_out:
            self._send(codec.err(STALE_CONNECTION))
            self.close(STALE_CONNECTION)
            return
        self._send_ping()
        self._arm_ping()

    def _send_ping(self) -> None:
        self._pings_out += 1
        if not self._ping_sent_at:
            self._ping_sent_at = self.loop.time()
        self._send(codec.PING)

    # ------------------------------------------------------------------ interest out

    def _passes_on(self, origin: LeafConnection) -> bool:
        """Is interest that came over `origin` told to this connection's peer? A spoke
        passes on only what its own hub-side connections heard (nats-server's
        `updateSmap`); a hub all of it."""
        return not (self.solicited and origin.solicited)

    def _shows(self, subject: bytes) -> bool:
        """Is interest in `subject` told to the peer?"""
        return not denied(subject) and not self._refused_in(subject)

    def _refused_in(self, subject: bytes) -> bool:
        """Do the remote's `deny_imports` or, on a hub, the spoke's user's publish
        permission keep `subject` (a literal or a pattern) from coming in?"""
        if covered(self._deny_imports, subject):
            return True
        return self._allow_in is not None and not covered(self._allow_in, subject)

    def _refused_out(self, subject: bytes) -> bool:
        """Do the remote's `deny_exports`, the domains' denies or, on a hub, the spoke's
        user's subscribe permission keep `subject` from going out?"""
        if covered(self._deny_out, subject):
            return True
        return self._allow_out is not None and not covered(self._allow_out, subject)

    def interest_changed(self, sub: Subscription, delta: int) -> None:
        """The router's `InterestPeer`: a local subscription came or went."""
        if self.ready and not _is_leaf(sub) and self._shows(sub.subject):
            self._update(interest_key(sub), delta, sub.queue is not None)

    def forward_interest(self, origin: LeafConnection, key: bytes, delta: int) -> None:
        """Interest `origin`'s peer showed or withdrew (its `$LDS.` subject always
        passes, so loops through several servers are found)."""
        if not self.ready:
            return
        if key.startswith(b"$LDS.") or (
            self._passes_on(origin) and self._shows(key.partition(b" ")[0])
        ):
            self._update(key, delta, b" " in key)

    def _update(self, key: bytes, delta: int, queue: bool) -> None:
        smap = self._smap
        n = smap.get(key, 0)
        if delta < 0 and n == 0:
            return
        total = n + delta
        if total > 0:
            smap[key] = total
        else:
            smap.pop(key, None)
        if queue or (n <= 0) != (total <= 0):
            self._send(codec.sub(key, total) if total > 0 else codec.unsub(key))

    # ------------------------------------------------------------------ messages out

    def peer_has_interest(self, subject: bytes) -> bool:
        return bool(self._interest.match(subject))

    def peer_has_queue(self, subject: bytes, queue: bytes) -> bool:
        return any(members[0].queue == queue for members in self._interest.match(subject).queues)

    def _plan(self, result: MatchResult, subject: bytes) -> None:
        """`deliver`'s decisions for `subject`, whose router match is `result`: the
        first of this connection's subscriptions in it, whether the peer has plain
        interest, the queue groups it has members of (None: nothing is sent, denied or
        no interest)."""
        self._plan_result = result
        self._plan_first = next((s for s in result.plain if s.client is self), None)
        interest = self._interest.match(subject)
        self._plan_plain = bool(interest.plain)
        if not interest or denied(subject) or (self._checks_out and self._refused_out(subject)):
            self._plan_groups = None
        else:
            self._plan_groups = tuple(members[0].queue or b"" for members in interest.queues)

    def _queues(
        self, subject: bytes, payload: bytes, result: MatchResult, groups: tuple[bytes, ...]
    ) -> list[bytes]:
        """Which of the queue groups `groups` the peer has members of it serves for this
        message: not those a local member takes (nats-server prefers them), for a message
        from another leaf only those it names, each by one leaf connection."""
        inbound = self.leafs.inbound
        local = {members[0].queue for members in result.queues}
        return [
            queue
            for queue in groups
            if (inbound is None or queue in inbound[1])
            and queue not in local
            and self.leafs.serves_queue(self, subject, payload, queue)
        ]

    def remove_subscription(self, sub: Subscription) -> None:
        """Never called: the router expires only subscriptions with a quota."""

    # ------------------------------------------------------------------ monitoring

    def interest(self) -> list[Subscription]:
        """The interest the peer showed (nats-server's `ln.subs`), one subscription a
        subject or subject and queue, its sid that key."""
        return [sub for sub, _ in self._keys.values()]
