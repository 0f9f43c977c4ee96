"""Pull requests: batch, no_wait, expires, max_waiting, limits, max_bytes, heartbeats
(wire reference §6.5 and the js-pull-fetch* transcripts)."""

from __future__ import annotations

from brook.jetstream.consumer import AckKind, Status

from .fakes import S, delivered, delivers, make, statuses

T0 = 1_000 * S
PENDING_1_0 = (("Nats-Pending-Messages", "1"), ("Nats-Pending-Bytes", "0"))


def test_fetch1_then_timeout_then_no_wait_404() -> None:  # js-pull-fetch1
    c, src = make(1)
    assert c.num_pending() == 1
    out = c.pull_request("_INBOX.a", T0, batch=1, expires_ns=1_999_900_000)
    (d,) = delivers(out)
    assert d.ack_subject == b"$JS.ACK.ORDERS.worker.1.1.1.%d.0" % src.msgs[1].ts_ns
    assert d.reply == "_INBOX.a"
    assert len(out) == 1  # batch complete: silently
    c.ack(1, 1, AckKind.ACK, T0)
    assert c.pull_request("_INBOX.a", T0, batch=1, expires_ns=1_999_900_000) == []
    assert c.next_deadline() == T0 + 1_999_900_000
    assert c.tick(T0 + 1_999_899_999) == []
    out = c.tick(T0 + 1_999_900_000)
    assert out == [Status("_INBOX.a", 408, "Request Timeout", PENDING_1_0)]
    assert isinstance(out[0], Status)
    assert out[0].header_block() == (
        b"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 1\r\nNats-Pending-Bytes: 0\r\n\r\n"
    )
    assert c.num_waiting == 0
    out = c.pull_request("_INBOX.b", T0 + 2 * S, batch=1, no_wait=True)
    assert out == [Status("_INBOX.b", 404, "No Messages")]


def test_fetch10_with_three_messages() -> None:  # js-pull-fetch10
    c, _ = make(3)
    out = c.pull_request("_INBOX.x", T0, batch=10, expires_ns=2_999_900_000, no_wait=True)
    assert [d.ack_subject.split(b".")[-1] for d in delivers(out)] == [b"2", b"1", b"0"]
    assert statuses(out) == [(404, "No Messages")]
    assert isinstance(out[-1], Status)
    assert c.num_waiting == 0


def test_empty_fetch_with_no_wait_and_expires_long_polls() -> None:  # empty-batch
    c, src = make(0)
    assert c.pull_request("_INBOX.e", T0, batch=5, expires_ns=1_999_900_000, no_wait=True) == []
    out = c.tick(T0 + 1_999_900_000)
    assert out[0] == Status(
        "_INBOX.e",
        408,
        "Request Timeout",
        (("Nats-Pending-Messages", "5"), ("Nats-Pending-Bytes", "0")),
    )
    # the same request, had a message arrived, takes it and ends with 404
    c.pull_request("_INBOX.f", T0, batch=5, expires_ns=S, no_wait=True)
    out = c.message_stored(src.add(), T0 + 1)
    assert delivered(out) == [1]
    assert statuses(out) == [(404, "No Messages")]


def test_waiting_request_is_served_when_a_message_is_stored() -> None:
    c, src = make(0)
    c.pull_request("r", T0, batch=2, expires_ns=10 * S)
    out = c.message_stored(src.add(), T0 + 1)
    assert delivered(out) == [1]
    assert c.num_waiting == 1
    out = c.message_stored(src.add(), T0 + 2)
    assert delivered(out) == [2]
    assert c.num_waiting == 0


def test_filtered_consumer_skips_other_subjects() -> None:
    c, src = make(0, filter_subject="orders.a")
    src.add("orders.b")
    src.add("orders.a")
    src.add("orders.b")
    assert c.num_pending() == 1
    assert delivered(c.pull_request("r", T0, batch=5, no_wait=True)) == [2]
    assert c.info()["delivered"] == {"consumer_seq": 1, "stream_seq": 2}
    assert c.num_pending() == 0


def test_requests_are_served_round_robin() -> None:
    c, src = make(0)
    c.pull_request("a", T0, batch=2, expires_ns=S)
    c.pull_request("b", T0, batch=2, expires_ns=S)
    replies = []
    for _ in range(4):
        replies += [d.reply for d in delivers(c.message_stored(src.add(), T0))]
    assert replies == ["a", "b", "a", "b"]


