"""What a mirror or source makes of each delivery from its origin's consumer, as
nats-server's processInboundMirrorMsg and processInboundSourceMsg decide it."""

from __future__ import annotations

from brook.jetstream.sourcing import Tracking, Verdict, lag


def test_a_mirror_stores_consecutive_sequences_and_skips_what_its_origin_lost() -> None:
    t = Tracking(consumer="C1")
    assert t.mirror_delivery("C1", 1, 1, 1) is Verdict.STORE
    assert t.mirror_delivery("C1", 2, 2, 1) is Verdict.STORE
    # The origin expired 3 and 4: the delivery sequence follows, the stream sequence jumps.
    assert t.mirror_delivery("C1", 5, 3, 1) is Verdict.SKIP_AND_STORE
    t.skipped(5)
    assert (t.sseq, t.dseq) == (5, 3)
    # A delivery went missing (the delivery sequence jumps): recreate after 5.
    assert t.mirror_delivery("C1", 7, 5, 1) is Verdict.RETRY
    assert (t.sseq, t.dseq) == (5, 3)


def test_only_the_current_consumer_counts() -> None:
    t = Tracking(sseq=10)
    assert t.mirror_delivery("C1", 11, 1, 1) is Verdict.IGNORE  # no create reply yet
    t.consumer = "C2"  # the create reply named it
    assert t.mirror_delivery("C1", 11, 1, 1) is Verdict.IGNORE  # the previous consumer's
    assert t.source_delivery("C1", 11, 1, 1) is Verdict.IGNORE
    assert t.mirror_delivery("C2", 11, 1, 1) is Verdict.STORE
    assert (t.sseq, t.dseq) == (11, 1)


def test_older_deliveries_and_redeliveries_store_nothing() -> None:
    t = Tracking(sseq=5, dseq=5, consumer="C")
    assert t.mirror_delivery("C", 4, 6, 1) is Verdict.DUPLICATE
    assert t.dseq == 6  # counted as delivered all the same
    assert t.mirror_delivery("C", 7, 7, 2) is Verdict.IGNORE
    assert t.source_delivery("C", 3, 9, 1) is Verdict.DUPLICATE
    assert t.dseq == 6


def test_a_source_takes_jumps_in_origin_sequences_but_not_in_deliveries() -> None:
    t = Tracking(consumer="C")
    assert t.source_delivery("C", 3, 1, 1) is Verdict.STORE  # filtered: 1 and 2 are not ours
    assert t.source_delivery("C", 9, 2, 1) is Verdict.STORE
    assert t.source_delivery("C", 12, 4, 1) is Verdict.RETRY  # delivery 3 is missing
    assert t.source_delivery("C", 12, 2, 1) is Verdict.IGNORE  # stale delivery
    assert (t.sseq, t.dseq) == (9, 2)


def test_lag_leaves_out_the_delivery_itself() -> None:
    assert (lag(0), lag(1), lag(5)) == (0, 0, 4)
