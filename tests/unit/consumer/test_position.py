"""The consumer's position (`next_stream_seq`) past messages its filter passed over, and a
change of filters (`source_changed`): what nats-server does, as
tests/conformance/test_consumer_update_conformance.py shows on the wire."""

from __future__ import annotations

from brook.jetstream.consumer import AckKind

from .fakes import FakeSource, S, delivered, make

T0 = 1_000 * S


def _same_messages(src: FakeSource, filter_subject: str) -> FakeSource:
    other = FakeSource(filter_subject)
    other.msgs, other.last = src.msgs, src.last
    return other


def test_a_search_that_finds_nothing_moves_a_filtered_position_to_the_end() -> None:
    c, src = make(filter_subject="orders.a")
    src.add("orders.a")
    src.add("orders.b")
    src.add("orders.b")
    assert delivered(c.pull_request("_INBOX.a", T0, batch=10, no_wait=True)) == [1]
    assert (c.next_stream_seq, c.delivered_stream_seq, c.num_pending()) == (4, 1, 0)


def test_an_unfiltered_position_stays_after_the_last_delivery() -> None:
    c, src = make(3)
    src.remove(3)
    assert delivered(c.pull_request("_INBOX.a", T0, batch=10, no_wait=True)) == [1, 2]
    assert c.next_stream_seq == 3


def test_new_filters_apply_from_the_position_with_num_pending_counted_again() -> None:
    c, src = make(filter_subject="orders.a")
    for subject in ("orders.a", "orders.b", "orders.a", "orders.b"):
        src.add(subject)
    out = c.pull_request("_INBOX.a", T0, batch=1)
    assert delivered(out) == [1]
    c.ack(1, 1, AckKind.ACK, T0)
    assert c.num_pending() == 1
    assert c.source_changed(_same_messages(src, "orders.b"), T0) == []
    assert c.num_pending() == 2  # orders.b at 2 and 4, both after the position
    assert delivered(c.pull_request("_INBOX.a", T0, batch=10, no_wait=True)) == [2, 4]
