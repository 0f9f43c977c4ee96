"""Per-connection authorization: nats-server's publish and subscribe permissions.

A user's `Permissions` (config) is compiled once per server into `CompiledPermissions`:
its allow and deny lists as `SubjectIndex`es, whose values are the queue group an entry
names (None for a plain entry). Each connection of that user gets its own
`ConnectionPermissions`, holding what changes per connection: the cache of publish
decisions, the delivery filter of subscribe denies, and the reply subjects
`allow_responses` granted it. The rules are nats-server's (client.go):

* publish (`pubAllowed`): allowed when the allow list (if any) matches the subject and the
  deny list does not; otherwise a reply subject of a request this connection received
  (`allow_responses`), at most `max_msgs` times within `expires_s`. Decisions other than
  granted replies are cached per subject, at most `PUB_PERMS_CACHE_ENTRIES_MAX` of them,
  the oldest dropped first, so a connection publishing on a few subjects decides each once.
* subscribe (`canSubscribe`): the allow list must match the subject (an entry with a queue
  group allows only that group, or groups its wildcard queue name covers), and no deny
  entry may (a deny entry with a queue group refuses only that group).
* delivery (`checkDenySub`): a deny entry does not stop a wider wildcard subscription, so
  once a connection holds a wildcard or queue subscription that may overlap a deny entry,
  each delivery to it is checked against the deny list (cached per subject and queue).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from brook import limits
from brook.config.settings import Permissions, ResponsePermission
from brook.routing.subject_index import SubjectIndex, is_literal
from brook.subjects import subset_match

Clock = Callable[[], float]

SYSTEM_QUEUE = b"_sys_"  # nats-server's queue group of its system services: refused to all
RESERVED_REPLY_PREFIXES = (b"_R_.", b"$JS.ACK.", b"_GR_.")
"""nats-server's reserved replies (client.go `isReservedReply`), which a client may not
set on a publish: those of service imports, JetStream acks and gateway-routed replies."""


def is_reserved_reply(reply: bytes) -> bool:
    """`reply` starts with one of `RESERVED_REPLY_PREFIXES`: nats-server reserves `_R_.`
    on its own too, but `$JS.ACK.` and `_GR_.` only with something after them."""
    if reply.startswith(b"_R_."):
        return True
    return len(reply) > (8 if reply.startswith(b"$JS.ACK.") else 5)


def may_subscribe(perms: ConnectionPermissions | None, subject: bytes, queue: bytes | None) -> bool:
    """May a connection with `perms` (None: unrestricted) subscribe? Nobody may join the
    system services' queue group."""
    return queue != SYSTEM_QUEUE and (perms is None or perms.may_subscribe(subject, queue))


def _index(entries: list[str] | None) -> SubjectIndex[bytes | None] | None:
    """`"subject"` or `"subject queue"` entries; None without entries."""
    if entries is None:
        return None
    index = SubjectIndex[bytes | None]()
    for entry in entries:
        subject, _, queue = entry.strip().partition(" ")
        index.add(subject.encode(), queue.strip().encode() or None)
    return index


def _queue_matches(queue: bytes, queues: list[bytes]) -> bool:
    """nats-server's `queueMatches`: `queue` is named by one of the entries' groups, or
    covered by one written with wildcards."""
    return any(queue == q or (not is_literal(q) and subset_match(q, queue)) for q in queues)


class CompiledPermissions:
    """One user's permissions as indexes, shared by all of that user's connections."""

    __slots__ = ("pub_allow", "pub_deny", "responses", "sub_allow", "sub_deny")

    def __init__(self, perms: Permissions) -> None:
        pub, sub = perms.publish, perms.subscribe
        self.pub_allow = _index(pub.allow) if pub is not None else None
        self.pub_deny = _index(pub.deny or None) if pub is not None else None
        # nats-server: an empty subscribe allow list restricts nothing.
        self.sub_allow = _index(sub.allow or None) if sub is not None else None
        self.sub_deny = _index(sub.deny or None) if sub is not None else None
        self.responses: ResponsePermission | None = perms.responses

    def publish_allowed(self, subject: bytes) -> bool:
        """The allow and deny lists alone (no granted replies)."""
        if self.pub_allow is not None and not self.pub_allow.match(subject):
            return False
        return self.pub_deny is None or not self.pub_deny.match(subject)

    def subscribe_allowed(self, subject: bytes, queue: bytes | None) -> bool:
        if self.sub_allow is not None:
            entries = self.sub_allow.match(subject)
            allowed = None in entries
            groups = [q for q in entries if q is not None]
            if queue is not None and groups:
                allowed = _queue_matches(queue, groups)
            if not allowed:
                return False
        return self.sub_deny is None or not self.denied(subject, queue)

    def denied(self, subject: bytes, queue: bytes | None) -> bool:
        """Does a subscribe deny entry cover `subject` (for `queue`)?"""
        assert self.sub_deny is not None
        entries = self.sub_deny.match(subject)
        if None in entries:
            return True
        groups = [q for q in entries if q is not None]
        return queue is not None and bool(groups) and _queue_matches(queue, groups)


