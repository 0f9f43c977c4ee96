"""Subject delete markers and the KV stream rules, on a Stream with a manual clock and a
memory store: no sockets, no sleeping. Each expectation was observed on nats-server 2.15.1
(the live comparisons are in test_kv_ttl.py and test_kv_ops.py)."""

from __future__ import annotations

from typing import Any

import pytest

from brook.jetstream import ttl
from brook.jetstream.errors import ApiError
from brook.jetstream.models import parse_stream_config, stream_config_to_json
from brook.jetstream.models.stream_config import check_update, parse_stream_update
from brook.jetstream.stream import Stream
from brook.protocol import headers as hdrs
from tests.support.streams import SECOND, make, publish


def messages(stream: Stream) -> list[tuple[int, str, dict[str, str], bytes]]:
    out = []
    msg = stream.store.load_next("", 0)
    while msg is not None:
        fields = dict(hdrs.parse(msg.header).fields) if msg.header else {}
        out.append((msg.seq, msg.subject, fields, msg.data))
        msg = stream.store.load_next("", msg.seq + 1)
    return out


def marker(ttl_text: str) -> dict[str, str]:
    return {"Nats-Marker-Reason": "MaxAge", "Nats-TTL": ttl_text, "Nats-Rollup": "sub"}


# ------------------------------------------------------------------ configuration


def test_marker_ttl_turns_on_what_markers_need() -> None:
    cfg = parse_stream_config(
        {"name": "S", "subject_delete_marker_ttl": SECOND, "deny_purge": True}
    )
    assert (cfg.allow_msg_ttl, cfg.allow_rollup_hdrs, cfg.deny_purge) == (True, True, False)
    out = stream_config_to_json(cfg)
    keys = list(out)
    assert keys.index("subject_delete_marker_ttl") == keys.index("allow_msg_ttl") + 1
    assert out["metadata"]["_nats.req.level"] == "1"
    assert "subject_delete_marker_ttl" not in stream_config_to_json(
        parse_stream_config({"name": "S"})
    )


@pytest.mark.parametrize(
    ("body", "description"),
    [
        ({"subject_delete_marker_ttl": -5}, "subject delete marker TTL must not be negative"),
        (
            {"subject_delete_marker_ttl": SECOND // 2},
            "subject delete marker TTL must be at least 1 second",
        ),
        (
            {"subject_delete_marker_ttl": SECOND, "allow_rollup_hdrs": True, "deny_purge": True},
            "roll-ups require the purge permission",
        ),
    ],
)
def test_marker_ttl_validation(body: dict[str, Any], description: str) -> None:
    with pytest.raises(ApiError) as err:
        parse_stream_config({"name": "S", **body})
    assert err.value.to_json()["description"] == description
    assert err.value.to_json()["err_code"] == 10052


def test_marker_ttl_may_be_added_changed_and_removed_by_update() -> None:
    plain = parse_stream_config({"name": "S"})
    on = parse_stream_update({"name": "S", "subject_delete_marker_ttl": SECOND}, subject_name="S")
    check_update(plain, on)
    off = parse_stream_update(
        {"name": "S", "allow_msg_ttl": True, "allow_rollup_hdrs": True}, subject_name="S"
    )
    check_update(on, off)
    assert off.subject_delete_marker_ttl == 0


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(1, "1s"), (59, "59s"), (60, "1m0s"), (90, "1m30s"), (3600, "1h0m0s"), (259200, "72h0m0s")],
)
def test_marker_ttl_is_written_as_a_go_duration(seconds: int, text: str) -> None:
    assert ttl.format_seconds(seconds) == text


# ------------------------------------------------------------------ markers


def test_max_age_leaves_one_marker_per_emptied_subject() -> None:
    stream, clock, _ = make(max_age=SECOND, subject_delete_marker_ttl=5 * SECOND)
    publish(stream, "s.x", b"1")
    publish(stream, "s.x", b"2")
    publish(stream, "s.y", b"3")
    publish(stream, "s.z", b"4", Nats_TTL="never")
    clock.now += SECOND
    stream.expire()
    assert messages(stream) == [
        (4, "s.z", {"Nats-TTL": "never"}, b"4"),
        (5, "s.x", marker("5s"), b""),
        (6, "s.y", marker("5s"), b""),
    ]
    # Markers live by max_age too (shorter than their TTL here) and leave no new markers.
    clock.now += SECOND
    stream.expire()
    assert [m[0] for m in messages(stream)] == [4]
    assert stream.store.state().last_seq == 6


