"""Cron patterns of message schedules (`Nats-Schedule`), as nats-server's `cron.go` reads them.

Six fields, seconds first: `second minute hour day-of-month month day-of-week`, each a
comma-separated list of `*` (or `?`), `N`, `N-M`, with an optional `/step` (`N/step`
means `N-max/step`); months and weekdays also by their English three-letter names, in
any case. Day of month and day of week combine as in cron: when either is `*`, both must
match, otherwise either may. `next_fire` is nats-server's `parseCron`: the first moment
strictly after the given one (from the next whole second) that matches, searched at most
five years ahead, in the schedule's time zone (UTC when none) with Go's `time` arithmetic
(adding a month or a day moves the wall clock and normalises, adding an hour, minute or
second moves the instant).

Pure: no clock, no I/O. (nats-server's code is based on github.com/robfig/cron.)
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, tzinfo

__all__ = ["CronError", "next_fire"]


class CronError(ValueError):
    """The pattern is not one nats-server accepts, or never fires within five years."""


_STAR = 1 << 63  # set when a field's expression was `*` or `?` (day matching needs it)
_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)  # what Go's strconv.Atoi accepts
_MONTHS = {
    name: i + 1
    for i, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
    )
}
_WEEKDAYS = {name: i for i, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
# (min, max, names) of each field, in the pattern's order.
_BOUNDS: tuple[tuple[int, int, dict[str, int] | None], ...] = (
    (0, 59, None),  # second
    (0, 59, None),  # minute
    (0, 23, None),  # hour
    (1, 31, None),  # day of month
    (1, 12, _MONTHS),  # month
    (0, 6, _WEEKDAYS),  # day of week, Sunday 0
)
_SECOND = timedelta(seconds=1)
_MINUTE = timedelta(minutes=1)
_HOUR = timedelta(hours=1)


def next_fire(pattern: str, zone: tzinfo | None, after_ns: int) -> int:
    """The first moment (ns since the epoch) after `after_ns` that `pattern` matches in
    `zone` (UTC when None); raises `CronError` as nats-server's `parseCron` fails."""
    fields = pattern.split()  # Go's strings.Fields
    if len(fields) != 6:
        raise CronError(f"pattern requires 6 fields, got {len(fields)}")
    second, minute, hour, dom, month, dow = (
        _field(text, bounds) for text, bounds in zip(fields, _BOUNDS, strict=True)
    )
    loc = zone or UTC
    seconds = after_ns // 1_000_000_000  # Go's Truncate(time.Second), then the next second
    t = datetime.fromtimestamp(seconds + 1, UTC).astimezone(loc)
    truncated = False
    year_limit = t.year + 5
    while True:  # nats-server's `goto WRAP`: every field is checked again after a wrap
        if t.year > year_limit:
            raise CronError("pattern exceeds maximum range")
        wrapped = False
        while not (1 << t.month) & month:
            if not truncated:
                truncated = True
                t = _wall(t.year, t.month, 1, 0, loc)
            t = _add_months(t, 1, loc)
            if t.month == 1:
                wrapped = True
                break
        if wrapped:
            continue
        while not _day_matches(dom, dow, t):
            if not truncated:
                truncated = True
                t = _wall(t.year, t.month, t.day, 0, loc)
            t = _add_days(t, 1, loc)
            if t.day == 1:
                wrapped = True
                break
        if wrapped:
            continue
        while not (1 << t.hour) & hour:
            if not truncated:
                truncated = True
                t = _wall(t.year, t.month, t.day, t.hour, loc)
            t = _add(t, _HOUR, loc)
            if t.hour == 0:
                wrapped = True
                break
        if wrapped:
            continue
        while not (1 << t.minute) & minute:
            if not truncated:
                truncated = True
                t = _truncate(t, 60, loc)
            t = _add(t, _MINUTE, loc)
            if t.minute == 0:
                wrapped = True
                break
        if wrapped:
            continue
        while not (1 << t.second) & second:
            if not truncated:
                truncated = True
                t = _truncate(t, 1, loc)
            t = _add(t, _SECOND, loc)
            if t.second == 0:
                wrapped = True
                break
        if wrapped:
            continue
        return int(t.timestamp()) * 1_000_000_000


