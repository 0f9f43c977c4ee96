"""Ack policies, ack floor, max_ack_pending, ack_wait/backoff, NAK, WPI, TERM and
max_deliver, all with a manual clock (wire reference §6.3, §6.4)."""

from __future__ import annotations

from brook.jetstream.consumer import (
    Acked,
    AckKind,
    AckPolicy,
    Advisory,
    RemoveMessage,
    Retention,
)

from .fakes import S, delivered, delivers, make

T0 = 1_000 * S


def test_explicit_ack_and_floor_advances_over_contiguous() -> None:
    c, _ = make(4)
    out = c.pull_request("inbox", T0, batch=4)
    assert delivered(out) == [1, 2, 3, 4]
    assert c.info()["delivered"] == {"consumer_seq": 4, "stream_seq": 4}
    c.ack(2, 2, AckKind.ACK, T0)
    assert c.ack_floor == (0, 0)
    c.ack(1, 1, AckKind.ACK, T0)
    assert c.ack_floor == (2, 2)
    c.ack(4, 4, AckKind.ACK, T0)
    assert c.ack_floor == (2, 2)
    assert c.num_ack_pending == 1
    c.ack(3, 3, AckKind.ACK, T0)
    assert c.ack_floor == (4, 4)
    assert c.num_ack_pending == 0
    c.check_invariants()


def test_duplicate_and_unknown_acks_are_ignored() -> None:
    c, _ = make(2)
    c.pull_request("inbox", T0, batch=1)
    assert c.ack(1, 1, AckKind.ACK, T0) == []
    assert c.ack(1, 1, AckKind.ACK, T0) == []
    assert c.ack(2, 2, AckKind.ACK, T0) == []  # above the delivered position
    assert c.ack(99, 99, AckKind.TERM, T0) == []
    assert c.ack(99, 99, AckKind.NAK, T0) == []
    assert c.ack_floor == (1, 1)


def test_ack_all_acknowledges_everything_up_to_seq() -> None:
    c, _ = make(5, ack_policy=AckPolicy.ALL)
    c.pull_request("inbox", T0, batch=5)
    c.ack(3, 3, AckKind.ACK, T0)
    assert c.pending_seqs() == [4, 5]
    assert c.ack_floor == (3, 3)
    assert c.ack(2, 2, AckKind.ACK, T0) == []  # at or below the floor: no-op
    assert c.ack(9, 9, AckKind.ACK, T0) == []  # beyond delivered: ignored
    assert c.pending_seqs() == [4, 5]
    c.ack(5, 5, AckKind.ACK, T0)
    assert c.ack_floor == (5, 5)


def test_ack_none_tracks_nothing_and_floor_follows_delivered() -> None:
    c, _ = make(3, ack_policy=AckPolicy.NONE)
    out = c.pull_request("inbox", T0, batch=3)
    assert delivered(out) == [1, 2, 3]
    assert c.num_ack_pending == 0
    assert c.ack_floor == (3, 3)
    assert c.ack(1, 1, AckKind.NAK, T0) == []
    assert c.tick(T0 + 3600 * S) == []


def test_max_ack_pending_pauses_new_deliveries_until_acks() -> None:
    c, src = make(5, max_ack_pending=2)
    out = c.pull_request("inbox", T0, batch=5, expires_ns=10 * S)
    assert delivered(out) == [1, 2]
    assert c.num_waiting == 1
    assert delivered(c.message_stored(src.add(), T0)) == []
    out = c.ack(1, 1, AckKind.ACK, T0 + 1)
    assert delivered(out) == [3]
    assert c.num_ack_pending == 2
    c.check_invariants()


def test_redeliveries_still_flow_at_max_ack_pending() -> None:
    c, _ = make(3, max_ack_pending=1, ack_wait_ns=5 * S)
    assert delivered(c.pull_request("a", T0, batch=1)) == [1]
    c.pull_request("b", T0, batch=1, expires_ns=60 * S)
    out = c.tick(T0 + 5 * S)
    assert [(d.stream_seq, d.delivery_count, d.reply) for d in delivers(out)] == [(1, 2, "b")]