def test_max_waiting() -> None:
    c, _ = make(0, max_waiting=1)
    assert c.pull_request("a", T0, batch=1, expires_ns=S) == []
    assert c.pull_request("b", T0, batch=1, expires_ns=S) == [
        Status("b", 409, "Exceeded MaxWaiting")
    ]
    # suppressed for heartbeat requests
    assert c.pull_request("c", T0, batch=1, expires_ns=S, idle_heartbeat_ns=S // 4) == []
    assert c.num_waiting == 1


def test_request_limits() -> None:
    c, _ = make(0, max_batch=10, max_expires_ns=S, max_bytes=1024)
    assert statuses(c.pull_request("r", T0, batch=11)) == [(409, "Exceeded MaxRequestBatch of 10")]
    assert statuses(c.pull_request("r", T0, expires_ns=2 * S)) == [
        (409, "Exceeded MaxRequestExpires of 1s")
    ]
    assert statuses(c.pull_request("r", T0, max_bytes=2048)) == [
        (409, "Exceeded MaxRequestMaxBytes of 1024")
    ]
    assert statuses(c.pull_request("r", T0, expires_ns=S, idle_heartbeat_ns=S)) == [
        (400, "Bad Request - heartbeat value too large")
    ]
    p, _ = make(0, deliver_subject="push.x")
    assert statuses(p.pull_request("r", T0)) == [(409, "Consumer is push based")]


def test_no_wait_404_and_requests_pending() -> None:
    c, _ = make(3, max_ack_pending=1)
    c.pull_request("a", T0, batch=1)
    c.pull_request("b", T0, batch=5, expires_ns=S)  # blocked by max_ack_pending: waits
    assert statuses(c.pull_request("c", T0, batch=1, no_wait=True)) == [(408, "Requests Pending")]
    c2, _ = make(1, max_ack_pending=1)
    c2.pull_request("a", T0, batch=1)
    c2.ack(1, 1, AckKind.NAK, T0, delay_ns=S)
    assert statuses(c2.pull_request("c", T0, batch=1, no_wait=True)) == [(404, "No Messages")]


def test_max_bytes_size_exceeded_and_batch_completed() -> None:
    c, src = make(0)
    src.add("orders.a", b"x" * 100)
    src.add("orders.a", b"y" * 10)
    out = c.pull_request("r", T0, batch=5, expires_ns=S, max_bytes=50)
    assert out == [
        Status(
            "r",
            409,
            "Message Size Exceeds MaxBytes",
            (("Nats-Pending-Messages", "5"), ("Nats-Pending-Bytes", "50")),
        )
    ]
    out = c.pull_request("r", T0, batch=1, expires_ns=S, max_bytes=10_000)
    assert delivered(out) == [1]
    (d,) = delivers(out)
    size = len("orders.a") + len(d.ack_subject) + 100
    assert statuses(out) == [(409, "Batch Completed")]
    assert out[-1] == Status(
        "r",
        409,
        "Batch Completed",
        (("Nats-Pending-Messages", "0"), ("Nats-Pending-Bytes", str(10_000 - size))),
    )


def test_pull_idle_heartbeats_reset_on_delivery() -> None:
    c, src = make(0)
    c.pull_request("r", T0, batch=2, expires_ns=10 * S, idle_heartbeat_ns=2 * S)
    assert c.next_deadline() == T0 + 2 * S
    out = c.tick(T0 + 2 * S)
    assert out == [
        Status(
            "r",
            100,
            "Idle Heartbeat",
            (("Nats-Last-Consumer", "0"), ("Nats-Last-Stream", "0")),
        )
    ]
    c.message_stored(src.add(), T0 + 3 * S)
    assert c.tick(T0 + 4 * S) == []
    out = c.tick(T0 + 5 * S)
    assert out[0] == Status(
        "r", 100, "Idle Heartbeat", (("Nats-Last-Consumer", "1"), ("Nats-Last-Stream", "1"))
    )


def test_drop_requests_for_lost_interest() -> None:
    listening = {"gone", "here", "gone.too"}
    c, src = make(0, has_interest=listening.__contains__)
    c.pull_request("gone", T0, batch=1, expires_ns=S)
    c.pull_request("here", T0, batch=1, expires_ns=S)
    c.pull_request("gone.too", T0, batch=1, expires_ns=S)
    listening -= {"gone", "gone.too"}
    c.drop_unheard_requests()  # all at once (consumer info, the timer)
    assert c.num_waiting == 1
    c.pull_request("gone", T0, batch=1, expires_ns=S)
    listening.add("gone")
    c.pull_request("gone", T0, batch=1, expires_ns=S)
    listening.discard("gone")
    # ... or each when its turn comes to be served
    assert [d.reply for d in delivers(c.message_stored(src.add(), T0))] == ["here"]
    assert c.num_waiting == 0


def test_request_without_interest_is_never_served() -> None:
    """nats-py's PullSubscribeTest::test_pull_subscribe_limits: a fetch on an inbox the
    client has unsubscribed must not take the message (nats-server's nextWaiting checks
    interest before every delivery): it stays pending for the consumer."""
    c, _ = make(1, has_interest=lambda reply: reply != "unsubscribed")
    assert c.pull_request("unsubscribed", T0, batch=1, expires_ns=S) == []
    assert (c.num_pending(), c.num_ack_pending, c.num_waiting) == (1, 0, 0)
    assert delivered(c.pull_request("live", T0, batch=1, expires_ns=S)) == [1]


def test_round_robin_skips_requests_that_lost_interest() -> None:
    listening = {"a", "b", "c"}
    c, src = make(0, has_interest=listening.__contains__)
    for reply in ("a", "b", "c"):
        c.pull_request(reply, T0, batch=5, expires_ns=10 * S)
    listening.discard("b")
    for _ in range(4):
        src.add()
    out = c.message_stored(src.last, T0 + 1)
    assert [(d.reply, d.stream_seq) for d in delivers(out)] == [
        ("a", 1),
        ("c", 2),
        ("a", 3),
        ("c", 4),
    ]
    assert c.num_waiting == 2


def test_expired_request_gets_its_timeout_not_a_message() -> None:
    """nats-py's PullSubscribeTest::test_fetch_heartbeats: a message stored after a
    request's expiry, before the timer that ends it has fired, is not delivered to it (the
    client gave up at its own deadline and would find it in its next fetch); nats-server
    checks expiry before every delivery and answers 408."""
    c, src = make(0)
    c.pull_request("r", T0, batch=1, expires_ns=999_900_000)
    out = c.message_stored(src.add(), T0 + 999_900_000)
    assert out == [
        Status(
            "r",
            408,
            "Request Timeout",
            (("Nats-Pending-Messages", "1"), ("Nats-Pending-Bytes", "0")),
        )
    ]
    assert (c.num_pending(), c.num_waiting) == (1, 0)
    assert delivered(c.pull_request("r1", T0 + S, batch=1, no_wait=True)) == [1]
    c.pull_request("r2", T0 + S, batch=2, expires_ns=S)
    c.pull_request("r3", T0 + S, batch=2, expires_ns=2 * S)
    out = c.message_stored(src.add(), T0 + 2 * S)  # r2's time is up: r3 takes it
    assert [a.reply for a in out if isinstance(a, Status)] == ["r2"]
    assert [(d.reply, d.stream_seq) for d in delivers(out)] == [("r3", 2)]


def test_push_consumer_waits_for_interest_and_heartbeats() -> None:
    c, src = make(2, deliver_subject="_INBOX.p", idle_heartbeat_ns=5 * S)
    assert c.message_stored(src.add(), T0) == []
    out = c.set_push_interest(True, T0)
    assert [d.reply for d in delivers(out)] == ["_INBOX.p"] * 3
    assert c.next_deadline() == T0 + 5 * S
    out = c.tick(T0 + 5 * S)
    assert out == [
        Status(
            "_INBOX.p",
            100,
            "Idle Heartbeat",
            (("Nats-Last-Consumer", "3"), ("Nats-Last-Stream", "3")),
        )
    ]
    c.set_push_interest(False, T0 + 6 * S)
    assert c.message_stored(src.add(), T0 + 7 * S) == []


def test_consumer_deleted_answers_every_waiting_request_with_409() -> None:
    from brook.jetstream.consumer.actions import Status
    from tests.unit.consumer.fakes import make

    state, _ = make()
    state.pull_request("_INBOX.a", 0, batch=1, expires_ns=10**9)
    state.pull_request("_INBOX.b", 0, batch=1, expires_ns=10**9)
    actions = state.consumer_deleted()
    assert all(isinstance(a, Status) for a in actions)
    assert [(a.reply, a.code, a.description) for a in actions if isinstance(a, Status)] == [
        ("_INBOX.a", 409, "Consumer Deleted"),
        ("_INBOX.b", 409, "Consumer Deleted"),
    ]
    assert state.consumer_deleted() == []
    assert state.num_waiting == 0


def test_server_shutdown_answers_each_reply_once_with_what_it_wanted() -> None:
    """nats-server's signalPullConsumers: one 409 per reply subject, with the pending
    counts of the last request (in queue order) on it; nothing waits afterwards."""
    c, src = make(0)
    c.pull_request("a", T0, batch=5, expires_ns=10 * S)
    c.pull_request("b", T0, batch=2, expires_ns=10 * S, max_bytes=900)
    c.pull_request("a", T0, batch=3, expires_ns=10 * S)
    c.message_stored(src.add(), T0 + 1)  # to a's first request, now behind the others
    out = c.server_shutdown()
    assert sorted((a.reply, a.header_block()) for a in out if isinstance(a, Status)) == [
        ("a", b"NATS/1.0 409 Server Shutdown\r\nNats-Pending-Messages: 4\r\n"
              b"Nats-Pending-Bytes: 0\r\n\r\n"),
        ("b", b"NATS/1.0 409 Server Shutdown\r\nNats-Pending-Messages: 2\r\n"
              b"Nats-Pending-Bytes: 900\r\n\r\n"),
    ]  # fmt: skip
    assert len(out) == 2
    assert c.num_waiting == 0
    assert c.tick(T0 + 20 * S) == []  # no 408s or heartbeats for them later
