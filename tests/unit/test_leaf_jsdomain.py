"""The `@<subject>` suffix of a JetStream delivery's reply across a leaf (ADR 0036), as
nats-server's `jsAckDeliverIdx` reads it, and the domains' outgoing block."""

from __future__ import annotations

from brook.leafnode.jsdomain import delivered_at, domain_block, split_delivered, with_delivered

ACK = b"$JS.ACK.ORDERS.C.1.5.5.1700000000000000000.0"


def test_suffix_read_after_the_eighth_dot() -> None:
    assert split_delivered(ACK + b"@orders.new") == (ACK, b"orders.new")
    # a stream or consumer name may hold `@`: only the first after eight dots counts
    named = b"$JS.ACK.OR@D.C@x.1.5.5.1700000000000000000.0"
    assert split_delivered(named + b"@a@b") == (named, b"a@b")
    assert delivered_at(named) == -1
    # no suffix, an empty one, no ack reply
    assert split_delivered(ACK) is None
    assert split_delivered(ACK + b"@") is None
    assert split_delivered(b"_INBOX.x@orders.new") is None
    assert split_delivered(b"$JS.ACK.S.C.1@x") is None


def test_suffix_written_once() -> None:
    assert with_delivered(ACK, b"orders.new") == ACK + b"@orders.new"
    assert with_delivered(ACK + b"@orders.new", b"other") == ACK + b"@orders.new"
    assert with_delivered(b"_INBOX.r", b"s") == b"_INBOX.r@s"


def test_domain_block() -> None:
    assert domain_block("hub", "edge") == (b"$JS.hub.API.>",)
    assert domain_block("hub", "") == (b"$JS.hub.API.>",)
    assert domain_block("hub", "hub") == ()
    assert domain_block("", "edge") == ()