def test_ack_wait_redelivery_with_new_consumer_seq() -> None:
    c, _ = make(2, ack_wait_ns=30 * S)
    c.pull_request("inbox", T0, batch=2)
    assert c.next_deadline() == T0 + 30 * S
    assert c.tick(T0 + 30 * S - 1) == []
    c.pull_request("inbox2", T0 + 29 * S, batch=5, expires_ns=60 * S)
    out = c.tick(T0 + 30 * S)
    got = [(d.stream_seq, d.consumer_seq, d.delivery_count) for d in delivers(out)]
    assert got == [(1, 3, 2), (2, 4, 2)]
    assert delivers(out)[0].ack_subject.startswith(b"$JS.ACK.ORDERS.worker.2.1.3.")
    info = c.info()
    assert info["delivered"] == {"consumer_seq": 4, "stream_seq": 2}
    assert info["num_redelivered"] == 2
    assert c.next_deadline() == T0 + 60 * S


def test_backoff_schedule_last_value_repeats() -> None:
    c, _ = make(1, backoff_ns=(1 * S, 5 * S, 10 * S))
    c.pull_request("r", T0, batch=1)
    c.pull_request("r", T0, batch=100, expires_ns=1000 * S)
    times = []
    now = T0
    for _ in range(5):
        deadline = c.next_deadline()
        assert deadline is not None
        out = c.tick(deadline)
        assert delivered(out) == [1]
        times.append(deadline - now)
        now = deadline
    assert times == [1 * S, 5 * S, 10 * S, 10 * S, 10 * S]
    assert c.delivery_count(1) == 6


def test_nak_without_delay_redelivers_now_and_advises() -> None:
    c, _ = make(1)
    c.pull_request("r", T0, batch=1)
    c.pull_request("r2", T0, batch=1, expires_ns=5 * S)
    out = c.ack(1, 1, AckKind.NAK, T0 + 1)
    adv = [a for a in out if isinstance(a, Advisory)]
    assert adv[0].subject == "$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.ORDERS.worker"
    assert adv[0].payload["stream_seq"] == 1
    assert [(d.stream_seq, d.delivery_count, d.reply) for d in delivers(out)] == [(1, 2, "r2")]


