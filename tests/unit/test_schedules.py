"""Message schedules (schedules.py, cron.py) under a manual clock: the patterns' next
times, and a Stream over a memory store firing its schedules when `expire()` runs at the
moment they are due (no sockets, no sleeping). What nats-server answers and stores for
the same publishes is compared in tests/conformance/test_schedules_conformance.py."""

from __future__ import annotations

import logging
import zoneinfo

import pytest

from brook.jetstream import cron, schedules
from brook.jetstream.stream import Stream
from brook.protocol import headers as hdrs
from tests.support.streams import SECOND, Clock, make, publish, reopen, stream_config


def _ns(text: str) -> int:
    return schedules.parse_time(text)


# ---------------------------------------------------------------------------- patterns


@pytest.mark.parametrize(
    ("pattern", "after", "due"),
    [
        ("0 30 * * * *", "2026-01-01T00:10:00Z", "2026-01-01T00:30:00Z"),
        ("0 30 * * * *", "2026-01-01T00:30:00Z", "2026-01-01T01:30:00Z"),  # strictly after
        ("*/10 * * * * *", "2026-01-01T00:00:05.5Z", "2026-01-01T00:00:10Z"),
        ("5/20 * * * * *", "2026-01-01T00:00:26Z", "2026-01-01T00:00:45Z"),
        ("0 0 0 * * MON-FRI", "2026-01-03T12:00:00Z", "2026-01-05T00:00:00Z"),  # Sat -> Mon
        ("0 0 12 1,15 jan,Jul ?", "2026-01-20T00:00:00Z", "2026-07-01T12:00:00Z"),
        # Day of month and day of week, neither `*`: either one matches.
        ("0 0 0 13 * FRI", "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"),
        ("0 0 0 29 2 *", "2026-03-01T00:00:00Z", "2028-02-29T00:00:00Z"),
        ("0 0 0 31 * *", "2026-01-31T00:00:00Z", "2026-03-31T00:00:00Z"),
    ],
)
def test_cron_finds_the_next_moment(pattern: str, after: str, due: str) -> None:
    assert cron.next_fire(pattern, None, _ns(after)) == _ns(due)


@pytest.mark.parametrize(
    "pattern",
    [
        "0 0 * * *",  # five fields
        "0 0 0 30 2 *",  # never within five years
        "0 0 24 * * *",
        "60 * * * * *",
        "0 0 0 0 * *",
        "5-1 * * * * *",
        "*/0 * * * * *",
        "1-2-3 * * * * *",
        "1/2/3 * * * * *",
        "x * * * * *",
        "-1 * * * * *",
        "0 0 0 * * 7",
    ],
)
def test_cron_refuses_what_nats_server_refuses(pattern: str) -> None:
    with pytest.raises(cron.CronError):
        cron.next_fire(pattern, None, 0)


def test_cron_in_a_time_zone_follows_its_wall_clock() -> None:
    new_york = zoneinfo.ZoneInfo("America/New_York")
    # Midnight in New York: 05:00Z in winter, 04:00Z after the clocks go forward (Mar 8).
    assert cron.next_fire("0 0 0 * * *", new_york, _ns("2026-03-07T12:00:00Z")) == _ns(
        "2026-03-08T05:00:00Z"
    )
    assert cron.next_fire("0 0 0 * * *", new_york, _ns("2026-03-08T12:00:00Z")) == _ns(
        "2026-03-09T04:00:00Z"
    )
    # The `Nats-Schedule-Next` form of a time in a zone carries its offset.
    assert schedules.format_time(_ns("2026-03-09T04:00:00Z"), new_york) == (
        "2026-03-09T00:00:00-04:00"
    )


@pytest.mark.parametrize(
    ("pattern", "due", "repeats"),
    [
        ("@at 2026-01-01T00:00:10Z", "2026-01-01T00:00:10Z", False),
        ("@at 2026-01-01T01:00:10+01:00", "2026-01-01T00:00:10Z", False),
        ("@at 2026-01-01T00:00:10.25Z", "2026-01-01T00:00:10.25Z", False),
        ("@at 2025-12-31T00:00:00Z", "2025-12-31T00:00:00Z", False),  # past: fires at once
        ("@every 5s", "2026-01-01T00:00:05Z", True),  # from the stored time, rounded
        ("@every 1m30s", "2026-01-01T00:01:30Z", True),
        ("@hourly", "2026-01-01T01:00:00Z", True),
        ("@daily", "2026-01-02T00:00:00Z", True),
        ("@weekly", "2026-01-04T00:00:00Z", True),  # Sunday
        ("@monthly", "2026-02-01T00:00:00Z", True),
        ("@yearly", "2027-01-01T00:00:00Z", True),
    ],
)
def test_schedule_patterns(pattern: str, due: str, repeats: bool) -> None:
    now = _ns("2026-01-01T00:00:00.4Z")
    assert schedules.parse_schedule(pattern, None, now, now) == (_ns(due), repeats)


