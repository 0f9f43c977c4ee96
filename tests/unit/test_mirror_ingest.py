"""A mirror's side of its link (jetstream/mirror.py) and `store_mirrored`, with a
manual clock and a memory store: the consumer-create request nats-server sends, and each
delivery stored at its origin's sequence and timestamp, as `processInboundMirrorMsg`."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from brook import limits
from brook.jetstream.consumer.actions import DeliverRun
from brook.jetstream.link_runs import Delivered, Delivery, take_run
from brook.jetstream.mirror import Mirror, mirror_info, store_mirrored
from brook.jetstream.sourcing import Tracking
from brook.jetstream.store.base import StoredMessage
from brook.jetstream.stream import Stream
from brook.protocol import headers as hdrs
from tests.support.streams import SECOND, make

# What nats-server 2.15.1 sent to create the consumer of mirror "M" of "O" (recorded).
RECORDED = (
    '{"stream_name":"O","config":{"name":"JS_MIRROR_ih8eMwqr","deliver_policy":"all",'
    '"ack_policy":"none","ack_wait":79200000000000,"max_deliver":1,"replay_policy":"instant",'
    '"flow_control":true,"deliver_subject":"$JS.M.up2DRlvC","idle_heartbeat":1000000000,'
    '"inactive_threshold":10000000000,"num_replicas":0,"direct":true,"sourcing":true,'
    '"metadata":{"_nats.mirror.acc":"$G","_nats.mirror.stream":"M"}},"action":""}'
)


def _mirror(**mirror: Any) -> tuple[Mirror, list[tuple[str, int]]]:
    stream, _, _ = make(name="M", subjects=[], mirror={"name": "O", **mirror})
    stored: list[tuple[str, int]] = []
    return Mirror(stream, stored.extend), stored


def _deliver(
    mirror: Mirror, tracking: Tracking, sseq: int, dseq: int, subject: str = "o.a"
) -> bool:
    meta: Delivery = (tracking.consumer, 1, sseq, dseq, sseq * SECOND, 0)
    return mirror.delivered(tracking, [(meta, subject, None, b"%d" % sseq)])


def _store(
    stream: Stream,
    run: Sequence[tuple[str, bytes | None, bytes, int, int]],
    stored: Callable[[list[tuple[str, int]]], None],
) -> None:
    """`store_mirrored` of (subject, header, data, origin sequence, timestamp) each."""
    store_mirrored(stream, [(m[0], m[1], m[2], m[4]) for m in run], [m[3] for m in run], stored)


def test_the_create_request_is_the_one_nats_server_sends() -> None:
    mirror, _ = _mirror()
    request = mirror.create_request()
    body = json.dumps(request.body, separators=(",", ":"))
    deliver = request.body["config"]["deliver_subject"]
    assert deliver.startswith("$JS.M.")
    assert len(deliver) == len("$JS.M.") + 8
    assert body == RECORDED.replace("$JS.M.up2DRlvC", deliver)
    assert request.subject == "$JS.API.CONSUMER.CREATE.O"
    # nats-server asks for level 4; Brook at most its own (a Brook origin refuses more,
    # and its interest and workqueue streams need `sourcing`: ADR 0020).
    asked = str(min(4, limits.JETSTREAM_API_LEVEL))
    assert hdrs.parse(request.header or b"").get("Nats-Required-Api-Level") == asked


def test_the_request_starts_after_what_is_stored_and_uses_start_options_only_when_new() -> None:
    mirror, _ = _mirror(opt_start_seq=5, filter_subject="o.a")
    config = mirror.create_request().body["config"]
    assert (config["deliver_policy"], config["opt_start_seq"]) == ("by_start_sequence", 5)
    assert mirror.create_request().subject == ("$JS.API.CONSUMER.CREATE.O.JS_MIRROR_ih8eMwqr.o.a")
    _store(mirror.stream, [("o.a", None, b"", 7, SECOND)], lambda run: None)
    config = mirror.create_request().body["config"]
    assert (config["deliver_policy"], config["opt_start_seq"]) == ("by_start_sequence", 8)


def test_external_prefixes_and_transforms_shape_the_request() -> None:
    mirror, _ = _mirror(
        external={"api": "$JS.hub.API", "deliver": "dl.hub"},
        subject_transforms=[{"src": "o.*", "dest": "m.$1"}, {"src": "p.>", "dest": ""}],
    )
    request = mirror.create_request()
    assert request.subject == "$JS.hub.API.CONSUMER.CREATE.O"
    config = request.body["config"]
    assert config["filter_subjects"] == ["o.*", "p.>"]
    assert config["deliver_subject"].startswith("dl.hub.M.")


def test_deliveries_are_stored_at_the_origin_sequences_with_gaps_skipped() -> None:
    mirror, stored = _mirror(subject_transforms=[{"src": "o.*", "dest": "m.$1"}])
    tracking = Tracking()
    mirror.created({"name": "C", "delivered": {"stream_seq": 2}}, tracking, None)
    tracking.consumer = "C"
    assert tracking.sseq == 2
    assert _deliver(mirror, tracking, 3, 1)
    assert _deliver(mirror, tracking, 3, 1)  # again: a duplicate, nothing stored
    assert _deliver(mirror, tracking, 6, 2)  # the origin lost 4 and 5: skipped
    assert not _deliver(mirror, tracking, 9, 4)  # delivery 3 is missing: recreate
    assert _deliver(mirror, tracking, 7, 3, "x.y")  # no transform matches: unchanged
    assert stored == [("m.a", 3), ("m.a", 6), ("x.y", 7)]
    store = mirror.stream.store
    state = store.state(deleted_details=True)
    assert (state.first_seq, state.last_seq, state.messages, state.deleted) == (3, 7, 3, [4, 5])
    message = store.load(6)
    assert message is not None
    assert (message.data, message.ts_ns) == (b"6", 6 * SECOND)


def test_mirrored_messages_obey_the_mirror_limits() -> None:
    stream, clock, _ = make(name="M", subjects=[], mirror={"name": "O"}, max_msgs=2)
    kept: list[tuple[str, int]] = []
    for seq in (1, 2, 3):
        _store(stream, [("o.a", None, b"", seq, clock.now)], kept.extend)
    _store(stream, [("o.a", None, b"", 2, clock.now)], kept.extend)
    assert [seq for _, seq in kept] == [1, 2, 3]
    state = stream.store.state()
    assert (state.first_seq, state.last_seq) == (2, 3)


def test_a_run_is_stored_with_its_gaps_and_then_limited() -> None:
    """A run of deliveries (one `store_mirrored`): what is stored already is left out,
    the gaps between stretches are skipped, and the per-subject and stream limits apply
    to the whole run, as they would one message at a time."""
    stream, clock, _ = make(
        name="M", subjects=[], mirror={"name": "O"}, max_msgs=4, max_msgs_per_subject=2
    )
    kept: list[tuple[str, int]] = []
    _store(stream, [("o.a", None, b"1", 1, clock.now)], kept.extend)
    run = [("o.a", None, b"%d" % q, q, clock.now) for q in (1, 2, 3)]
    run += [("o.b", None, b"%d" % q, q, clock.now) for q in (6, 7, 8, 10)]
    _store(stream, run, kept.extend)
    assert kept == [("o.a", q) for q in (1, 2, 3)] + [("o.b", q) for q in (6, 7, 8, 10)]
    state = stream.store.state(deleted_details=True)
    assert (state.first_seq, state.last_seq, state.messages) == (2, 10, 4)
    assert [m.seq for m in (stream.store.load(q) for q in range(1, 11)) if m] == [2, 3, 8, 10]


def test_a_message_older_than_max_age_expires_at_once() -> None:
    stream, clock, _ = make(name="M", subjects=[], mirror={"name": "O"}, max_age=10 * SECOND)
    run = [("o.a", None, b"", q, clock.now - age * SECOND) for q, age in ((1, 20), (2, 5))]
    _store(stream, run, lambda run: None)
    assert stream.expiry.next_wakeup_ns == clock.now - 10 * SECOND
    assert stream.expire() == 5 * SECOND
    assert stream.store.state().messages == 1


def test_info_before_any_delivery() -> None:
    mirror, _ = _mirror(filter_subject="o.a")
    assert mirror_info(mirror.source, None, 0) == {"name": "O", "lag": 0, "active": -1}


def _origin_run(first_seq: int, count: int, first_cseq: int, header: bytes | None) -> DeliverRun:
    """A run of first deliveries as the origin's consumer hands it over, every third
    message with `header`."""
    msgs = [
        StoredMessage(q, f"o.{q % 3}", header if q % 3 == 0 else None, b"%d" % q, q * SECOND)
        for q in range(first_seq, first_seq + count)
    ]
    return DeliverRun("$JS.M.x", msgs, None, first_cseq, count + 5, b"$JS.ACK.O.C-1.")


def _twins() -> tuple[tuple[Mirror, Tracking, list[tuple[str, int]]], ...]:
    out = []
    for _ in range(2):
        mirror, stored = _mirror()
        tracking = Tracking()
        tracking.consumer = "C-1"
        out.append((mirror, tracking, stored))
    return tuple(out)


def test_a_run_taken_as_it_came_is_stored_as_its_deliveries_one_by_one() -> None:
    """`Mirror.delivered_run` (the origin's run as it came) stores what `delivered`
    stores of the same deliveries, and leaves the tracking where it does; a run that does
    not follow the last stored, or whose headers have lines a mirror drops, is left to
    `delivered` (None, nothing changed)."""
    (fast, fast_tracking, fast_stored), (slow, slow_tracking, slow_stored) = _twins()
    plain = b"NATS/1.0\r\nA: 1\r\n\r\n"
    for run in (_origin_run(1, 10, 1, plain), _origin_run(11, 300, 11, None)):
        assert fast.delivered_run(fast_tracking, run) is True
        got: list[Delivered] = []
        take_run(run, len(run.msgs), b"$JS.ACK.O.C-1.", "C-1", got)
        assert slow.delivered(slow_tracking, got) is True
    assert (fast_tracking.sseq, fast_tracking.dseq) == (310, 310)
    assert (fast_tracking.sseq, fast_tracking.dseq) == (slow_tracking.sseq, slow_tracking.dseq)
    assert fast_stored == slow_stored
    assert fast.stream.store.state() == slow.stream.store.state()
    for q in range(1, 311):
        assert fast.stream.store.load(q) == slow.stream.store.load(q)
    dropped = b"NATS/1.0\r\nA: 1\r\nNats-Expected-Stream: O\r\n\r\n"
    assert fast.delivered_run(fast_tracking, _origin_run(311, 5, 311, dropped)) is None
    assert fast.delivered_run(fast_tracking, _origin_run(312, 5, 311, None)) is None  # a gap
    assert (fast_tracking.sseq, fast_tracking.dseq) == (310, 310)
    assert fast.stream.store.state().last_seq == 310
