"""`ConsumerState.stream_purged`: nats-server's consumer `purge` and the store's removal
report, step by step, with a manual clock (tests/conformance/test_consumer_purge_conformance.py
compares the same against nats-server)."""

from __future__ import annotations

from brook.jetstream.consumer import AckKind, AckPolicy, Advisory

from .fakes import S, delivered, make

T0 = 1_000 * S


def test_full_purge_moves_past_everything_and_floor_to_delivered() -> None:
    c, src = make(8)
    c.pull_request("inbox", T0, batch=3)
    c.ack(1, 1, AckKind.ACK, T0)
    for seq in range(1, 9):
        src.remove(seq)
    assert c.stream_purged(9, T0, dead_below=9) == []
    info = c.info()
    assert info["delivered"] == {"consumer_seq": 3, "stream_seq": 8}
    assert info["ack_floor"] == {"consumer_seq": 3, "stream_seq": 8}
    assert (info["num_ack_pending"], info["num_pending"]) == (0, 0)
    assert c.last_ack_ns == T0
    src.add()
    assert delivered(c.pull_request("inbox", T0, batch=5)) == [9]
    c.check_invariants()


def test_partial_purge_floor_is_highest_dropped_and_start_minus_one() -> None:
    c, src = make(8)
    c.pull_request("inbox", T0, batch=6)
    c.ack(2, 2, AckKind.ACK, T0)
    c.ack(4, 4, AckKind.ACK, T0)
    src.remove(1)
    src.remove(2)
    c.stream_purged(3, T0, dead_below=3)
    # nats-server: consumer seq of the highest delivery dropped (1), stream seq start - 1.
    assert c.ack_floor == (1, 2)
    assert c.pending_seqs() == [3, 5, 6]
    c.ack(3, 3, AckKind.ACK, T0)  # consumer seq 3 is not right on the floor: it stays
    assert c.ack_floor == (1, 2)
    c.ack(5, 5, AckKind.ACK, T0)
    c.ack(6, 6, AckKind.ACK, T0)
    assert c.ack_floor == (6, 6)
    c.check_invariants()


def test_store_floor_higher_than_the_written_one_is_kept() -> None:
    """A wider consumer: the store's floor moved past the dropped delivery to right below
    the next pending one, above the in-memory floor the purge writes: the store keeps its."""
    c, src = make(3)
    c.pull_request("inbox", T0, batch=3)
    src.remove(1)
    c.stream_purged(2, T0, wider=True)
    assert c.ack_floor == (1, 1)
    assert c.pending_seqs() == [2, 3]


def test_wider_purge_floor_above_pending_and_acks_below_it_leave_it() -> None:
    c, src = make(4)
    c.pull_request("inbox", T0, batch=4)
    src.remove(2)
    src.remove(4)
    c.stream_purged(1, T0, wider=True)
    assert c.pending_seqs() == [1, 3]
    assert c.ack_floor == (4, 0)  # nats-server reports this
    c.ack(1, 1, AckKind.ACK, T0)
    c.ack(3, 3, AckKind.ACK, T0)
    assert c.num_ack_pending == 0
    assert c.ack_floor == (4, 0)
    src.add()
    c.pull_request("inbox", T0, batch=1)
    c.ack(5, 5, AckKind.ACK, T0)
    assert c.ack_floor == (5, 5)


def test_redelivery_queue_is_emptied_until_the_ack_wait_runs_out() -> None:
    c, src = make(4, ack_wait_ns=10 * S)
    c.pull_request("inbox", T0, batch=2)
    c.ack(2, 2, AckKind.NAK, T0 + S)
    src.remove(1)
    c.stream_purged(2, T0 + 2 * S, dead_below=2)
    assert c.pending_seqs() == [2]
    assert delivered(c.pull_request("inbox", T0 + 2 * S, batch=1)) == [3]  # not 2
    assert c.next_deadline() == T0 + 10 * S
    assert delivered(c.tick(T0 + 10 * S)) == []
    assert delivered(c.pull_request("inbox", T0 + 10 * S, batch=1)) == [2]
    c.check_invariants()


def test_a_pending_message_removed_on_its_own_is_terminated() -> None:
    c, src = make(3)
    c.pull_request("inbox", T0, batch=3)
    src.remove(2)
    out = c.stream_purged(None, T0, removed_seq=2)
    advisories = [a for a in out if isinstance(a, Advisory)]
    assert [a.payload["reason"] for a in advisories] == ["Unacknowledged message was deleted"]
    assert advisories[0].payload["stream_seq"] == 2
    assert c.pending_seqs() == [1, 3]
    assert c.ack_floor == (0, 0)


def test_dead_letters_forgotten_alone_or_below_the_first() -> None:
    c, src = make(4, ack_wait_ns=S, max_deliver=1)
    c.pull_request("inbox", T0, batch=3)
    c.tick(T0 + S)
    assert c.needs(1)  # dead letters
    assert c.needs(3)
    src.remove(3)
    c.stream_purged(None, T0 + 2 * S, removed_seq=3)
    assert not c.needs(3)
    assert c.needs(1)
    assert c.last_ack_ns == T0 + 2 * S
    src.remove(1)
    c.stream_purged(None, T0 + 2 * S, dead_below=2)
    assert not c.needs(1)
    assert c.needs(2)


def test_giving_up_moves_the_floor_a_purge_writes() -> None:
    """nats-server moves its in-memory floor when it gives up on a message, not the
    reported one; a purge writes the in-memory one."""
    c, src = make(3, ack_wait_ns=S, max_deliver=1)
    c.pull_request("inbox", T0, batch=2)
    c.tick(T0 + S)
    assert c.ack_floor == (0, 0)
    c.pull_request("inbox", T0 + S, batch=1)
    src.remove(1)
    c.stream_purged(2, T0 + S, dead_below=2)
    assert c.ack_floor == (2, 2)
    assert c.pending_seqs() == [3]


def test_ack_all_floor_follows_the_highest_dropped() -> None:
    c, src = make(6, ack_policy=AckPolicy.ALL)
    c.pull_request("inbox", T0, batch=6)
    for seq in (1, 2, 3):
        src.remove(seq)
    c.stream_purged(4, T0, dead_below=4)
    assert c.ack_floor == (3, 3)
    assert c.pending_seqs() == [4, 5, 6]