@pytest.mark.parametrize(
    "pattern",
    [
        "@at 2026-02-30T00:00:00Z",
        "@at 2026-01-01 00:00:00Z",
        "@at 2026-01-01T00:00:00",
        "@at  2026-01-01T00:00:00Z",
        "@every 999ms",
        "@every -5s",
        "@every 5",
        "@reboot",
        "every 5s",
    ],
)
def test_schedule_patterns_refused(pattern: str) -> None:
    with pytest.raises(schedules.InvalidSchedule):
        schedules.parse_schedule(pattern, None, 0, 0)


def test_at_and_every_take_no_time_zone() -> None:
    zone = zoneinfo.ZoneInfo("Europe/Amsterdam")
    for pattern in ("@at 2026-01-01T00:00:00Z", "@every 5s"):
        with pytest.raises(schedules.InvalidSchedule):
            schedules.parse_schedule(pattern, zone, 0, 0)


def test_a_missed_repeating_schedule_fires_once_from_now() -> None:
    stored = _ns("2026-01-01T00:00:00Z")
    now = _ns("2026-01-01T05:00:00.7Z")
    assert schedules.parse_schedule("@every 1m", None, stored, now) == (
        _ns("2026-01-01T05:01:01Z"),
        True,
    )
    assert schedules.parse_schedule("0 0 * * * *", None, stored, now) == (
        _ns("2026-01-01T06:00:00Z"),
        True,
    )


# ---------------------------------------------------------------------------- firing


def _stream(**config: object) -> tuple[Stream, Clock, list[dict[str, object]]]:
    stream, clock, acks = make(allow_msg_schedules=True, **config)
    return stream, clock, acks


def _subjects(stream: Stream) -> list[tuple[int, str]]:
    out = []
    msg = stream.store.load_next("", 0)
    while msg is not None:
        out.append((msg.seq, msg.subject))
        msg = stream.store.load_next("", msg.seq + 1)
    return out


def test_an_at_schedule_fires_at_its_time_then_is_purged() -> None:
    stream, clock, acks = _stream()
    due = clock.now + 10 * SECOND
    at = "@at " + schedules.format_time(due, None)
    publish(stream, "s.once", b"hello", Nats_Schedule=at, Nats_Schedule_Target="s.target")
    assert acks == [{"stream": "S", "seq": 1}]
    assert stream.expiry.next_wakeup_ns == due  # the engine's timer fires then
    clock.now = due - 1
    stream.expire()
    assert _subjects(stream) == [(1, "s.once")]
    clock.now = due
    markers: list[list[tuple[str, int]]] = []
    stream.on_markers = markers.append
    assert stream.expire() is None  # nothing else is ever due
    assert _subjects(stream) == [(2, "s.target")]
    produced = stream.store.load(2)
    assert produced is not None
    assert produced.header == (
        b"NATS/1.0\r\nNats-Scheduler: s.once\r\nNats-Schedule-Next: purge\r\n\r\n"
    )
    assert produced.data == b"hello"
    assert markers == [[("s.target", 2)]]  # the consumers hear of it


def test_an_every_schedule_fires_again_and_again() -> None:
    stream, clock, _ = _stream()
    clock.now += SECOND // 2  # stored at .5 s: the interval counts from the rounded time
    start = clock.now
    publish(stream, "s.tick", b"t", Nats_Schedule="@every 5s", Nats_Schedule_Target="s.t")
    first = start + SECOND // 2 + 5 * SECOND
    assert stream.expiry.next_wakeup_ns == first
    clock.now = first
    assert stream.expire() == 5 * SECOND
    clock.now = first + 5 * SECOND
    stream.expire()
    assert _subjects(stream) == [(1, "s.tick"), (2, "s.t"), (3, "s.t")]
    last = stream.store.load(3)
    assert last is not None
    assert last.header is not None
    following = schedules.format_time(first + 10 * SECOND, None).encode()
    assert last.header == (
        b"NATS/1.0\r\nNats-Scheduler: s.tick\r\nNats-Schedule-Next: " + following + b"\r\n\r\n"
    )
    # A long pause (a server down for an hour): it fires once, then counts from now.
    clock.now += 3600 * SECOND
    stream.expire()
    assert len(_subjects(stream)) == 4
    assert stream.expiry.next_wakeup_ns == clock.now + 5 * SECOND


def test_a_new_schedule_on_the_subject_replaces_the_old_one() -> None:
    stream, clock, _ = _stream()
    publish(stream, "s.x", b"old", Nats_Schedule="@every 5s", Nats_Schedule_Target="s.old")
    publish(stream, "s.x", b"new", Nats_Schedule="@every 10s", Nats_Schedule_Target="s.new")
    assert _subjects(stream) == [(2, "s.x")]  # rolled up
    clock.now += 10 * SECOND
    stream.expire()
    assert _subjects(stream) == [(2, "s.x"), (3, "s.new")]


