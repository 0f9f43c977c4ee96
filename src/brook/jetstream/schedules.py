"""Message schedules (`allow_msg_schedules`, ADR-51), as nats-server 2.14+ keeps them.

A schedule is a stored message with a `Nats-Schedule` header: `@at <RFC 3339 time>` (once),
`@every <Go duration>` (at least 1 s), a six-field cron pattern (`cron.py`) or one of
`@yearly`/`@annually`, `@monthly`, `@weekly`, `@daily`/`@midnight`, `@hourly`, cron
patterns being read in `Nats-Schedule-Time-Zone` (an IANA name; UTC when absent; refused
with `@at` and `@every`). When it fires, the stream stores a new message on
`Nats-Schedule-Target` with the schedule's payload and headers (or, with
`Nats-Schedule-Source`, those of that subject's last message, when it has one) less the
scheduling headers (`Nats-Schedule*`), `Nats-Expected-*`, `Nats-Msg-Id`, `Nats-TTL` and
`Nats-Rollup`, plus `Nats-Scheduler: <the schedule's subject>`, `Nats-Schedule-Next:`
the next time it fires (RFC 3339, nanoseconds) or `purge`, `Nats-TTL` from
`Nats-Schedule-TTL` and `Nats-Rollup` from `Nats-Schedule-Rollup` (only `sub`).

The state is derived from the stored messages, as nats-server derives it
(`storeRawMsg`, `recoverPerMessageState`): storing a schedule (re)arms its subject; storing
any other message on that subject without `Nats-Scheduler` disarms it; a produced message
whose `Nats-Schedule-Next` is a time re-arms its scheduler at that time, and one whose
`Nats-Schedule-Next` is `purge` purges the scheduler's subject (the one-shot schedule is
done). A schedule message is published with `Nats-Rollup: sub` (added when absent), so a
subject holds one schedule. At start the index is rebuilt by reading every stored message
with a schedule, its next time computed from when it was stored (a repeating schedule that
missed firings while the server was down fires once, one interval after the start).

`check_publish` refuses what nats-server refuses, with its codes and in its order
(`processJetStreamMsg`): a bad time zone 10223, a bad pattern 10189, schedules off 10188, a
bad `Nats-Schedule-TTL` 10191, a `Nats-Schedule-Rollup` other than `sub` 10192, a TTL on a
stream without TTLs 10166, a missing or invalid target (not a literal subject, the
schedule's own subject, outside the stream's subjects) 10190, likewise a source 10203, a
`Nats-Rollup` other than `sub` 10192; `Nats-Schedule-Next` may only be `purge` (to cancel a
schedule, with `Nats-Scheduler` naming its subject) and `Nats-Scheduler` only beside it,
otherwise 10212.

Pure apart from reading the store it is given: the clock is passed in (`now_ns`), so
firing is exact under a manual clock. The stream's side (the last section) is what the
stream (`stream.py`) calls: `check_schedule` from its ingest, `schedule_stored` after it
stored a message, and `fire_due` from its expiry, storing each produced message through
`Stream.ingest_produced`; the engine's timer (`expiry_timer.py`) fires when `next_due`
comes.
"""

from __future__ import annotations

import calendar
import contextlib
import heapq
import logging
import re
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import TYPE_CHECKING

from brook import durations
from brook.jetstream import cron
from brook.jetstream import ttl as ttls
from brook.jetstream.errors import ApiError, api_error
from brook.jetstream.models.stream_config import subjects_overlap
from brook.jetstream.store.base import MessageStore, StoredMessage
from brook.protocol import headers as hdrs
from brook.subjects import is_valid_literal_subject

if TYPE_CHECKING:
    from brook.jetstream.stream import Stream

log = logging.getLogger("brook.stream")

