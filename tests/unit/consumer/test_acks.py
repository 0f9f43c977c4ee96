"""Ack subject, ack payload and pull request codecs (wire reference §6.1, §6.2, §6.5)."""

from __future__ import annotations

import pytest

from brook.jetstream.consumer import (
    AckKind,
    AckMeta,
    PullGroup,
    PullRequest,
    PullRequestError,
    ack_subject,
    parse_ack_payload,
    parse_ack_subject,
    parse_pull_request,
)


def test_ack_subject_matches_reference_transcript() -> None:
    subj = ack_subject("ORDERS", "worker", 1, 1, 1, 1795304150377078993, 2)
    assert subj == "$JS.ACK.ORDERS.worker.1.1.1.1795304150377078993.2"


def test_parse_v1_round_trips() -> None:
    subj = ack_subject("PA", "pushd", 2, 2, 5, 1795304151014989742, 0)
    assert parse_ack_subject(subj) == AckMeta("PA", "pushd", 2, 2, 5, 1795304151014989742, 0)


@pytest.mark.parametrize(
    ("subject", "domain"),
    [
        ("$JS.ACK._.ACCHASH.ORDERS.worker.3.10.7.1700.4", None),
        ("$JS.ACK.hub.ACCHASH.ORDERS.worker.3.10.7.1700.4", "hub"),
        ("$JS.ACK.hub.ACCHASH.ORDERS.worker.3.10.7.1700.4.xyz", "hub"),
        ("$JS.ACK.hub.ACCHASH.ORDERS.worker.3.10.7.1700.4.xyz.more", "hub"),
    ],
)
def test_parse_v2_domain_form(subject: str, domain: str | None) -> None:
    meta = parse_ack_subject(subject)
    assert meta == AckMeta("ORDERS", "worker", 3, 10, 7, 1700, 4, domain, "ACCHASH")


@pytest.mark.parametrize(
    "subject",
    [
        "$JS.ACK.ORDERS.worker.1.1.1.1795",  # 8 tokens
        "$JS.ACK.d.h.ORDERS.worker.1.1.1.1",  # 10 tokens
        "$JS.ACK.ORDERS.worker.1.x.1.1795.0",
        "$JS.ACK.ORDERS.worker.-1.1.1.1795.0",
        "$JS.NAK.ORDERS.worker.1.1.1.1795.0",
        "JS.ACK.ORDERS.worker.1.1.1.1795.0.0",
        "$JS.ACK..worker.1.1.1.1795.0",
    ],
)
def test_parse_rejects_malformed(subject: str) -> None:
    assert parse_ack_subject(subject) is None


@pytest.mark.parametrize("payload", [b"", b"+ACK", b"+OK"])
def test_positive_acks(payload: bytes) -> None:
    parsed = parse_ack_payload(payload)
    assert parsed is not None
    assert parsed.kind is AckKind.ACK


@pytest.mark.parametrize(
    ("payload", "delay"),
    [
        (b"-NAK", None),
        (b'-NAK {"delay": 2000000000}', 2_000_000_000),
        (b'-NAK {"delay":1}', 1),
        (b"-NAK 5s", 5_000_000_000),
        (b"-NAK 1m30s", 90_000_000_000),
        (b"-NAK 250ms", 250_000_000),
        (b"-NAK nonsense", None),
        (b"-NAK {bad json", None),
        (b'-NAK {"delay": -5}', None),
        (b"-NAK 12", None),
        # Go's time.ParseDuration, as nats-server reads the delay: these are durations too.
        (b"-NAK 1.s", 1_000_000_000),
        (b"-NAK .5s", 500_000_000),
        (b"-NAK +2s", 2_000_000_000),
        ("-NAK 3μs".encode(), 3_000),  # U+03BC GREEK SMALL LETTER MU
        (b"-NAK -5s", None),  # not positive: a plain NAK
        (b"-NAK 0", None),
    ],
)
def test_nak_delays(payload: bytes, delay: int | None) -> None:
    parsed = parse_ack_payload(payload)
    assert parsed is not None
    assert parsed.kind is AckKind.NAK
    assert parsed.delay_ns == delay


def test_wpi_term_nxt_and_unknown() -> None:
    wpi = parse_ack_payload(b"+WPI")
    assert wpi is not None
    assert wpi.kind is AckKind.WPI
    term = parse_ack_payload(b"+TERM bad payload")
    assert term is not None
    assert (term.kind, term.reason) == (AckKind.TERM, "bad payload")
    bare = parse_ack_payload(b"+TERM")
    assert bare is not None
    assert bare.reason == ""
    nxt = parse_ack_payload(b'+NXT {"batch": 5, "no_wait": true}')
    assert nxt is not None
    assert nxt.kind is AckKind.NXT
    assert nxt.next_request == PullRequest(batch=5, no_wait=True, group=PullGroup())
    plain = parse_ack_payload(b"+NXT")
    assert plain is not None
    assert plain.next_request == PullRequest()
    assert parse_ack_payload(b"+NXT 3") is not None
    assert parse_ack_payload(b"hello") is None
    assert parse_ack_payload(b"+ACK ") is None
    assert parse_ack_payload(b"\xff\xfe") is None


def test_pull_request_forms() -> None:
    assert parse_pull_request(b"") == PullRequest()
    assert parse_pull_request(b"10") == PullRequest(batch=10)
    assert parse_pull_request(b"0") == PullRequest(batch=1)
    req = parse_pull_request(
        b'{"batch": 10, "expires": 2999900000, "no_wait": true, "max_bytes": 100,'
        b' "idle_heartbeat": 500}'
    )
    assert req == PullRequest(10, 2_999_900_000, True, 100, 500, PullGroup())
    assert parse_pull_request(b'{"batch": 0}') == PullRequest(batch=1, group=PullGroup())
    # The priority-group fields: any consumer checks them (priority.request_error).
    fields = b'{"group": "G", "min_pending": 5, "min_ack_pending": -1, "id": "P", "priority": 12}'
    assert parse_pull_request(fields).group == PullGroup("G", 5, -1, "P", 12)


@pytest.mark.parametrize(
    "payload", [b"{nope", b"{[", b'{"batch": "x"}', b'{"no_wait": 1}', b'{"batch": true}']
)
def test_pull_request_errors(payload: bytes) -> None:
    with pytest.raises(PullRequestError, match=r"^Bad Request - "):
        parse_pull_request(payload)