def test_nak_with_delay_redelivers_after_delay_like_reference() -> None:
    # js-push-durable-acks: ack, nak(delay=1s), term, wpi then ack; pa.2 back after 1 s.
    c, src = make(4, deliver_subject="_INBOX.push")
    out = c.set_push_interest(True, T0)
    assert [(d.consumer_seq, d.stream_seq) for d in delivers(out)] == [(i, i) for i in (1, 2, 3, 4)]
    c.ack(1, 1, AckKind.ACK, T0)
    c.ack(2, 2, AckKind.NAK, T0, delay_ns=1 * S)
    term = c.ack(3, 3, AckKind.TERM, T0, reason="")
    assert any(isinstance(a, Advisory) and a.kind == "MSG_TERMINATED" for a in term)
    c.ack(4, 4, AckKind.WPI, T0)
    c.ack(4, 4, AckKind.ACK, T0 + S // 5)
    assert c.tick(T0 + S - 1) == []
    out = c.tick(T0 + S)
    d = delivers(out)[0]
    assert (d.delivery_count, d.stream_seq, d.consumer_seq) == (2, 2, 5)
    assert d.ack_subject == b"$JS.ACK.ORDERS.worker.2.2.5.%d.0" % src.msgs[2].ts_ns
    c.ack(2, 5, AckKind.ACK, T0 + S)
    info = c.info()
    assert info["delivered"] == {"consumer_seq": 5, "stream_seq": 4}
    assert info["ack_floor"] == {"consumer_seq": 5, "stream_seq": 4}
    assert info["num_ack_pending"] == 0


def test_wpi_restarts_the_ack_timer() -> None:
    c, _ = make(1, ack_wait_ns=10 * S)
    c.pull_request("r", T0, batch=1)
    c.pull_request("r", T0, batch=1, expires_ns=100 * S)
    c.ack(1, 1, AckKind.WPI, T0 + 8 * S)
    assert c.next_deadline() == T0 + 18 * S
    assert delivered(c.tick(T0 + 17 * S)) == []
    assert delivered(c.tick(T0 + 18 * S)) == [1]


def test_wpi_after_expiry_takes_message_back_from_redelivery_queue() -> None:
    c, _ = make(1, ack_wait_ns=10 * S)
    c.pull_request("r", T0, batch=1)
    assert c.tick(T0 + 10 * S) == []  # due, but nobody is waiting
    c.ack(1, 1, AckKind.WPI, T0 + 11 * S)
    assert delivered(c.pull_request("r", T0 + 12 * S, batch=1, expires_ns=5 * S)) == []


def test_term_never_redelivers_and_reports_reason() -> None:
    c, _ = make(1, ack_wait_ns=1 * S)
    c.pull_request("r", T0, batch=1)
    out = c.ack(1, 1, AckKind.TERM, T0, reason="poison")
    (adv,) = [a for a in out if isinstance(a, Advisory)]
    assert adv.subject == "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.ORDERS.worker"
    assert adv.payload["reason"] == "poison"
    assert adv.payload["type"] == "io.nats.jetstream.advisory.v1.terminated"
    assert c.num_ack_pending == 0
    c.pull_request("r", T0, batch=1, expires_ns=100 * S)
    assert delivered(c.tick(T0 + 50 * S)) == []


def test_max_deliver_dead_letters_once_with_advisory() -> None:
    c, _ = make(2, ack_wait_ns=1 * S, max_deliver=2, max_ack_pending=1)
    c.pull_request("r", T0, batch=1)
    c.pull_request("r", T0, batch=10, expires_ns=100 * S)
    assert delivered(c.tick(T0 + 1 * S)) == [1]
    out = c.tick(T0 + 2 * S)
    adv = [a for a in out if isinstance(a, Advisory)]
    assert [a.kind for a in adv] == ["MAX_DELIVERIES"]
    assert adv[0].payload == {
        "type": "io.nats.jetstream.advisory.v1.max_deliver",
        "stream": "ORDERS",
        "consumer": "worker",
        "stream_seq": 1,
        "deliveries": 2,
    }
    # The dead-lettered message frees its slot: the request now gets message 2.
    assert delivered(out) == [2]
    assert 1 not in c.pending_seqs()
    # As nats-server: a dead letter holds the ack floor and counts as redelivered.
    assert c.ack_floor == (0, 0)
    assert c.num_redelivered == 1
    assert all(not isinstance(a, Advisory) for a in c.tick(T0 + 50 * S))


def test_max_deliver_applies_to_nak_when_it_comes_up() -> None:
    """As nats-server: a NAK at the last delivery queues the message; it is given up on
    (with the advisory) when it would be redelivered."""
    c, _ = make(1, max_deliver=1)
    c.pull_request("r", T0, batch=1)
    out = c.ack(1, 1, AckKind.NAK, T0)
    assert [a.kind for a in out if isinstance(a, Advisory)] == ["MSG_NAKED"]
    assert c.num_ack_pending == 1
    out = c.pull_request("r", T0, batch=1, expires_ns=S)
    assert [a.kind for a in out if isinstance(a, Advisory)] == ["MAX_DELIVERIES"]
    assert delivered(out) == []
    assert (c.num_ack_pending, c.num_redelivered) == (0, 0)  # delivered once: not redelivered


def test_max_deliver_gives_up_when_the_next_request_comes() -> None:
    """As nats-server: past the last ack deadline with nothing waiting, a message stays
    pending (and redelivered) until something may be delivered; only max_deliver 1 is
    given up on at the deadline (its `checkPending` counts redeliveries, at least 1)."""
    c, _ = make(2, ack_wait_ns=1 * S, max_deliver=2)
    assert delivered(c.pull_request("r", T0, batch=1)) == [1]
    assert c.tick(T0 + 1 * S) == []
    assert delivered(c.pull_request("r", T0 + 2 * S, batch=1)) == [1]
    assert c.tick(T0 + 3 * S) == []
    assert (c.num_ack_pending, c.num_redelivered, c.next_deadline()) == (1, 1, None)
    out = c.pull_request("r", T0 + 9 * S, batch=1)
    assert [a.kind for a in out if isinstance(a, Advisory)] == ["MAX_DELIVERIES"]
    assert delivered(out) == [2]
    assert (c.pending_seqs(), c.num_redelivered) == ([2], 1)
    once, _ = make(1, ack_wait_ns=1 * S, max_deliver=1)
    once.pull_request("r", T0, batch=1)
    assert [a.kind for a in once.tick(T0 + 1 * S) if isinstance(a, Advisory)] == ["MAX_DELIVERIES"]
    assert once.num_ack_pending == 0


def test_removed_message_is_terminated_once_removed_or_found_gone() -> None:
    """nats-server: a pending message the stream removed is acknowledged, with a
    MSG_TERMINATED advisory, when the store reports the removal (`message_removed`) or,
    if nobody did, when it is found gone at its redelivery."""
    c, src = make(3, ack_wait_ns=1 * S)
    c.pull_request("r", T0, batch=3)
    src.remove(1)
    c.pull_request("r", T0, batch=5, expires_ns=100 * S)
    out = c.tick(T0 + 1 * S)
    assert delivered(out) == [2, 3]
    adv = [a for a in out if isinstance(a, Advisory)]
    assert [(a.kind, a.payload["stream_seq"], a.payload["reason"]) for a in adv] == [
        ("MSG_TERMINATED", 1, "Unacknowledged message was deleted")
    ]
    assert (c.pending_seqs(), c.ack_floor) == ([2, 3], (1, 1))
    src.remove(2)
    out = c.message_removed(2, T0 + 2 * S)
    assert [a.payload["deliveries"] for a in out if isinstance(a, Advisory)] == [2]
    assert (c.pending_seqs(), c.ack_floor) == ([3], (2, 2))
    assert c.message_removed(7, T0 + 2 * S) == []  # not held here: no news


def test_workqueue_retention_removes_on_ack_and_term() -> None:
    c, _ = make(3, retention=Retention.WORKQUEUE)
    c.pull_request("r", T0, batch=3)
    assert c.ack(1, 1, AckKind.ACK, T0) == [RemoveMessage(1)]
    assert RemoveMessage(2) in c.ack(2, 2, AckKind.TERM, T0)
    assert c.ack(3, 3, AckKind.NAK, T0 + 1, delay_ns=S)[1:] == []


def test_interest_retention_reports_acked() -> None:
    c, _ = make(3, retention=Retention.INTEREST, ack_policy=AckPolicy.ALL)
    c.pull_request("r", T0, batch=3)
    assert c.ack(2, 2, AckKind.ACK, T0) == [Acked(1), Acked(2)]
    n, _ = make(1, retention=Retention.INTEREST, ack_policy=AckPolicy.NONE)
    out = n.pull_request("r", T0, batch=1)
    assert out[1:] == [Acked(1)]


def test_ack_next_acks_then_pulls_on_ack_reply() -> None:
    c, _ = make(3)
    c.pull_request("r", T0, batch=1)
    out = c.ack(1, 1, AckKind.NXT, T0, reply="_INBOX.nxt")
    assert [(d.stream_seq, d.reply) for d in delivers(out)] == [(2, "_INBOX.nxt")]
    assert c.pending_seqs() == [2]


def test_deadlines_out_of_delivery_order_come_due_in_deadline_order() -> None:
    # Deadlines are kept in two sorted parts (in-order arrivals and the rest); whatever
    # part an entry is in, redeliveries follow the deadlines, and the next deadline is the
    # earliest one that still counts.
    c, src = make(3, ack_wait_ns=10 * S)
    assert delivered(c.pull_request("inbox", T0, batch=3)) == [1, 2, 3]
    assert c.next_deadline() == T0 + 10 * S
    c.ack(1, 1, AckKind.NAK, T0 + 1 * S, delay_ns=25 * S)  # due at 26 s, after 2 and 3
    c.ack(3, 3, AckKind.WPI, T0 + 1 * S)  # due at 11 s
    src.add()
    assert delivered(c.pull_request("inbox", T0 + 2 * S, batch=1)) == [4]  # due at 12 s
    c.ack(2, 2, AckKind.ACK, T0 + 3 * S)
    assert c.next_deadline() == T0 + 11 * S
    assert c.tick(T0 + 11 * S) == []  # 3 is due: queued, no request waiting
    assert c.next_deadline() == T0 + 12 * S
    assert c.tick(T0 + 30 * S) == []
    out = c.pull_request("inbox", T0 + 30 * S, batch=3)
    assert delivered(out) == [3, 4, 1]
    assert c.next_deadline() == T0 + 40 * S
    c.check_invariants()


def test_a_run_of_acks_leaves_the_floor_below_a_message_given_up_on() -> None:
    # Message 1 is given up on (max_deliver 1) while 2 and 3 are pending: the floor stays
    # below it, so acking 2, now the lowest pending, moves nothing, in a run of acks as
    # one by one (the run's shortcut applies only when the floor sits right below).
    runs, singles = (
        make(3, max_deliver=1, ack_wait_ns=10 * S),
        make(3, max_deliver=1, ack_wait_ns=10 * S),
    )
    for c, _ in (runs, singles):
        assert delivered(c.pull_request("a", T0, batch=1)) == [1]
        assert delivered(c.pull_request("b", T0 + 5 * S, batch=2)) == [2, 3]
        c.tick(T0 + 11 * S)
        assert c.pending_seqs() == [2, 3]
    runs[0].ack_explicit_run([2], T0 + 12 * S)
    singles[0].ack(2, 2, AckKind.ACK, T0 + 12 * S)
    assert runs[0].ack_floor == singles[0].ack_floor == (0, 0)
    runs[0].ack_explicit_run([3], T0 + 12 * S)
    singles[0].ack(3, 3, AckKind.ACK, T0 + 12 * S)
    assert runs[0].ack_floor == singles[0].ack_floor == (3, 3)
    assert runs[0].snapshot() == singles[0].snapshot()
    # A late ack of the message given up on releases it, alongside an ordinary one.
    for c, src in (runs, singles):
        src.add()
        assert delivered(c.pull_request("c", T0 + 13 * S, batch=1)) == [4]
    runs[0].ack_explicit_run([1, 4], T0 + 14 * S)
    singles[0].ack(1, 1, AckKind.ACK, T0 + 14 * S)
    singles[0].ack(4, 4, AckKind.ACK, T0 + 14 * S)
    assert runs[0].snapshot() == singles[0].snapshot()
    assert runs[0].info()["num_redelivered"] == 0


def test_pending_below_the_first_sequence_at_start_is_dropped_as_nats_server() -> None:
    """At start (nats-server's `checkPending`): pending deliveries of messages below the
    stream's first sequence are dropped without an advisory; the floor moves to the
    highest sequences dropped, however they were acked around them, and to `delivered`
    once nothing is pending."""
    c, src = make(5, ack_wait_ns=10 * S)
    c.pull_request("r", T0, batch=5)
    c.ack(2, 2, AckKind.ACK, T0)
    src.remove(1)
    src.remove(3)
    c.stream_starts_at(4)
    assert (c.pending_seqs(), c.ack_floor, c.last_ack_ns) == ([4, 5], (3, 3), T0)
    c.stream_starts_at(6)
    assert (c.pending_seqs(), c.ack_floor) == ([], (5, 5))
    c.check_invariants()