def test_an_expiry_reports_its_removals_then_its_markers() -> None:
    """The engine tells the consumers what an expiry did from the stream's reports alone:
    the removals (`on_removed`), then the markers by subject and sequence (`on_markers`),
    never by reading the store before and after."""
    stream, clock, _ = make(max_age=SECOND, subject_delete_marker_ttl=5 * SECOND)
    reports: list[tuple[str, list[Any]]] = []
    stream.on_removed = lambda seqs: reports.append(("removed", seqs))
    stream.on_markers = lambda markers: reports.append(("markers", markers))
    publish(stream, "s.x", b"1")
    publish(stream, "s.y", b"2")
    publish(stream, "s.y", b"3")
    clock.now += SECOND
    stream.expire()
    assert reports == [("removed", [1, 2, 3]), ("markers", [("s.x", 4), ("s.y", 5)])]
    reports.clear()
    clock.now += SECOND
    stream.expire()  # the markers expire by max_age and leave none behind
    assert reports == [("removed", [4, 5])]


def test_a_message_ttl_leaves_a_marker_only_when_the_subject_empties() -> None:
    stream, clock, _ = make(subject_delete_marker_ttl=SECOND)
    publish(stream, "s.a", b"1", Nats_TTL="1")
    publish(stream, "s.b", b"1", Nats_TTL="1")
    publish(stream, "s.b", b"2")
    clock.now += SECOND
    wait = stream.expire()
    assert messages(stream) == [(3, "s.b", {}, b"2"), (4, "s.a", marker("1s"), b"")]
    assert wait == SECOND  # the marker's own TTL
    clock.now += SECOND
    stream.expire()
    assert [m[0] for m in messages(stream)] == [3]


@pytest.mark.parametrize(
    ("headers", "leaves_marker"),
    [
        ({"KV_Operation": "DEL"}, True),
        ({"Nats_Rollup": "sub"}, True),
        ({"KV_Operation": "PURGE"}, False),
        ({"Nats_Marker_Reason": "Remove"}, False),
    ],
)
def test_markers_and_kv_purges_beget_no_markers(
    headers: dict[str, str], leaves_marker: bool
) -> None:
    stream, clock, _ = make(max_age=SECOND, subject_delete_marker_ttl=5 * SECOND)
    publish(stream, "s.k", b"", **headers)
    clock.now += SECOND
    stream.expire()
    assert len(messages(stream)) == (1 if leaves_marker else 0)


def test_marker_marks_truncated_ttl_and_survives_restart_of_the_index() -> None:
    stream, clock, _ = make(max_age=SECOND, subject_delete_marker_ttl=1_999_999_999)
    publish(stream, "s.k")
    clock.now += SECOND
    stream.expire()
    [(seq, _subject, fields, _data)] = messages(stream)
    assert fields["Nats-TTL"] == "1s"
    # A stream rebuilt over the same store finds the marker's TTL in its header.
    again = Stream(
        stream.config,
        stream.store,
        now_ns=clock,
        send_ack=lambda r, a: None,
        committer=None,
        created_ns=clock.now,
    )
    assert seq in again.expiry.ttls.seqs()


# ------------------------------------------------------------------ discard new per subject


def test_max_bytes_lets_a_key_replace_a_larger_or_equal_oldest_revision() -> None:
    stream, _, acks = make(max_bytes=200, discard="new", max_msgs_per_subject=1)
    for size in (100, 90, 90, 95):
        publish(stream, "s.k", b"x" * size)
    assert [a.get("error", {}).get("description", "ok") for a in acks] == [
        "ok", "ok", "ok", "maximum bytes exceeded",
    ]  # fmt: skip


def test_max_bytes_still_refuses_a_new_subject() -> None:
    stream, _, acks = make(max_bytes=200, discard="new", max_msgs_per_subject=1)
    publish(stream, "s.a", b"x" * 100)
    publish(stream, "s.b", b"x" * 100)
    assert acks[1]["error"]["err_code"] == 10077
