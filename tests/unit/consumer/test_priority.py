"""Priority groups on the consumer state machine (ADR-42, ADR 0022), on a manual clock:
the pin and its TTL, the 423s, overflow's limits, prioritized order, and that a consumer
without a policy keeps its shortcut."""

from __future__ import annotations

import dataclasses
import itertools

from brook.jetstream.consumer import (
    Action,
    Advisory,
    ConsumerSettings,
    ConsumerState,
    DeliverRun,
    PriorityPolicy,
    PullGroup,
    Status,
)

from .fakes import FakeSource, S, delivered, delivers, make, statuses

T0 = 1_000 * S
TTL = 5 * S


def _consumer(
    policy: PriorityPolicy, n: int = 0, **settings: object
) -> tuple[ConsumerState, FakeSource]:
    src = FakeSource()
    for _ in range(n):
        src.add()
    ids = (f"pin{i}" for i in itertools.count(1))
    cfg = ConsumerSettings(
        stream="ORDERS",
        name="worker",
        priority_policy=policy,
        priority_groups=("g",),
        pinned_ttl_ns=TTL if policy is PriorityPolicy.PINNED_CLIENT else 0,
        **settings,  # type: ignore[arg-type]
    )
    return ConsumerState(cfg, src, new_pin_id=lambda: next(ids)), src


def _advisories(actions: list[Action]) -> list[tuple[str, dict[str, object]]]:
    return [(a.subject, a.payload) for a in actions if isinstance(a, Advisory)]


def g(**fields: object) -> PullGroup:
    return PullGroup(group="g", **fields)  # type: ignore[arg-type]


def test_pin_header_wait_and_ttl() -> None:
    c, _src = _consumer(PriorityPolicy.PINNED_CLIENT, 3)
    out = c.pull_request("_INBOX.a", T0, batch=1, group=g())
    (d,) = delivers(out)
    assert d.msg.header == b"NATS/1.0\r\nNats-Pin-Id: pin1\r\n\r\n"
    assert _advisories(out) == [
        (
            "$JS.EVENT.ADVISORY.CONSUMER.PINNED.ORDERS.worker",
            {
                "type": "io.nats.jetstream.advisory.v1.consumer_group_pinned",
                "account": None,  # the account is filled in where it is sent
                "stream": "ORDERS",
                "consumer": "worker",
                "group": "g",
                "pinned_id": "pin1",
            },
        )
    ]
    assert c.priority is not None
    assert c.priority.info() == [
        {"group": "g", "pinned_client_id": "pin1", "pinned_ts": "1970-01-01T00:16:40Z"}
    ]
    # Without the pin's id: waits while the pin is held; with another id: 423 at once.
    assert c.pull_request("_INBOX.b", T0, batch=1, group=g()) == []
    assert c.pull_request("_INBOX.x", T0, batch=1, group=g(id="old")) == [
        Status("_INBOX.x", 423, "Nats-Pin-Id mismatch")
    ]
    # The pinned client's request renews the TTL from now.
    assert c.next_deadline() == T0 + TTL
    out = c.pull_request("_INBOX.a2", T0 + 2 * S, batch=1, group=g(id="pin1"))
    assert delivered(out) == [2]
    assert c.next_deadline() == T0 + 2 * S + TTL
    assert c.tick(T0 + 2 * S + TTL - 1) == []
    # The TTL runs out: unpinned, and the waiting request is pinned anew.
    out = c.tick(T0 + 2 * S + TTL)
    assert [p["type"] for _, p in _advisories(out)] == [
        "io.nats.jetstream.advisory.v1.consumer_group_unpinned",
        "io.nats.jetstream.advisory.v1.consumer_group_pinned",
    ]
    assert _advisories(out)[0][1]["reason"] == "timeout"
    (d,) = delivers(out)
    assert (d.reply, d.stream_seq, d.msg.header) == (
        "_INBOX.b",
        3,
        b"NATS/1.0\r\nNats-Pin-Id: pin2\r\n\r\n",
    )


def test_stale_pin_without_a_pin_and_unpin() -> None:
    c, _src = _consumer(PriorityPolicy.PINNED_CLIENT, 2)
    # Nothing pinned: a request claiming a pin ends with 423 when a message is for it.
    out = c.pull_request("_INBOX.s", T0, batch=2, group=g(id="gone"))
    assert out == [
        Status(
            "_INBOX.s",
            423,
            "Nats-Wrong-Pin-Id",
            (("Nats-Pending-Messages", "2"), ("Nats-Pending-Bytes", "0")),
        )
    ]
    assert delivered(c.pull_request("_INBOX.a", T0, batch=1, group=g())) == [1]
    assert c.pull_request("_INBOX.b", T0, batch=1, group=g()) == []
    out = c.unpin("g", T0 + 1)
    assert [p.get("reason") for _, p in _advisories(out)] == ["admin", None]
    assert [(d.reply, d.msg.header) for d in delivers(out)] == [
        ("_INBOX.b", b"NATS/1.0\r\nNats-Pin-Id: pin2\r\n\r\n")
    ]


