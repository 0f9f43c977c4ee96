"""The origin link's pure parts (jetstream/link.py): a delivery's ack reply read as
nats-server's `ackReplyInfo` reads it, the request nats-server sends again to an origin
that knows no sourcing consumers, and its retry backoff."""

from __future__ import annotations

from brook.jetstream.link import (
    CreateRequest,
    Delivery,
    read_ack_reply,
    retry_backoff_ns,
    without_sourcing,
)

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