PREFIX = b"Nats-Schedule"  # every scheduling header starts so (`Nats-Scheduler` too)
SCHEDULE = b"Nats-Schedule"
TIME_ZONE = b"Nats-Schedule-Time-Zone"
TTL = b"Nats-Schedule-TTL"
ROLLUP = b"Nats-Schedule-Rollup"
TARGET = b"Nats-Schedule-Target"
SOURCE = b"Nats-Schedule-Source"
SCHEDULER = b"Nats-Scheduler"
NEXT = b"Nats-Schedule-Next"
PURGE = b"purge"

_NS = durations.NS_PER_S
# Cron's predefined patterns (nats-server's parseMsgSchedule).
_PREDEFINED = {
    "@yearly": "0 0 0 1 1 *",
    "@annually": "0 0 0 1 1 *",
    "@monthly": "0 0 0 1 * *",
    "@weekly": "0 0 0 * * 0",
    "@daily": "0 0 0 * * *",
    "@midnight": "0 0 0 * * *",
    "@hourly": "0 0 * * * *",
}
# Go's time.Parse(time.RFC3339, ...) as nats-server reads `@at` and `Nats-Schedule-Next`:
# its fast path, plus what its general parser also takes (a one-digit hour, `,` before
# the fraction; nine fractional digits at most are kept).
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{1,2}):(\d{2}):(\d{2})(?:[.,](\d+))?(Z|[+-]\d{2}:\d{2})",
    re.ASCII,
)


class InvalidSchedule(ValueError):
    """A `Nats-Schedule` nats-server does not accept (10189)."""


def parse_time(text: str) -> int:
    """An RFC 3339 time as Go's time.Parse reads it -> ns since the epoch; ValueError."""
    m = _RFC3339.fullmatch(text)
    if m is None:
        raise ValueError(text)
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    if not (1 <= month <= 12 and hour <= 23 and minute <= 59 and second <= 59):
        raise ValueError(text)
    if not 1 <= day <= calendar.monthrange(year, month)[1]:
        raise ValueError(text)
    fraction = m.group(7) or ""
    nanos = int((fraction + "000000000")[:9])
    zone = m.group(8)
    offset = 0
    if zone != "Z":
        zone_hours, zone_minutes = int(zone[1:3]), int(zone[4:6])
        if zone_hours > 23 or zone_minutes > 59:
            raise ValueError(text)
        offset = (zone_hours * 3600 + zone_minutes * 60) * (-1 if zone[0] == "-" else 1)
    seconds = calendar.timegm((year, month, day, hour, minute, second)) - offset
    return seconds * _NS + nanos


