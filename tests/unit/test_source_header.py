"""The `Nats-Stream-Source` header as nats-server writes and reads it (genSourceHeader,
streamAndSeq in server/stream.go): the recorded value from nats-server 2.15.1
(shared/reference/leafnode-and-mirrors-notes.md §2.3), both ack reply forms, the older
header forms and what nats-server reads as nothing."""

from __future__ import annotations

import pytest

from brook.jetstream.models.info import parse_ts
from brook.jetstream.models.sources import ExternalStream, StreamSource
from brook.jetstream.sourcing import (
    SourcePosition,
    parse_source_header,
    source_header,
    stream_identity,
)

V1 = "$JS.ACK.ORDERS.JS_SRC_x.1.29.29.1764000000000000000.0"
V2 = "$JS.ACK.hub.ACCHASH.ORDERS.JS_SRC_x.1.29.28.1764000000000000000.3"


def test_the_recorded_header_of_a_source_across_a_domain() -> None:
    iname = StreamSource("ORDERS", external=ExternalStream("$JS.brook.API", "d")).iname
    value = source_header(iname, V1, "orders.new")
    assert value == "ORDERS:29G81iIe 29 > > orders.new"
    # The stream name is the first field as it is, the hash of the API prefix included.
    expected = SourcePosition("ORDERS:29G81iIe", "ORDERS:29G81iIe > >", 29)
    assert parse_source_header(value) == expected


def test_the_sequence_from_either_ack_reply_form_and_the_identity() -> None:
    assert source_header("O o.* m.$1", V2, "o.a", "ID1") == "O 29 o.* m.$1 o.a ID1"
    assert parse_source_header("O 29 o.* m.$1 o.a ID1") == SourcePosition(
        "O", "O o.* m.$1", 29, "ID1"
    )
    assert source_header("O > >", "_INBOX.x", "o.a") == "O 1 > > o.a"  # not an ack reply
    assert source_header("O > >", "$JS.ACK.a", "o.a") == "O 1 > > o.a"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (V1, SourcePosition("ORDERS", "", 29)),
        (V2, SourcePosition("ORDERS", "", 29)),
        ("ORDERS 12", SourcePosition("ORDERS", "", 12)),
        ("ORDERS 12 > >", SourcePosition("ORDERS", "ORDERS > >", 12)),
        ("$JS.ACK.O.c.1.2.3.4", None),
        ("$JS.ACK.O.c.1.2.3.4.5.6", None),
        ("ORDERS", None),
        ("ORDERS 12 >", None),
        ("ORDERS x > > o.a", None),
        ("ORDERS -1 > > o.a", None),
        ("", None),
    ],
)
def test_what_a_stored_header_says(value: str, expected: SourcePosition | None) -> None:
    assert parse_source_header(value) == expected


def test_an_origin_identity_is_the_hash_of_its_creation_time() -> None:
    # Recorded from nats-server 2.15.1: an origin created at 2026-11-25T23:20:41.114201158Z;
    # a source of it stored `Nats-Stream-Source: O 1 o.a > o.a 3qqVBJG8`.
    created = parse_ts("2026-11-25T23:20:41.114201158Z")
    assert stream_identity(created) == "3qqVBJG8"
    assert source_header("O o.a >", V1.replace(".29.29.", ".1.1."), "o.a", "3qqVBJG8") == (
        "O 1 o.a > o.a 3qqVBJG8"
    )
