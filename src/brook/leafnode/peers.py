"""An account's leafnode connections: what they share (ADR 0032).

* the account's loop-detection subject, `$LDS.<nuid>`, which every one of its leaf
  connections shows the other side as interest: seeing it come back means the
  connections form a loop (nats-server's `acc.lds`);
* the interest each connection's peer has shown (its `LS+` keys), passed on to the
  account's other leaf connections as nats-server's `updateLeafNodes` does;
* the choices made per message among them: which connection serves a queue group that
  no local member has (one at random), and, while a message that came over one of them
  is being routed, the queue groups its sender named.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from brook import nuid
from brook.routing.router import Router
from brook.subjects import subset_match

if TYPE_CHECKING:
    from brook.leafnode.connection import LeafConnection

LDS_PREFIX = b"$LDS."
# nats-server's `denyAllClientJs`: JetStream's client API never crosses a leaf connection
# of a non-system account, in either direction (JetStream domains map their own subjects).
DENIED_PREFIXES = (b"$JS.API.", b"$KV.", b"$OBJ.")


def denied(subject: bytes) -> bool:
    """Is `subject` (or every subject of a pattern) under `$JS.API.>`, `$KV.>`, `$OBJ.>`?"""
    return subject.startswith(DENIED_PREFIXES)


def covered(patterns: tuple[bytes, ...], subject: bytes) -> bool:
    """Is every subject of `subject` (a literal or a pattern) matched by one of
    `patterns` (a remote's `deny_imports` or `deny_exports`)?"""
    return any(subset_match(p, subject) for p in patterns)


@dataclass(frozen=True, slots=True)
class SubjectFilter:
    """One direction of a spoke's user permissions at a hub (nats-server's allow and
    deny lists): `allow` None lets every subject not denied through."""

    allow: tuple[bytes, ...] | None = None
    deny: tuple[bytes, ...] = ()

    @classmethod
    def of(cls, given: object) -> SubjectFilter | None:
        """The filter of a leaf INFO's `import` or `export` (None: absent)."""
        if not isinstance(given, dict):
            return None
        allow, deny = given.get("allow"), given.get("deny")
        return cls(
            allow=tuple(str(p).encode() for p in allow) if isinstance(allow, list) else None,
            deny=tuple(str(p).encode() for p in deny) if isinstance(deny, list) else (),
        )

    def as_info(self) -> dict[str, list[str]]:
        """nats-server's `SubjectPermission` JSON (`omitempty` lists), as its leaf INFO
        tells the spoke."""
        out: dict[str, list[str]] = {}
        if self.allow:
            out["allow"] = [p.decode() for p in self.allow]
        if self.deny:
            out["deny"] = [p.decode() for p in self.deny]
        return out


@dataclass(frozen=True, slots=True)
class SpokeLogin:
    """Whom a spoke logged in as at this hub: the account its connection binds and, when
    it logged in as one of the server's users (nats-server's `isLeafNodeAuthorized`
    falling back to the clients' logins), that user's permissions: `publish` what the
    spoke may send in, `subscribe` what is sent out to it (None: no restriction)."""

    account: str
    publish: SubjectFilter | None = None
    subscribe: SubjectFilter | None = None


class AccountLeafs:
    """The leaf connections bound to one account's router."""

    def __init__(
        self,
        account: str,
        router: Router,
        *,
        rng: random.Random | None = None,
        on_closed: Callable[[LeafConnection], None] | None = None,
    ) -> None:
        """`on_closed(conn)` is told of each connection removed (monitoring keeps it)."""
        self.account = account
        self._on_closed = on_closed
        self.router = router
        self.lds = LDS_PREFIX + nuid.random_id().encode()
        self.connections: list[LeafConnection] = []
        # in_msgs, in_bytes, out_msgs, out_bytes of its connections that have closed
        self.closed_traffic = [0, 0, 0, 0]
        # While the router delivers a message that came over a leaf connection: that
        # connection and the queue names the message was sent with (None: a local one).
        self.inbound: tuple[LeafConnection, tuple[bytes, ...]] | None = None
        self._choice = (rng or random.Random()).choice
        self._chosen_for: tuple[bytes, bytes] | None = None
        self._chosen: dict[bytes, LeafConnection] = {}

    def add(self, conn: LeafConnection) -> None:
        self.connections.append(conn)
        self.router.peers.append(conn)

    def remove(self, conn: LeafConnection) -> None:
        if conn in self.connections:
            self.connections.remove(conn)
            self.router.peers.remove(conn)
            c, closed = conn.counters, self.closed_traffic
            closed[0] += c.in_msgs
            closed[1] += c.in_bytes
            closed[2] += c.out_msgs
            closed[3] += c.out_bytes
            if self._on_closed is not None:
                self._on_closed(conn)

    def traffic(self) -> tuple[int, int, int, int]:
        """(in_msgs, in_bytes, out_msgs, out_bytes) over its leaf connections, closed ones
        included, as nats-server's account `stats.ln` (`/accstatz` `leafs`)."""
        totals = list(self.closed_traffic)
        for conn in self.connections:
            c = conn.counters
            totals[0] += c.in_msgs
            totals[1] += c.in_bytes
            totals[2] += c.out_msgs
            totals[3] += c.out_bytes
        return totals[0], totals[1], totals[2], totals[3]

    def remote_interest(self, origin: LeafConnection, key: bytes, delta: int) -> None:
        """`origin`'s peer showed (`delta` > 0) or withdrew interest `key`: tell the
        other connections, each by its role's rule."""
        for conn in self.connections:
            if conn is not origin:
                conn.forward_interest(origin, key, delta)

    def serves_queue(
        self, conn: LeafConnection, subject: bytes, payload: bytes, queue: bytes
    ) -> bool:
        """Does `conn` serve `queue` for this message? One connection per message among
        those whose peers have members (nats-server picks a leaf at random)."""
        if len(self.connections) == 1:
            return True
        # One message is routed at a time, start to end: its subject and payload objects
        # name it while it is (two equal messages in a row may share a choice, which
        # still gives each to one member).
        if self._chosen_for is None or not (
            self._chosen_for[0] is subject and self._chosen_for[1] is payload
        ):
            self._chosen_for = (subject, payload)
            self._chosen = {}
        chosen = self._chosen.get(queue)
        if chosen is None:
            origin = self.inbound[0] if self.inbound is not None else None
            candidates = [
                c for c in self.connections if c is not origin and c.peer_has_queue(subject, queue)
            ]
            chosen = self._chosen[queue] = self._choice(candidates) if candidates else conn
        return chosen is conn