def format_time(ns: int, zone: tzinfo | None) -> str:
    """Go's RFC3339Nano of a time in `zone` (UTC when None): fraction without trailing
    zeros, `Z` for a zero offset."""
    seconds, nanos = divmod(ns, _NS)
    local = datetime.fromtimestamp(seconds, UTC).astimezone(zone or UTC)
    text = local.strftime("%Y-%m-%dT%H:%M:%S")
    if nanos:
        text += f".{nanos:09d}".rstrip("0")
    offset = local.utcoffset()
    minutes = int(offset.total_seconds()) // 60 if offset is not None else 0
    if not minutes:
        return text + "Z"
    sign = "-" if minutes < 0 else "+"
    return f"{text}{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def _round_s(ns: int) -> int:
    """Go's Time.Round(time.Second) (halves up)."""
    return (ns + _NS // 2) // _NS * _NS


def parse_schedule(
    pattern: str, zone: tzinfo | None, ts_ns: int, now_ns: int
) -> tuple[int, bool] | None:
    """nats-server's parseMsgSchedule: when a schedule stored (or last due) at `ts_ns`
    fires next, and whether it repeats; None for an empty pattern (no schedule). A
    repeating schedule whose next time has passed by `now_ns` fires once, from now."""
    if not pattern:
        return None
    if pattern.startswith("@at "):
        if zone is not None:
            raise InvalidSchedule(pattern)
        try:
            return parse_time(pattern[4:]), False
        except ValueError:
            raise InvalidSchedule(pattern) from None
    if pattern.startswith("@every "):
        every = durations.parse_ns(pattern[7:])
        if zone is not None or every is None or every < _NS:
            raise InvalidSchedule(pattern)
        due = _round_s(ts_ns) + every
        if due < now_ns:
            due = _round_s(now_ns) + every
        return due, True
    cron_pattern = _PREDEFINED.get(pattern, pattern)
    try:
        due = cron.next_fire(cron_pattern, zone, ts_ns)
        if due < now_ns:
            due = cron.next_fire(cron_pattern, zone, _round_s(now_ns))
    except cron.CronError:
        raise InvalidSchedule(pattern) from None
    return due, True


def _text(value: bytes) -> str:
    return value.decode("utf-8", "surrogateescape")


def time_zone(header: bytes) -> tzinfo | None:
    """`Nats-Schedule-Time-Zone`: None when absent; 10223 when empty or unknown."""
    name = hdrs.raw_value(header, TIME_ZONE)
    if name is None:
        return None
    if name == b"UTC":
        return UTC
    try:
        return zoneinfo.ZoneInfo(_text(name))
    except (ValueError, OSError, zoneinfo.ZoneInfoNotFoundError):
        raise api_error("MESSAGE_SCHEDULES_TIME_ZONE_INVALID") from None


def next_due(header: bytes, ts_ns: int, now_ns: int) -> tuple[int, bool] | None:
    """nats-server's nextMessageSchedule: the schedule of a message stored at `ts_ns`
    (None when it has none); raises the API error of a bad time zone or pattern."""
    zone = time_zone(header)
    pattern = hdrs.raw_value(header, SCHEDULE)
    try:
        return parse_schedule(_text(pattern or b""), zone, ts_ns, now_ns)
    except InvalidSchedule:
        raise api_error("MESSAGE_SCHEDULES_PATTERN_INVALID") from None


def _valid_ttl(value: bytes) -> bool:
    try:
        ttls.parse_ttl(_text(value))
    except ttls.InvalidTTL:
        return False
    return True


def check_publish(
    header: bytes,
    subject: str,
    *,
    allowed: bool,
    allow_ttl: bool,
    stream_subjects: list[str],
    store: MessageStore,
    now_ns: int,
) -> bool:
    """A client's message with scheduling headers, checked as nats-server checks it (the
    module docstring); True when it is a schedule to be stored with `Nats-Rollup: sub`
    added."""
    add_rollup = False
    try:
        scheduled = next_due(header, now_ns, now_ns) is not None
    except ApiError:
        if not allowed:
            raise api_error("MESSAGE_SCHEDULES_DISABLED") from None
        raise
    if scheduled:
        if not allowed:
            raise api_error("MESSAGE_SCHEDULES_DISABLED")
        ttl = hdrs.raw_value(header, TTL)
        if ttl and not _valid_ttl(ttl):
            raise api_error("MESSAGE_SCHEDULES_TTL_INVALID")
        rollup = hdrs.raw_value(header, ROLLUP)
        if rollup and rollup != b"sub":
            raise api_error("MESSAGE_SCHEDULES_ROLLUP_INVALID")
        if ttl and not allow_ttl:
            raise api_error("MESSAGE_TTL_DISABLED")
        target = _text(hdrs.raw_value(header, TARGET) or b"")
        if not target or not is_valid_literal_subject(target.encode()) or target == subject:
            raise api_error("MESSAGE_SCHEDULES_TARGET_INVALID")
        source = _text(hdrs.raw_value(header, SOURCE) or b"")
        if source and (
            source in (target, subject) or not is_valid_literal_subject(source.encode())
        ):
            raise api_error("MESSAGE_SCHEDULES_SOURCE_INVALID")
        if not subjects_overlap([target], stream_subjects):
            raise api_error("MESSAGE_SCHEDULES_TARGET_INVALID")
        if source and not subjects_overlap([source], stream_subjects):
            raise api_error("MESSAGE_SCHEDULES_SOURCE_INVALID")
        existing = hdrs.raw_value(header, b"Nats-Rollup")
        if not existing:
            add_rollup = True
        elif existing.lower() != b"sub":
            raise api_error("MESSAGE_SCHEDULES_ROLLUP_INVALID")
    following = hdrs.raw_value(header, NEXT)
    scheduler = hdrs.raw_value(header, SCHEDULER)
    if following:
        # Clients may only ask to purge a schedule, naming its subject.
        if following != PURGE:
            raise api_error("MESSAGE_SCHEDULES_SCHEDULER_INVALID")
        name = _text(scheduler or b"")
        if not name or name == subject or not is_valid_literal_subject(name.encode()):
            raise api_error("MESSAGE_SCHEDULES_SCHEDULER_INVALID")
        if not allowed:
            raise api_error("MESSAGE_SCHEDULES_DISABLED")
        last = store.load_last(name)
        if last is not None and not hdrs.raw_value(last.header or b"", SCHEDULE):
            raise api_error("MESSAGE_SCHEDULES_SCHEDULER_INVALID")
    elif scheduler:
        raise api_error("MESSAGE_SCHEDULES_SCHEDULER_INVALID")
    return add_rollup


def with_rollup(header: bytes) -> bytes:
    """A schedule's header block with `Nats-Rollup: sub` appended (nats-server's genHeader)."""
    return header[:-2] + b"Nats-Rollup: sub\r\n\r\n"


# ---------------------------------------------------------------------------- firing


@dataclass(slots=True)
class Produced:
    """The message a schedule stores when it fires."""

    subject: str
    header: bytes
    data: bytes


def produce(
    schedule: StoredMessage,
    due_ns: int,
    now_ns: int,
    load_last: Callable[[str], StoredMessage | None],
) -> Produced | None:
    """What schedule message `schedule`, due at `due_ns`, stores (the module docstring);
    None when its headers no longer make a schedule (nats-server then forgets it)."""
    header = schedule.header or b""
    try:
        parsed = next_due(header, due_ns, now_ns)
    except ApiError:
        return None
    ttl = hdrs.raw_value(header, TTL) or b""
    target = hdrs.raw_value(header, TARGET)
    if parsed is None or (ttl and not _valid_ttl(ttl)) or not target:
        return None
    following, repeats = parsed
    rollup = hdrs.raw_value(header, ROLLUP) or b""
    content = schedule
    source = hdrs.raw_value(header, SOURCE)
    if source:
        content = load_last(_text(source)) or schedule
    lines = _kept_lines(content.header)
    lines.append(b"Nats-Scheduler: " + schedule.subject.encode("utf-8", "surrogateescape"))
    if repeats:
        zone = time_zone(header)
        lines.append(b"Nats-Schedule-Next: " + format_time(following, zone).encode())
    else:
        lines.append(b"Nats-Schedule-Next: purge")
    if ttl:
        lines.append(b"Nats-TTL: " + ttl.strip())
    if rollup:
        lines.append(b"Nats-Rollup: " + rollup.strip())
    return Produced(_text(target), b"\r\n".join(lines) + b"\r\n\r\n", content.data)


_DROPPED_PREFIXES = (PREFIX, b"Nats-Expected-")
_DROPPED_NAMES = (b"Nats-Msg-Id:", b"Nats-TTL:", b"Nats-Rollup:")


def _kept_lines(header: bytes | None) -> list[bytes]:
    """The status line and the header lines a produced message keeps."""
    if not header:
        return [hdrs.PREFIX]
    lines = header.split(b"\r\n")
    kept = [lines[0]]
    for line in lines[1:]:
        if line and not line.startswith(_DROPPED_PREFIXES) and not line.startswith(_DROPPED_NAMES):
            kept.append(line)
    return kept


# ---------------------------------------------------------------------------- the index


_HELD = -1  # the due time of a schedule handed out by `pop_due`, not re-armed yet


class ScheduleIndex:
    """Each schedule by subject: its message's sequence and when it is due, with a heap of
    (due, seq, subject) to find the next. A schedule handed out by `pop_due` is held
    (nats-server's "inflight") until its produced message re-arms it (`update`) or a new
    schedule replaces it (`arm`), so one whose message could not be stored is not tried
    again and again. Heap entries are checked against the subject's current entry when
    they reach the top, so replacing or removing a schedule leaves no search behind."""

    __slots__ = ("_by_subject", "_heap")

    def __init__(self) -> None:
        self._by_subject: dict[str, tuple[int, int]] = {}  # subject -> (seq, due ns)
        self._heap: list[tuple[int, int, str]] = []

    def __len__(self) -> int:
        return len(self._by_subject)

    def arm(self, seq: int, subject: str, due_ns: int) -> None:
        """Schedule message `seq` on `subject` is due at `due_ns` (replacing any other)."""
        self._by_subject[subject] = (seq, due_ns)
        heap = self._heap
        heapq.heappush(heap, (due_ns, seq, subject))
        if len(heap) > 2 * len(self._by_subject) + 64:  # mostly stale entries: drop them
            self._heap = [e for e in heap if self._current(*e)]
            heapq.heapify(self._heap)

    def update(self, subject: str, due_ns: int) -> None:
        """The schedule on `subject` fired and is next due at `due_ns`."""
        entry = self._by_subject.get(subject)
        if entry is not None:
            self.arm(entry[0], subject, due_ns)

    def disarm(self, subject: str) -> None:
        self._by_subject.pop(subject, None)

    def forget(self, subject: str, seq: int) -> None:
        """Schedule message `seq` is gone or no longer a schedule."""
        entry = self._by_subject.get(subject)
        if entry is not None and entry[0] == seq:
            del self._by_subject[subject]

    def pop_due(self, now_ns: int) -> list[tuple[int, str, int]]:
        """The schedules due by `now_ns` as (seq, subject, due), in sequence order, each
        held from now on."""
        heap = self._heap
        due: list[tuple[int, str, int]] = []
        while heap and heap[0][0] <= now_ns:
            at, seq, subject = heapq.heappop(heap)
            if self._current(at, seq, subject):
                self._by_subject[subject] = (seq, _HELD)
                due.append((seq, subject, at))
        due.sort()
        return due

    def next_due(self) -> int | None:
        """When the next armed schedule is due (stale heap heads dropped)."""
        heap = self._heap
        while heap:
            at, seq, subject = heap[0]
            if self._current(at, seq, subject):
                return at
            heapq.heappop(heap)
        return None

    def armed(self) -> dict[str, tuple[int, int]]:
        """subject -> (seq, due) of every schedule not held (tests and diagnostics)."""
        return {s: e for s, e in self._by_subject.items() if e[1] != _HELD}

    def _current(self, at: int, seq: int, subject: str) -> bool:
        return self._by_subject.get(subject) == (seq, at)

    # -------------------------------------------------------------- what a store does

    def stored(
        self, seq: int, subject: str, header: bytes | None, ts_ns: int, *, kept: bool
    ) -> str:
        """Message `seq` was stored on `subject` at `ts_ns` (nats-server's storeRawMsg):
        arm, re-arm or disarm; returns the subject of a schedule it asks to purge, or "".
        A message interest retention does not keep (nats-server skips storing it) arms
        nothing but may still purge."""
        if not header or header.find(PREFIX) < 0:
            if kept:
                self.disarm(subject)
            return ""
        scheduler = _text(hdrs.raw_value(header, SCHEDULER) or b"")
        following = hdrs.raw_value(header, NEXT)
        if kept:
            try:
                parsed = next_due(header, ts_ns, ts_ns)
            except ApiError:
                parsed = None
            if parsed is not None:
                self.arm(seq, subject, parsed[0])
            elif not scheduler:
                self.disarm(subject)
            if following and following != PURGE and scheduler:
                with contextlib.suppress(ValueError):  # a time this server wrote
                    self.update(scheduler, parse_time(_text(following)))
        return scheduler if following == PURGE else ""

    @classmethod
    def rebuild(cls, store: MessageStore, now_ns: int) -> ScheduleIndex:
        """At start, or when an update turns schedules on: every stored schedule armed
        from the time it was stored (nats-server's recoverPerMessageState)."""
        index = cls()
        msg = store.load_next("", 0)
        while msg is not None:
            header = msg.header
            if header and header.find(SCHEDULE) >= 0:
                try:
                    parsed = next_due(header, msg.ts_ns, now_ns)
                except ApiError:
                    parsed = None
                if parsed is not None:
                    index.arm(msg.seq, msg.subject, parsed[0])
            msg = store.load_next("", msg.seq + 1)
        return index


# ---------------------------------------------------------------------------- the stream's side


def check_schedule(stream: Stream, header: bytes, subject: str) -> bytes:
    """A client's scheduling headers published to `stream` (`check_publish`); the header
    block to store."""
    config = stream.config
    add_rollup = check_publish(
        header,
        subject,
        allowed=config.allow_msg_schedules,
        allow_ttl=config.allow_msg_ttl,
        stream_subjects=config.subjects,
        store=stream.store,
        now_ns=stream.now_ns(),
    )
    return with_rollup(header) if add_rollup else header


def schedule_stored(
    stream: Stream, seq: int, subject: str, header: bytes | None, now: int, *, kept: bool
) -> None:
    """Message `seq` was stored in `stream`, which allows schedules: arm, re-arm or disarm
    a schedule (`ScheduleIndex.stored`), the stream's timer woken for the next one, and
    purge the schedule it names (it fired for the last time, or a client asked), as
    nats-server after the rollup."""
    schedules = stream.schedules
    assert schedules is not None
    cancelled = schedules.stored(seq, subject, header, now, kept=kept)
    if cancelled:
        schedules.disarm(cancelled)
        stream.purge(cancelled, 0, 0)
    due = schedules.next_due()
    if due is not None:
        stream.expiry.wake_by(due)  # the engine's timer fires for it


def fire_due(stream: Stream, now: int) -> None:
    """Store what the schedules of `stream` due by `now` produce, in the order of their
    sequences, each through the stream's ingest as a publish without a reply
    (`Stream.ingest_produced`: its TTL, rollup, limits, republish; the schedule re-armed or
    purged); tell the consumers (`on_markers`), and ask for the group commit that makes
    them durable. Lowers `expiry.next_wakeup_ns` to the next schedule, so the stream's
    timer wakes for it. A produced message the stream refuses is logged and its schedule
    held until a new schedule replaces it, as nats-server holds it."""
    index = stream.schedules
    assert index is not None
    store = stream.store
    stored: list[tuple[str, int]] = []
    for seq, subject, due in index.pop_due(now):
        schedule = store.load(seq)
        produced = None
        if schedule is not None:
            produced = produce(schedule, due, now, store.load_last)
        if produced is None:  # removed, or no longer a schedule
            index.forget(subject, seq)
            continue
        result = stream.ingest_produced(produced.subject, produced.header, produced.data)
        if result.error is not None:
            log.warning(
                "stream %s: schedule %s (seq %d) could not store its message: %s",
                stream.name,
                subject,
                seq,
                result.error.description,
            )
        elif result.kept:
            stored.append((produced.subject, result.seq))
    if stored:
        if stream.on_markers is not None:
            stream.on_markers(stored)
        stream.sync_soon()
    due_next = index.next_due()
    if due_next is not None:
        stream.expiry.wake_by(due_next)
