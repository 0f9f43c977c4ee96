"""Time formatting exactly as nats-server's monitoring JSON shows it.

Tools written against nats-server (the `nats` CLI, nats-top, dashboards) parse these
strings, so Brook reproduces Go's formats rather than inventing friendlier ones:

* `rtt_string` is Go's `time.Duration.String()` (`brook.durations.go_string`) of a
  round-trip time truncated as nats-server truncates it ("664µs"), used for `rtt`.
* `uptime_string` is nats-server's own `myUptime` (whole seconds, with days and years:
  "1d2h3m4s"), used for `uptime` and `idle`.
* `rfc3339_nano` is Go's `time.RFC3339Nano` in UTC (trailing fractional zeros trimmed),
  used for `start`, `now` and `last_activity`; `rfc3339_seconds` reads one back (`/metrics`).

`go_number` is how Go writes any float64 (`cpu`, `cache_hit_rate`): `2`, not `2.0`.

Pure functions of numbers; nothing here touches a clock.
"""

from __future__ import annotations

import calendar
import re
import time

from brook.durations import NS_PER_MS, NS_PER_S, NS_PER_US, go_string

_RFC3339_UTC = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(\.\d{1,9})?Z")


def go_number(value: float) -> float | int:
    """A float64 as Go encodes it in JSON: 2.0 as `2` (which JSON readers take for an
    integer), anything else as is."""
    return int(value) if float(value).is_integer() else value


def seconds_to_ns(seconds: float) -> int:
    """Seconds as integer nanoseconds: how Go serialises a `time.Duration` in JSON."""
    return round(seconds * NS_PER_S)


def rtt_string(rtt_s: float | None) -> str:
    """A connection's round-trip time as nats-server reports it; "0s" when never measured.

    nats-server truncates sub-millisecond RTTs to whole microseconds ("664µs" rather than
    "664.123µs"); larger values keep full precision.
    """
    if rtt_s is None or rtt_s <= 0:
        return "0s"
    ns = seconds_to_ns(rtt_s)
    if NS_PER_US < ns < NS_PER_MS:
        ns -= ns % NS_PER_US
    return go_string(ns)


def uptime_string(seconds: float) -> str:
    """nats-server's `myUptime`: whole seconds, largest unit years, zero units kept inside."""
    total = max(0, int(seconds))
    mins, secs = divmod(total, 60)
    hours, mins = divmod(mins, 60)
    days, hours = divmod(hours, 24)
    years, days = divmod(days, 365)
    if years:
        return f"{years}y{days}d{hours}h{mins}m{secs}s"
    if days:
        return f"{days}d{hours}h{mins}m{secs}s"
    if hours:
        return f"{hours}h{mins}m{secs}s"
    if mins:
        return f"{mins}m{secs}s"
    return f"{secs}s"


def rfc3339_nano(timestamp: float) -> str:
    """A Unix timestamp as Go's RFC3339Nano in UTC, at the microsecond precision a float holds."""
    micros = round(timestamp * 1_000_000)
    whole, frac = divmod(micros, 1_000_000)
    text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
    if frac:
        text += "." + f"{frac:06d}".rstrip("0")
    return text + "Z"


def rfc3339_seconds(text: str) -> float:
    """The Unix time of a UTC RFC3339 time as `rfc3339_nano` writes it (nanoseconds kept
    as far as a float holds them); ValueError for any other string."""
    match = _RFC3339_UTC.fullmatch(text)
    if match is None:
        raise ValueError(f"not an RFC3339 UTC time: {text!r}")
    whole = calendar.timegm(tuple(int(g) for g in match.groups()[:6]))
    return whole + float(match[7] or 0)