def test_max_bytes_releases_a_pin_just_given() -> None:
    c, src = _consumer(PriorityPolicy.PINNED_CLIENT)
    src.add(data=b"x" * 100)
    out = c.pull_request("_INBOX.a", T0, batch=1, max_bytes=10, group=g())
    assert statuses(out) == [(409, "Message Size Exceeds MaxBytes")]
    assert c.priority is not None
    assert c.priority.pin_id == ""
    assert c.next_deadline() is None


def test_overflow_min_pending_and_min_ack_pending() -> None:
    c, src = _consumer(PriorityPolicy.OVERFLOW, 3)
    assert c.pull_request("_INBOX.p", T0, batch=5, group=g(min_pending=4)) == []
    # Stored messages count: at 4 pending the request is served, while it lasts.
    out = c.message_stored(src.add(), T0)
    assert delivered(out) == [1]
    assert c.num_waiting == 1
    assert delivered(c.pull_request("_INBOX.q", T0, batch=1, group=g())) == [2]
    # 2 unacknowledged: a request wanting 2 is served, and a redelivery counts as pending.
    out = c.pull_request("_INBOX.r", T0, batch=1, group=g(min_ack_pending=2))
    assert [d.reply for d in delivers(out)] == ["_INBOX.r"]


def test_prioritized_order_and_requeue() -> None:
    c, src = _consumer(PriorityPolicy.PRIORITIZED)
    c.pull_request("_INBOX.low", T0, batch=5, group=g(priority=5))
    c.pull_request("_INBOX.high", T0, batch=2, group=g(priority=0))
    c.pull_request("_INBOX.high2", T0, batch=2, group=g(priority=0))
    c.pull_request("_INBOX.plain", T0, batch=1)  # not the JSON form: last of all
    out: list[Action] = []
    for _ in range(6):
        out += c.message_stored(src.add(), T0)
    replies = [d.reply for d in delivers(out)]
    assert replies == [
        "_INBOX.high",
        "_INBOX.high2",
        "_INBOX.high",
        "_INBOX.high2",
        "_INBOX.low",
        "_INBOX.low",
    ]
    assert not any(isinstance(a, DeliverRun) for a in out)


def test_request_field_checks() -> None:
    c, _ = _consumer(PriorityPolicy.OVERFLOW, 1)
    assert statuses(c.pull_request("_INBOX.a", T0, group=PullGroup())) == [
        (400, "Bad Request - Priority Group missing")
    ]
    assert statuses(c.pull_request("_INBOX.a", T0, group=PullGroup("h"))) == [
        (400, "Bad Request - Invalid Priority Group")
    ]
    assert statuses(c.pull_request("_INBOX.a", T0, group=g(id="x"))) == [
        (400, "Bad Request - Not a Pinned Client Priority consumer")
    ]
    plain, _ = make(1)
    assert statuses(plain.pull_request("_INBOX.a", T0, group=g(min_pending=1))) == [
        (400, "Bad Request - Not a Overflow Priority consumer")
    ]
    assert statuses(plain.pull_request("_INBOX.a", T0, group=g(priority=10))) == [
        (400, "Bad Request - Priority must be between 0 and 9")
    ]
    # Without a policy the group is not looked at: delivered.
    assert delivered(plain.pull_request("_INBOX.a", T0, group=PullGroup("h"))) == [1]


def test_without_a_policy_the_shortcut_stays_and_an_update_keeps_the_pin() -> None:
    plain, _ = make(3)
    out = plain.pull_request("_INBOX.a", T0, batch=3)
    assert [type(a) for a in out] == [DeliverRun]
    assert plain.priority is None
    c, _ = _consumer(PriorityPolicy.PINNED_CLIENT, 3)
    c.pull_request("_INBOX.a", T0, batch=1, group=g())
    c.cfg = dataclasses.replace(c.cfg, max_ack_pending=10)
    assert c.priority is not None
    assert c.priority.pin_id == "pin1"
    c.cfg = dataclasses.replace(c.cfg, priority_policy=PriorityPolicy.NONE)
    assert c.delivery.priority is None  # (`c.priority` was narrowed above)
    assert c.next_deadline() is not None


def test_the_timeout_names_the_group_the_pin_was_given_in() -> None:
    c, _ = _consumer(PriorityPolicy.PINNED_CLIENT, 1)
    c.cfg = dataclasses.replace(c.cfg, priority_groups=("g", "h"))
    c.pull_request("_INBOX.a", T0, batch=1, group=PullGroup("h"))
    out = c.tick(T0 + TTL)
    assert [(p["group"], p["reason"]) for _, p in _advisories(out)] == [("h", "timeout")]
