"""Time formatting exactly as nats-server's monitoring JSON shows it.

Tools written against nats-server (the `nats` CLI, nats-top, dashboards) parse these
strings, so Brook reproduces Go's formats rather than inventing friendlier ones:

* `duration_string` is Go's `time.Duration.String()` ("0s", "1.5s", "2m0s", "664µs"),
  used for `rtt`.
* `uptime_string` is nats-server's own `myUptime` (whole seconds, with days and years:
  "1d2h3m4s"), used for `uptime` and `idle`.
* `rfc3339_nano` is Go's `time.RFC3339Nano` in UTC (trailing fractional zeros trimmed),
  used for `start`, `now` and `last_activity`.

Pure functions of numbers; nothing here touches a clock.
"""

from __future__ import annotations

import time

_NS_PER_US = 1_000
_NS_PER_MS = 1_000_000
_NS_PER_S = 1_000_000_000


def seconds_to_ns(seconds: float) -> int:
    """Seconds as integer nanoseconds: how Go serialises a `time.Duration` in JSON."""
    return round(seconds * _NS_PER_S)


def _fraction(value: int, unit: int) -> str:
    """`value / unit` in decimal with trailing zeros (and a bare dot) removed, as Go does."""
    whole, frac = divmod(value, unit)
    if not frac:
        return str(whole)
    digits = len(str(unit)) - 1
    return f"{whole}.{str(frac).zfill(digits).rstrip('0')}"


def duration_string(ns: int) -> str:
    """Go's `time.Duration.String()` for a duration in nanoseconds.

    Below one second the largest unit that keeps the value >= 1 is used (ns, µs with the
    micro sign U+00B5, ms); from one second up the form is [Nh][Nm]N.NNNs, where minutes
    appear whenever hours do ("1h0m0s") and seconds always appear ("2m0s").
    """
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    u = abs(ns)
    if u < _NS_PER_US:
        return f"{sign}{u}ns"
    if u < _NS_PER_MS:
        return f"{sign}{_fraction(u, _NS_PER_US)}\u00b5s"
    if u < _NS_PER_S:
        return f"{sign}{_fraction(u, _NS_PER_MS)}ms"
    whole_s, frac_ns = divmod(u, _NS_PER_S)
    hours, rem = divmod(whole_s, 3600)
    minutes, secs = divmod(rem, 60)
    text = _fraction(secs * _NS_PER_S + frac_ns, _NS_PER_S) + "s"
    if hours:
        text = f"{hours}h{minutes}m{text}"
    elif minutes:
        text = f"{minutes}m{text}"
    return sign + text


def rtt_string(rtt_s: float | None) -> str:
    """A connection's round-trip time as nats-server reports it; "0s" when never measured.

    nats-server truncates sub-millisecond RTTs to whole microseconds ("664µs" rather than
    "664.123µs"); larger values keep full precision.
    """
    if rtt_s is None or rtt_s <= 0:
        return "0s"
    ns = seconds_to_ns(rtt_s)
    if _NS_PER_US < ns < _NS_PER_MS:
        ns -= ns % _NS_PER_US
    return duration_string(ns)


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
