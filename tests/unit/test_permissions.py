"""A connection's permissions (server/permissions.py): decisions, caches, granted replies.

Timing is the subject of the `allow_responses` tests, so they run on a manual clock; the
conformance tests compare the same rules with nats-server over the wire.
"""

from __future__ import annotations

from brook import limits
from brook.config.settings import Permissions, ResponsePermission, SubjectPermission
from brook.server.permissions import CompiledPermissions, ConnectionPermissions


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def connection(perms: Permissions, clock: Clock | None = None) -> ConnectionPermissions:
    return ConnectionPermissions(CompiledPermissions(perms), clock or Clock())


def responder(
    max_msgs: int = 1, expires_s: float = 2.0, clock: Clock | None = None
) -> ConnectionPermissions:
    perms = Permissions(
        publish=SubjectPermission([], ["_INBOX.denied.>"]),
        responses=ResponsePermission(max_msgs, expires_s),
    )
    return connection(perms, clock)


def test_publish_allow_then_deny_with_wildcards() -> None:
    c = connection(Permissions(publish=SubjectPermission(["foo.>", "bar.*"], ["foo.secret.*"])))
    assert c.may_publish(b"foo.a.b")
    assert c.may_publish(b"bar.x")
    assert not c.may_publish(b"bar.x.y")
    assert not c.may_publish(b"foo.secret.x")
    assert not c.may_publish(b"foo")
    # Deny alone: everything else is allowed.
    c = connection(Permissions(publish=SubjectPermission(None, [">"])))
    assert not c.may_publish(b"anything")


def test_publish_decisions_are_cached_within_a_bound() -> None:
    c = connection(Permissions(publish=SubjectPermission(["a.*"])))
    for i in range(limits.PUB_PERMS_CACHE_ENTRIES_MAX * 4):
        assert c.may_publish(b"a.%d" % i)
        assert not c.may_publish(b"b.%d" % i)
        assert len(c.published) <= limits.PUB_PERMS_CACHE_ENTRIES_MAX
    assert c.may_publish(b"a.0")
    assert not c.may_publish(b"b.0")


def test_subscribe_queue_forms() -> None:
    c = connection(
        Permissions(subscribe=SubjectPermission(["foo.> q", "bar", "baz v1.*"], ["bar.x q"]))
    )
    assert not c.may_subscribe(b"foo.a", None)  # only queue group q
    assert c.may_subscribe(b"foo.a", b"q")
    assert not c.may_subscribe(b"foo.a", b"r")
    assert c.may_subscribe(b"bar", b"any")  # a plain entry allows any group
    assert c.may_subscribe(b"baz", b"v1.a")  # the entry's wildcard queue name covers it
    assert not c.may_subscribe(b"baz", b"v2")
    c = connection(Permissions(subscribe=SubjectPermission(None, ["bar.x q"])))
    assert c.may_subscribe(b"bar.x", None)
    assert not c.may_subscribe(b"bar.x", b"q")
    assert c.may_subscribe(b"bar.x", b"r")


def test_delivery_filter_starts_with_an_overlapping_wildcard_or_queue_subscription() -> None:
    c = connection(Permissions(subscribe=SubjectPermission(None, ["foo.secret"])))

    def filters_after(subject: bytes, queue: bytes | None = None) -> bool:
        assert c.may_subscribe(subject, queue)
        return c.filter_deliveries

    assert not filters_after(b"foo.ok")
    assert not filters_after(b"bar.*")  # no overlap
    assert filters_after(b"foo.*")
    assert c.delivery_denied(b"foo.secret", None)
    assert not c.delivery_denied(b"foo.ok", None)
    for i in range(limits.DENY_PERMS_CACHE_ENTRIES_MAX * 2):
        assert not c.delivery_denied(b"foo.%d" % i, None)
        assert len(c._deny_cache) <= limits.DENY_PERMS_CACHE_ENTRIES_MAX


def test_a_granted_reply_is_used_up_after_max_msgs() -> None:
    c = responder(max_msgs=2)
    assert not c.may_publish(b"_INBOX.r1")
    c.grant_reply(b"_INBOX.r1")
    assert c.may_publish(b"_INBOX.r1")
    assert c.may_publish(b"_INBOX.r1")
    assert not c.may_publish(b"_INBOX.r1")
    assert not c.may_publish(b"_INBOX.other")


def test_a_granted_reply_expires() -> None:
    clock = Clock()
    c = responder(max_msgs=-1, expires_s=2.0, clock=clock)
    c.grant_reply(b"_INBOX.r1")
    clock.now += 1.9
    assert c.may_publish(b"_INBOX.r1")
    assert c.may_publish(b"_INBOX.r1")  # no bound on the count
    clock.now += 0.2
    assert not c.may_publish(b"_INBOX.r1")


def test_no_grant_where_publishing_is_allowed_anyway() -> None:
    c = connection(
        Permissions(publish=SubjectPermission(["_INBOX.>"]), responses=ResponsePermission())
    )
    c.grant_reply(b"_INBOX.r1")
    assert c._replies == {}


def test_grants_used_up_or_expired_are_pruned() -> None:
    """Each connection's granted replies stay bounded by what is still usable."""
    clock = Clock()
    c = responder(max_msgs=1, expires_s=5.0, clock=clock)
    for i in range(100):
        c.grant_reply(b"_INBOX.old.%d" % i)
    assert c.may_publish(b"_INBOX.old.0")  # used up, then pruned
    clock.now += limits.REPLY_PERMS_PRUNE_S + 0.1
    c.grant_reply(b"_INBOX.new")
    assert len(c._replies or {}) == 100  # 99 unused and unexpired, and the new one
    clock.now += 5.1
    c.grant_reply(b"_INBOX.newer")
    assert set(c._replies or {}) == {b"_INBOX.newer"}