def _field(text: str, bounds: tuple[int, int, dict[str, int] | None]) -> int:
    """A field's bits (nats-server's getField): its comma-separated ranges, empty ones
    skipped as Go's FieldsFunc skips them."""
    bits = 0
    for expr in text.split(","):
        if expr:
            bits |= _range(expr, bounds)
    return bits


def _range(expr: str, bounds: tuple[int, int, dict[str, int] | None]) -> int:
    """`number | number "-" number [ "/" number ]` (nats-server's getRange)."""
    low, high, names = bounds
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    single = len(low_and_high) == 1
    extra = 0
    if low_and_high[0] in ("*", "?"):
        start, end, extra = low, high, _STAR
    else:
        start = _int_or_name(low_and_high[0], names)
        if len(low_and_high) == 1:
            end = start
        elif len(low_and_high) == 2:
            end = _int_or_name(low_and_high[1], names)
        else:
            raise CronError(f"too many hyphens: {expr}")
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _int(range_and_step[1])
        if single:  # "N/step" means "N-max/step"
            end = high
        if step > 1:
            extra = 0
    else:
        raise CronError(f"too many slashes: {expr}")
    if start < low or end > high or start > end or step == 0:
        raise CronError(f"range out of bounds: {expr}")
    bits = 0
    for i in range(start, end + 1, step):
        bits |= 1 << i
    return bits | extra


def _int_or_name(expr: str, names: dict[str, int] | None) -> int:
    if names is not None and expr.lower() in names:
        return names[expr.lower()]
    return _int(expr)


def _int(expr: str) -> int:
    if not _INT.fullmatch(expr):
        raise CronError(f"failed to parse int from {expr}")
    value = int(expr)
    if value < 0:
        raise CronError(f"negative number ({value}) not allowed: {expr}")
    return value


def _day_matches(dom: int, dow: int, t: datetime) -> bool:
    dom_match = bool((1 << t.day) & dom)
    dow_match = bool((1 << ((t.weekday() + 1) % 7)) & dow)  # Go: Sunday is 0
    if dom & _STAR or dow & _STAR:
        return dom_match and dow_match
    return dom_match or dow_match


def _wall(year: int, month: int, day: int, hour: int, loc: tzinfo) -> datetime:
    """Go's time.Date(year, month, day, hour, 0, 0, 0, loc), a month or day past its end
    normalised forwards; a wall time a zone transition skips resolves to a real instant."""
    months = year * 12 + (month - 1)
    base = datetime(months // 12, months % 12 + 1, 1, tzinfo=loc)
    naive = base.replace(tzinfo=None) + timedelta(days=day - 1, hours=hour)
    return naive.replace(tzinfo=loc).astimezone(UTC).astimezone(loc)


def _add_months(t: datetime, months: int, loc: tzinfo) -> datetime:
    """Go's AddDate(0, months, 0): the wall clock moved, normalised as time.Date does."""
    total = t.year * 12 + (t.month - 1) + months
    base = datetime(total // 12, total % 12 + 1, 1)
    naive = base + timedelta(days=t.day - 1, hours=t.hour, minutes=t.minute, seconds=t.second)
    return naive.replace(tzinfo=loc).astimezone(UTC).astimezone(loc)


def _add_days(t: datetime, days: int, loc: tzinfo) -> datetime:
    """Go's AddDate(0, 0, days): same wall time on a later day."""
    naive = t.replace(tzinfo=None) + timedelta(days=days)
    return naive.replace(tzinfo=loc).astimezone(UTC).astimezone(loc)


def _add(t: datetime, delta: timedelta, loc: tzinfo) -> datetime:
    """Go's Add: the instant moves, whatever the wall clock does."""
    return (t.astimezone(UTC) + delta).astimezone(loc)


def _truncate(t: datetime, seconds: int, loc: tzinfo) -> datetime:
    """Go's Truncate (of the instant, counted from Go's zero time, a whole minute off the
    epoch)."""
    epoch = int(t.timestamp())
    return datetime.fromtimestamp(epoch - epoch % seconds, UTC).astimezone(loc)