def test_a_plain_message_on_the_subject_disarms_the_schedule() -> None:
    stream, clock, _ = _stream()
    publish(stream, "s.x", b"s", Nats_Schedule="@every 5s", Nats_Schedule_Target="s.t")
    publish(stream, "s.x", b"plain")
    clock.now += 60 * SECOND
    stream.expire()
    assert _subjects(stream) == [(1, "s.x"), (2, "s.x")]


def test_a_client_purge_cancels_a_schedule() -> None:
    stream, clock, acks = _stream()
    publish(stream, "s.x", b"s", Nats_Schedule="@every 5s", Nats_Schedule_Target="s.t")
    publish(stream, "s.c", Nats_Schedule_Next="purge", Nats_Scheduler="s.x")
    assert acks[-1] == {"stream": "S", "seq": 2}
    clock.now += 60 * SECOND
    stream.expire()
    assert _subjects(stream) == [(2, "s.c")]
    assert stream.schedules is not None
    assert not stream.schedules.armed()


def test_a_removed_schedule_message_fires_nothing() -> None:
    stream, clock, _ = _stream()
    publish(stream, "s.x", b"s", Nats_Schedule="@every 5s", Nats_Schedule_Target="s.t")
    publish(stream, "s.keep", b"k")
    assert stream.remove(1)
    clock.now += 60 * SECOND
    stream.expire()
    assert _subjects(stream) == [(2, "s.keep")]
    assert stream.expiry.next_wakeup_ns is None


def test_a_refused_produced_message_holds_its_schedule(caplog: pytest.LogCaptureFixture) -> None:
    """A message the stream refuses (sealed here) is not tried again on every wake-up."""
    stream, clock, _ = _stream()
    publish(stream, "s.x", b"s", Nats_Schedule="@every 5s", Nats_Schedule_Target="s.t")
    sealed = stream_config(allow_msg_schedules=True)
    sealed.sealed = True
    stream.reconfigure(sealed)
    clock.now += 5 * SECOND
    with caplog.at_level(logging.WARNING, logger="brook.stream"):
        assert stream.expire() is None
    assert "could not store its message: invalid operation on sealed stream" in caplog.text
    assert _subjects(stream) == [(1, "s.x")]


def test_schedules_are_rebuilt_from_the_stored_messages() -> None:
    """A restart: a new Stream over the same store arms what is stored, from the time
    each schedule was stored."""
    stream, clock, _ = _stream()
    due = clock.now + 30 * SECOND
    publish(
        stream,
        "s.once",
        b"o",
        Nats_Schedule="@at " + schedules.format_time(due, None),
        Nats_Schedule_Target="s.t",
    )
    publish(stream, "s.tick", b"t", Nats_Schedule="@every 1m", Nats_Schedule_Target="s.u")
    publish(stream, "s.plain", b"p")
    clock.now += 10 * SECOND
    again = reopen(stream, clock)
    assert again.schedules is not None
    assert again.schedules.armed() == {
        "s.once": (1, due),
        "s.tick": (2, clock.now - 10 * SECOND + 60 * SECOND),
    }
    clock.now = due
    again.expire()
    assert [s for _, s in _subjects(again)] == ["s.tick", "s.plain", "s.t"]


def test_turning_schedules_on_arms_what_is_stored() -> None:
    stream, clock, _ = make()
    before = stream.schedules
    assert before is None
    header = b"NATS/1.0\r\nNats-Schedule: @every 5s\r\nNats-Schedule-Target: s.t\r\n\r\n"
    stream.store.store("s.x", header, b"", clock.now)  # as a restored snapshot could hold
    stream.reconfigure(stream_config(allow_msg_schedules=True))
    assert stream.schedules is not None
    assert stream.schedules.armed() == {"s.x": (1, clock.now + 5 * SECOND)}


def test_a_message_produced_from_a_batched_schedule_outlives_a_restart() -> None:
    """It keeps the batch's headers, as nats-server stores it, yet it is no batch cut
    short by a crash (batch.py's `uncommitted_tail`) when a restart finds it newest."""
    stream, clock, acks = _stream(allow_atomic=True)
    due = clock.now + SECOND
    at = "@at " + schedules.format_time(due, None)
    first = [("Nats-Batch-Id", "b"), ("Nats-Batch-Sequence", "1")]
    first += [("Nats-Schedule", at), ("Nats-Schedule-Target", "s.t")]
    stream.ingest(b"s.x", None, hdrs.encode(first), b"")  # staged (its reply is empty)
    publish(stream, "s.y", Nats_Batch_Id="b", Nats_Batch_Sequence="2", Nats_Batch_Commit="1")
    assert acks[-1] == {"stream": "S", "seq": 2, "batch": "b", "count": 2}
    clock.now = due
    stream.expire()
    assert _subjects(stream) == [(2, "s.y"), (3, "s.t")]
    again = reopen(stream, clock)
    assert _subjects(again) == [(2, "s.y"), (3, "s.t")]