class ConnectionPermissions:
    """One connection's side of its user's permissions: caches and granted replies."""

    __slots__ = (
        "_clock",
        "_deny_cache",
        "_granted_since_prune",
        "_last_prune",
        "_replies",
        "compiled",
        "filter_deliveries",
        "published",
        "tracks_replies",
    )

    def __init__(self, compiled: CompiledPermissions, clock: Clock = time.monotonic) -> None:
        self.compiled = compiled
        self._clock = clock
        # subject -> the allow/deny lists' decision, at most PUB_PERMS_CACHE_ENTRIES_MAX;
        # a connection's publish reads it first (`published.get(subject)`), then asks
        # `may_publish` only for a subject not decided or not allowed by the lists.
        self.published: dict[bytes, bool] = {}
        # reply subject -> [granted at, publishes made]; only with allow_responses
        self._replies: dict[bytes, list[float]] | None = (
            {} if compiled.responses is not None else None
        )
        self.tracks_replies = self._replies is not None  # deliveries grant their replies
        self._granted_since_prune = 0
        self._last_prune = clock()
        # Deliveries are checked against the subscribe denies once a subscription may
        # overlap one (nats-server's `loadMsgDenyFilterIfNeeded`).
        self.filter_deliveries = False
        self._deny_cache: dict[tuple[bytes, bytes | None], bool] = {}

    def may_publish(self, subject: bytes) -> bool:
        # The hot path of a publish with permissions: one dict lookup once decided.
        allowed = self.published.get(subject)
        if allowed is None:
            allowed = self._decide(subject)
        return allowed or self._reply_allowed(subject)

    def _lists_allow(self, subject: bytes) -> bool:
        """The allow and deny lists' decision, cached (it never changes)."""
        allowed = self.published.get(subject)
        return self._decide(subject) if allowed is None else allowed

    def _decide(self, subject: bytes) -> bool:
        allowed = self.compiled.publish_allowed(subject)
        cache = self.published
        if len(cache) >= limits.PUB_PERMS_CACHE_ENTRIES_MAX:
            del cache[next(iter(cache))]
        cache[subject] = allowed
        return allowed

    def may_subscribe(self, subject: bytes, queue: bytes | None) -> bool:
        compiled = self.compiled
        if not compiled.subscribe_allowed(subject, queue):
            return False
        if (
            not self.filter_deliveries
            and compiled.sub_deny is not None
            and (queue is not None or not is_literal(subject))
            and compiled.sub_deny.intersecting(subject)
        ):
            self.filter_deliveries = True
        return True

    def permit_delivery(self, subject: bytes, queue: bytes | None, reply: bytes | None) -> bool:
        """A delivery's check: False when a subscribe deny covers the subject; a request's
        reply subject granted (`allow_responses`)."""
        if self.filter_deliveries and self.delivery_denied(subject, queue):
            return False
        if reply is not None and self.tracks_replies:
            self.grant_reply(reply)
        return True

    def delivery_denied(self, subject: bytes, queue: bytes | None) -> bool:
        key = (subject, queue)
        denied = self._deny_cache.get(key)
        if denied is None:
            denied = self._deny_cache[key] = self.compiled.denied(subject, queue)
            if len(self._deny_cache) > limits.DENY_PERMS_CACHE_ENTRIES_MAX:
                del self._deny_cache[next(iter(self._deny_cache))]
        return denied

    def grant_reply(self, reply: bytes) -> None:
        """A request with `reply` was delivered to this connection: allow responses to it
        (unless it may publish there already), as nats-server's `deliverMsg`."""
        replies = self._replies
        # As nats-server, asking counts as a use of an earlier grant of the same reply.
        if replies is None or self._lists_allow(reply) or self._reply_allowed(reply):
            return
        now = self._clock()
        replies[reply] = [now, 0]
        self._granted_since_prune += 1
        if (
            self._granted_since_prune > limits.REPLY_PERMS_PRUNE_EVERY
            or now - self._last_prune > limits.REPLY_PERMS_PRUNE_S
        ):
            self._prune_replies(now)

    def _reply_allowed(self, subject: bytes) -> bool:
        replies, responses = self._replies, self.compiled.responses
        grant = replies.get(subject) if replies is not None else None
        if grant is None or replies is None or responses is None:
            return False
        grant[1] += 1
        if (0 < responses.max_msgs < grant[1]) or (
            responses.expires_s > 0 and self._clock() - grant[0] > responses.expires_s
        ):
            del replies[subject]
            return False
        return True

    def _prune_replies(self, now: float) -> None:
        """Drop grants used up or expired (nats-server's `pruneReplyPerms`)."""
        replies, responses = self._replies, self.compiled.responses
        if replies is None or responses is None:
            return
        max_msgs, expires_s = responses.max_msgs, responses.expires_s
        for reply, (granted_at, used) in list(replies.items()):
            if (max_msgs > 0 and used >= max_msgs) or (
                expires_s > 0 and now - granted_at > expires_s
            ):
                del replies[reply]
        self._granted_since_prune = 0
        self._last_prune = now
