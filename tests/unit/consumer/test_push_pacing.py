"""Flow control, replay original, rate limits, pause, headers_only and ack sampling, driven
through the pure state machine with a manual clock."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from brook.jetstream.consumer import (
    AckKind,
    Action,
    Advisory,
    ConsumerState,
    Deliver,
    Status,
)
from brook.jetstream.consumer.actions import Acked, RemoveMessage
from brook.jetstream.consumer.config import AckPolicy, Retention
from brook.jetstream.consumer.state import CATCH_UP_CHUNK
from brook.jetstream.store.base import StoredMessage

from .fakes import FakeSource, S, delivered, delivers, flat, make

PUSH = "deliver.here"


def push(n: int = 0, **settings: Any) -> tuple[ConsumerState, FakeSource]:
    return make(n, deliver_subject=PUSH, idle_heartbeat_ns=5 * S, **settings)


def fc_requests(actions: Sequence[Action]) -> list[Status]:
    return [a for a in actions if isinstance(a, Status) and a.code == 100 and a.respond_to]


# ---------------------------------------------------------------- flow control


def test_flow_control_request_at_half_window_and_stall_at_full() -> None:
    # 10 messages of 100 payload bytes; each costs its subject + ack subject + payload.
    st, src = make(
        0,
        deliver_subject=PUSH,
        idle_heartbeat_ns=5 * S,
        flow_control=True,
        ack_policy=AckPolicy.NONE,
        fc_window_start_bytes=1000,
    )
    for _ in range(30):
        src.add(data=b"x" * 100)
    out = st.set_push_interest(True, 0)
    reqs = fc_requests(out)
    assert len(reqs) == 1
    req = reqs[0]
    assert (req.reply, req.description) == (PUSH, "FlowControl Request")
    assert (req.respond_to or "").startswith("$JS.FC.ORDERS.worker.")
    assert req.header_block() == b"NATS/1.0 100 FlowControl Request\r\n\r\n"
    sent = delivered(out)
    # Delivery stops once more than the window (1000 bytes) is unconfirmed.
    size = len(delivers(out)[0].ack_subject) + len("orders.a") + 100
    assert len(sent) == 1000 // size + 1
    # The request comes right after the delivery that crossed half the window.
    before = flat(out)
    assert sum(isinstance(a, Deliver) for a in before[: before.index(req)]) == 500 // size + 1
    # Nothing more until the client answers, whatever happens.
    assert delivered(st.tick(1 * S)) == []
    assert delivered(st.message_stored(src.add(), 1 * S)) == []
    # The idle heartbeat names the outstanding request.
    hb = [a for a in st.tick(6 * S) if isinstance(a, Status) and a.code == 100]
    assert ("Nats-Consumer-Stalled", req.respond_to) in hb[0].headers
    # A stale or unknown answer changes nothing; the right one resumes with a doubled window.
    assert st.flow_control_response("$JS.FC.ORDERS.worker.zzz", 7 * S) == []
    resumed = st.flow_control_response(req.respond_to or "", 7 * S)
    more = delivered(resumed)
    assert more[0] == sent[-1] + 1
    assert len(more) >= len(sent)  # window doubled to 2000 bytes


def test_a_flow_control_ack_past_what_was_delivered_moves_the_consumer_on() -> None:
    """A sourcing consumer's link may have stored more than the consumer's saved state
    says was delivered (a crash lost the newest state): at `max_ack_pending` it asks for
    flow control, and the answer acknowledges past its position. As nats-server takes
    such an ack from a flow-controlled consumer, the floor goes there: the pending are
    acknowledged, the skipped messages released, and it goes on after them. (Ignored,
    the consumer stayed at `max_ack_pending` for good.)"""
    st, src = make(
        0,
        deliver_subject=PUSH,
        idle_heartbeat_ns=5 * S,
        flow_control=True,
        ack_policy=AckPolicy.FLOW_CONTROL,
        max_ack_pending=10,
        retention=Retention.WORKQUEUE,
    )
    for _ in range(30):
        src.add()
    out = st.set_push_interest(True, 0)
    assert delivered(out) == list(range(1, 11))
    (req,) = fc_requests(out)
    # The link says: 10 deliveries seen, stored up to stream sequence 25.
    answer = st.flow_control_response(req.respond_to or "", 1 * S, (10, 25))
    released = [a.seq for a in answer if isinstance(a, Acked | RemoveMessage)]
    assert sorted(released) == list(range(1, 26))
    assert delivered(answer) == list(range(26, 31))
    assert [d.consumer_seq for d in delivers(answer)] == list(range(11, 16))
    info = st.info()
    assert info["ack_floor"] == {"consumer_seq": 10, "stream_seq": 25}
    assert info["delivered"] == {"consumer_seq": 15, "stream_seq": 30}
    assert info["num_ack_pending"] == 5
    st.check_invariants()


def test_a_flow_control_ack_past_the_stream_skips_nothing_to_come() -> None:
    """An answer naming a sequence the stream never had (a confused or hostile client
    may answer) moves the consumer only past what is stored, read a chunk at a time."""
    st, src = make(
        0,
        deliver_subject=PUSH,
        flow_control=True,
        ack_policy=AckPolicy.FLOW_CONTROL,
        max_ack_pending=10,
        retention=Retention.INTEREST,
    )
    for _ in range(CATCH_UP_CHUNK + 90):
        src.add()
    (req,) = fc_requests(st.set_push_interest(True, 0))
    answer = st.flow_control_response(req.respond_to or "", 1 * S, (10, 10**18))
    released = [a.seq for a in answer if isinstance(a, Acked | RemoveMessage)]
    assert sorted(released) == list(range(1, CATCH_UP_CHUNK + 91))
    assert delivered(answer) == []
    assert st.info()["ack_floor"] == {"consumer_seq": 10, "stream_seq": CATCH_UP_CHUNK + 90}
    assert delivered(st.message_stored(src.add(), 2 * S)) == [CATCH_UP_CHUNK + 91]
    st.check_invariants()


def test_flow_control_all_messages_flow_when_client_answers() -> None:
    st, src = make(
        0,
        deliver_subject=PUSH,
        idle_heartbeat_ns=5 * S,
        flow_control=True,
        ack_policy=AckPolicy.NONE,
        fc_window_start_bytes=512,
        fc_window_max_bytes=4096,
    )
    for _ in range(200):
        src.add(data=b"y" * 50)
    got: list[int] = []
    out = st.set_push_interest(True, 0)
    for step in range(200):
        got += delivered(out)
        reqs = fc_requests(out)
        if not reqs:
            break
        assert reqs[-1].respond_to is not None
        out = st.flow_control_response(reqs[-1].respond_to, step * S)
    assert got == list(range(1, 201))
    assert st.flow.window == 4096  # doubled up to the maximum, never beyond


def test_losing_interest_forgets_the_outstanding_request() -> None:
    st, src = make(
        0,
        deliver_subject=PUSH,
        idle_heartbeat_ns=5 * S,
        flow_control=True,
        ack_policy=AckPolicy.NONE,
        fc_window_start_bytes=300,
    )
    for _ in range(20):
        src.add(data=b"z" * 100)
    first = delivered(st.set_push_interest(True, 0))
    st.set_push_interest(False, 1 * S)
    again = delivered(st.set_push_interest(True, 2 * S))
    assert again[:1] == [first[-1] + 1]


def test_without_flow_control_no_requests() -> None:
    st, _ = push(50, ack_policy=AckPolicy.NONE, fc_window_start_bytes=100)
    out = st.set_push_interest(True, 0)
    assert fc_requests(out) == []
    assert len(delivered(out)) == 50


# ---------------------------------------------------------------- replay original


def test_replay_original_spaces_deliveries_like_the_timestamps() -> None:
    st, src = push(0, ack_policy=AckPolicy.NONE, replay_original=True)
    base = 1_700_000_000 * S
    for offset in (0, 2 * S, 2 * S, 5 * S):
        src.add(ts_ns=base + offset)
    now = 100 * S
    assert delivered(st.set_push_interest(True, now)) == [1]
    assert st.next_deadline() == now + 2 * S
    assert delivered(st.tick(now + 2 * S - 1)) == []
    assert delivered(st.tick(now + 2 * S)) == [2, 3]  # same timestamp: no gap
    assert st.next_deadline() == now + 5 * S
    assert delivered(st.tick(now + 5 * S)) == [4]


def test_replay_instant_sends_everything_at_once() -> None:
    st, src = push(0, ack_policy=AckPolicy.NONE)
    for offset in (0, 10 * S, 20 * S):
        src.add(ts_ns=1_700_000_000 * S + offset)
    assert delivered(st.set_push_interest(True, 0)) == [1, 2, 3]


def test_replay_original_pull_waits_too() -> None:
    st, src = make(0, ack_policy=AckPolicy.NONE, replay_original=True)
    src.add(ts_ns=1_700_000_000 * S)
    src.add(ts_ns=1_700_000_001 * S)
    assert delivered(st.pull_request("inbox", 0, batch=2, expires_ns=10 * S)) == [1]
    assert delivered(st.tick(1 * S)) == [2]


# ---------------------------------------------------------------- rate limit


def test_rate_limit_paces_by_bytes() -> None:
    # 8000 bits/s = 1000 bytes/s; the bucket holds one 1000-byte burst.
    st, src = push(0, ack_policy=AckPolicy.NONE, rate_limit_bps=8000, rate_burst_bytes=1000)
    for _ in range(10):
        src.add(data=b"d" * 400)
    first = delivered(st.set_push_interest(True, 0))
    assert len(first) == 2  # the burst
    sent = len(first)
    t = 0
    while sent < 10:
        t = st.next_deadline() or 0
        sent += len(delivered(st.tick(t)))
    # 8 more messages of ~460 bytes each at 1000 bytes/s: about 3.5 s.
    assert 3 * S < t < 5 * S


# ---------------------------------------------------------------- pause


def test_paused_consumer_delivers_nothing_until_the_time() -> None:
    st, _ = make(3, paused_until_ns=10 * S)
    out = st.pull_request("inbox", 0, batch=5, expires_ns=30 * S)
    assert delivered(out) == []
    assert st.next_deadline() == 10 * S
    assert delivered(st.tick(9 * S)) == []
    assert delivered(st.tick(10 * S)) == [1, 2, 3]


def test_paused_no_wait_request_gets_404() -> None:
    st, _ = make(3, paused_until_ns=10 * S)
    out = st.pull_request("inbox", 0, batch=5, no_wait=True)
    assert [(a.code, a.description) for a in out if isinstance(a, Status)] == [(404, "No Messages")]


def test_paused_push_consumer_still_heartbeats() -> None:
    st, _ = push(2, paused_until_ns=100 * S)
    assert delivered(st.set_push_interest(True, 0)) == []
    beats = [a for a in st.tick(5 * S) if isinstance(a, Status)]
    assert [(b.code, b.description) for b in beats] == [(100, "Idle Heartbeat")]


# ---------------------------------------------------------------- headers_only


def test_headers_only_sends_size_header_and_no_payload() -> None:
    st, src = make(0, headers_only=True)
    src.add(data=b"hello")
    src.msgs[2] = StoredMessage(2, "orders.b", b"NATS/1.0\r\nA: 1\r\n\r\n", b"abc", 5)
    src.last = 2
    out = delivers(st.pull_request("inbox", 0, batch=2, expires_ns=S))
    assert [(d.msg.header, d.msg.data) for d in out] == [
        (b"NATS/1.0\r\nNats-Msg-Size: 5\r\n\r\n", b""),
        (b"NATS/1.0\r\nA: 1\r\nNats-Msg-Size: 3\r\n\r\n", b""),
    ]


# ---------------------------------------------------------------- sample_freq


def test_sample_freq_emits_the_share_of_ack_metrics() -> None:
    st, _ = make(10, sample_percent=50)
    out = st.pull_request("inbox", 0, batch=10, expires_ns=S)
    metrics = []
    for d in delivers(out):
        acts = st.ack(d.stream_seq, d.consumer_seq, AckKind.ACK, 3 * S)
        metrics += [a for a in acts if isinstance(a, Advisory)]
    assert len(metrics) == 5
    m = metrics[0]
    assert m.subject == "$JS.EVENT.METRIC.CONSUMER.ACK.ORDERS.worker"
    assert m.payload["type"] == "io.nats.jetstream.metric.v1.consumer_ack"
    assert m.payload["ack_time"] == 3 * S
    assert m.payload["deliveries"] == 1
    assert {"stream_seq", "consumer_seq"} <= set(m.payload)


def test_no_sample_freq_no_metrics() -> None:
    st, _ = make(3)
    out = st.pull_request("inbox", 0, batch=3, expires_ns=S)
    acts = [st.ack(d.stream_seq, d.consumer_seq, AckKind.ACK, S) for d in delivers(out)]
    assert not any(isinstance(a, Advisory) for batch in acts for a in batch)
