"""The origin link's pure parts (jetstream/link.py, link_runs.py, link_requests.py): a
delivery's ack reply read as nats-server's `ackReplyInfo` reads it, a run of deliveries
from a consumer in this process read as the same messages would be, the request nats-server
sends again to an origin that knows no sourcing consumers, and its retry backoff."""

from __future__ import annotations

from brook.jetstream.consumer.actions import DeliverRun
from brook.jetstream.link import retry_backoff_ns
from brook.jetstream.link_requests import CreateRequest, without_sourcing
from brook.jetstream.link_runs import Delivered, Delivery, origin_header, read_ack_reply, take_run
from brook.jetstream.store.base import StoredMessage

SECOND = 1_000_000_000


def test_ack_replies_of_both_forms() -> None:
    expected: Delivery = ("C-1", 1, 5, 3, 1700000000000000005, 7)
    assert read_ack_reply(b"$JS.ACK.O.C-1.1.5.3.1700000000000000005.7") == expected
    v2 = b"$JS.ACK.hub.ACCHASH.O.C.2.9.4.1700000000000000009.0.token"
    assert read_ack_reply(v2) == ("C", 2, 9, 4, 1700000000000000009, 0)
    bad_replies = (
        b"$JS.ACK.O.C.1.x.3.1.0",
        b"$JS.ACK.O.C.1.5",
        b"$JS.ACK.O.C.1..3.1.0",
        b"$JS.ACK.O.C.+1.5.3.1.0",
        b"$JS.ACK.O.C.1_0.5.3.1.0",
        b"$JS.ACK..C.1.5.3.1.0",
        b"_INBOX.x",
        b"",
    )
    for bad in bad_replies:
        assert read_ack_reply(bad) is None
        assert read_ack_reply(bad, b"$JS.ACK.O.C.", "C") is None


def test_the_current_consumers_replies_are_read_after_their_prefix() -> None:
    """The link's fast path: what follows `$JS.ACK.<origin>.<consumer>.` is read as the
    general form reads it, and a reply of another consumer or form by the general path."""
    prefix = b"$JS.ACK.O.C."
    reply = b"$JS.ACK.O.C.1.5.3.1700000000000000005.7"
    assert read_ack_reply(reply, prefix, "C") == read_ack_reply(reply)
    other = b"$JS.ACK.O.D.1.5.3.1700000000000000005.7"
    assert read_ack_reply(other, prefix, "C") == ("D", 1, 5, 3, 1700000000000000005, 7)
    v2 = b"$JS.ACK.O.C.O.C.2.9.4.1700000000000000009.0.token"  # domain O, account C
    assert read_ack_reply(v2, prefix, "C") == ("C", 2, 9, 4, 1700000000000000009, 0)


def _request(subject: str, sourcing: bool = True) -> CreateRequest:
    config = {"name": "JS_MIRROR_abc", "deliver_subject": "$JS.M.x", "direct": True}
    if sourcing:
        config["sourcing"] = True
    header = b"NATS/1.0\r\nNats-Required-Api-Level: 4\r\n\r\n"
    return CreateRequest(subject, header, {"stream_name": "O", "config": config, "action": ""})


def test_an_origin_refusing_sourcing_is_asked_again_without_it() -> None:
    too_new = {"code": 400, "err_code": 10185, "description": "api level not supported"}
    request = _request("$JS.API.CONSUMER.CREATE.O.JS_MIRROR_abc.o.a")
    again = without_sourcing(request, too_new)
    assert again is not None
    name = again.body["config"]["name"]
    assert name.startswith("JS_MIRROR_abc_")
    assert len(name) == len("JS_MIRROR_abc_") + 8
    assert again.subject == f"$JS.API.CONSUMER.CREATE.O.{name}.o.a"
    assert again.header is None
    assert "sourcing" not in again.body["config"]
    assert again.body["config"]["direct"] is True
    assert without_sourcing(_request("$JS.API.CONSUMER.CREATE.O"), {"err_code": 10025})
    assert without_sourcing(request, {"err_code": 10059}) is None  # another refusal
    assert without_sourcing(_request("s", sourcing=False), too_new) is None  # asked once
    assert without_sourcing(request, None) is None


def test_retry_backoff_grows_to_two_minutes() -> None:
    assert [retry_backoff_ns(n) // SECOND for n in (0, 1, 2, 5, 12, 13)] == [
        0, 10, 20, 50, 120, 120
    ]  # fmt: skip


def _run(prefix: bytes, first_seq: int, count: int, first_cseq: int, pending: int) -> DeliverRun:
    """A push consumer's run of first deliveries, with the ack subjects its delivery
    makes (`Delivery.deliver_new`); every third message with headers a link removes."""
    msgs, acks = [], []
    for i in range(count):
        seq = first_seq + i
        header = None
        if i % 3 == 0:
            header = b"NATS/1.0\r\nA: %d\r\nNats-Expected-Stream: O\r\nNats-Batch-Id: b\r\n\r\n" % i
        msgs.append(StoredMessage(seq, f"o.{i % 4}", header, b"m%d" % seq, 1700000000000000000 + i))
        acks.append(
            b"%b1.%d.%d.%d.%d"
            % (prefix, seq, first_cseq + i, msgs[-1].ts_ns, max(pending - i - 1, 0))
        )
    return DeliverRun("$JS.M.x", msgs, acks, first_cseq, pending, prefix)


def _as_read(run: DeliverRun, consumer: str) -> list[Delivered]:
    """What the link makes of the same deliveries as messages (`_drain`'s message path)."""
    out: list[Delivered] = []
    for d in run.delivers():
        meta = read_ack_reply(d.ack_subject, b"", consumer)
        assert meta is not None
        header = origin_header(d.msg.header) if d.msg.header else None
        out.append((meta, d.msg.subject, header, d.msg.data))
    return out


def test_a_run_from_a_consumer_in_this_process_reads_as_its_messages() -> None:
    """`take_run` (an origin in this process handing its runs over) gives the kind what
    reading each delivery's ack subject gives, also when the run is taken in slices."""
    prefix = b"$JS.ACK.O.C-1."
    item = _run(prefix, first_seq=40, count=700, first_cseq=12, pending=705)
    expected = _as_read(item, "C-1")
    assert expected[0][0] == ("C-1", 1, 40, 12, 1700000000000000000, 704)
    assert expected[1][2] is None
    assert expected[3][2] == b"NATS/1.0\r\nA: 3\r\n\r\n"
    got: list[Delivered] = []
    rest: DeliverRun | None = item
    slices = []
    while rest is not None:
        taken, rest = take_run(rest, 256, prefix, "C-1", got)
        slices.append(taken)
    assert slices == [256, 256, 188]
    assert got == expected
    # The pending count reaches 0 and stays there.
    last = _run(prefix, first_seq=1, count=5, first_cseq=1, pending=2)
    assert got[-1][0][5] == 5
    got = []
    assert take_run(last, 256, prefix, "C-1", got) == (5, None)
    assert [d[0][5] for d in got] == [1, 0, 0, 0, 0]
    assert got == _as_read(last, "C-1")


def test_a_run_of_another_consumer_is_dropped() -> None:
    older = _run(b"$JS.ACK.O.C-0.", first_seq=1, count=10, first_cseq=1, pending=0)
    got: list[Delivered] = []
    assert take_run(older, 4, b"$JS.ACK.O.C-1.", "C-1", got)[0] == 4
    assert take_run(older, 256, b"", "", got) == (10, None)  # no consumer yet
    assert got == []
