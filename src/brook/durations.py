"""Go durations: `time.ParseDuration` and `time.Duration.String()`, in one place.

nats-server reads and writes durations with Go's `time` package: `Nats-TTL` headers,
`-NAK <delay>` bodies and its configuration files parse them, its monitoring JSON and API
error texts print them. Brook reproduces both directions exactly here, so every caller
shares one definition of "a Go duration":

* `parse_ns` is `time.ParseDuration`: a signed sequence of decimal numbers, each with a
  unit (`ns`, `us`, `µs` or `μs`, `ms`, `s`, `m`, `h`), in integer nanoseconds, or None
  where Go returns an error (including int64 overflow).
* `go_string` is `time.Duration.String()`: "0s", "1.5s", "2m0s", "1h0m0s", "664µs"
  (the micro sign U+00B5, as Go writes it).
* `parse_seconds` is the form of Brook's configuration and command line: a plain number
  of seconds, or an unsigned Go duration; ValueError otherwise.

A leaf module: it imports nothing of Brook (an import-linter contract holds it so).
"""

from __future__ import annotations

import re

__all__ = ["NS_PER_MS", "NS_PER_S", "NS_PER_US", "go_string", "parse_ns", "parse_seconds"]

NS_PER_US = 1_000
NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000

_INT64_OVERFLOW = 1 << 63
_UNITS = {
    b"ns": 1,
    b"us": NS_PER_US,
    "µ".encode() + b"s": NS_PER_US,  # U+00B5 MICRO SIGN
    "μ".encode() + b"s": NS_PER_US,  # U+03BC GREEK SMALL LETTER MU
    b"ms": NS_PER_MS,
    b"s": NS_PER_S,
    b"m": 60 * NS_PER_S,
    b"h": 3600 * NS_PER_S,
}
_SECONDS_RE = re.compile(r"-?\d+(?:\.\d+)?", re.ASCII)


def parse_ns(text: str | bytes) -> int | None:
    """Go's `time.ParseDuration` in nanoseconds, or None where Go returns an error."""
    s = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text
    neg = False
    if s[:1] in (b"-", b"+"):
        neg = s[:1] == b"-"
        s = s[1:]
    if s == b"0":
        return 0
    if not s:
        return None
    total = 0
    while s:
        if not (s[:1] == b"." or s[:1].isdigit()):
            return None
        i = 0
        whole = 0
        while i < len(s) and 0x30 <= s[i] <= 0x39:
            if whole > _INT64_OVERFLOW // 10:
                return None
            whole = whole * 10 + s[i] - 0x30
            if whole > _INT64_OVERFLOW:
                return None
            i += 1
        pre = i > 0
        s = s[i:]
        frac, scale, post = 0, 1.0, False
        if s[:1] == b".":
            s = s[1:]
            i = 0
            overflow = False
            while i < len(s) and 0x30 <= s[i] <= 0x39:
                if not overflow:
                    if frac > (_INT64_OVERFLOW - 1) // 10:
                        overflow = True
                    else:
                        frac = frac * 10 + s[i] - 0x30
                        scale *= 10
                i += 1
            post = i > 0
            s = s[i:]
        if not pre and not post:
            return None
        i = 0
        while i < len(s) and not (s[i] == 0x2E or 0x30 <= s[i] <= 0x39):
            i += 1
        if i == 0:
            return None  # missing unit
        unit = _UNITS.get(s[:i])
        if unit is None:
            return None
        s = s[i:]
        if whole > _INT64_OVERFLOW // unit:
            return None
        whole *= unit
        if frac > 0:
            whole += int(float(frac) * (float(unit) / scale))
            if whole > _INT64_OVERFLOW:
                return None
        total += whole
        if total > _INT64_OVERFLOW:
            return None
    if neg:
        return -total
    if total > _INT64_OVERFLOW - 1:
        return None
    return total


def go_string(ns: int) -> str:
    """Go's `time.Duration.String()` for a duration in nanoseconds.

    Below one second the largest unit that keeps the value >= 1 is used (ns, µs with the
    micro sign U+00B5, ms); from one second up the form is [Nh][Nm]N.NNNs, where minutes
    appear whenever hours do ("1h0m0s") and seconds always appear ("2m0s").
    """
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    u = abs(ns)
    if u < NS_PER_US:
        return f"{sign}{u}ns"
    if u < NS_PER_MS:
        return f"{sign}{_fraction(u, NS_PER_US)}\u00b5s"
    if u < NS_PER_S:
        return f"{sign}{_fraction(u, NS_PER_MS)}ms"
    whole_s, frac_ns = divmod(u, NS_PER_S)
    hours, rem = divmod(whole_s, 3600)
    minutes, secs = divmod(rem, 60)
    text = _fraction(secs * NS_PER_S + frac_ns, NS_PER_S) + "s"
    if hours:
        text = f"{hours}h{minutes}m{text}"
    elif minutes:
        text = f"{minutes}m{text}"
    return sign + text


def _fraction(value: int, unit: int) -> str:
    """`value / unit` in decimal with trailing zeros (and a bare dot) removed, as Go does."""
    whole, frac = divmod(value, unit)
    if not frac:
        return str(whole)
    digits = len(str(unit)) - 1
    return f"{whole}.{str(frac).zfill(digits).rstrip('0')}"


def parse_seconds(text: str) -> float:
    """Seconds from a plain number (`2`, `1.5`) or an unsigned Go duration (`500ms`, `1m30s`).

    Plain numbers are seconds, as nats-server reads an unquoted number in its configuration
    file; a sign belongs only to plain numbers. Raises ValueError for anything else.
    """
    text = text.strip()
    if _SECONDS_RE.fullmatch(text):
        return float(text)
    ns = None if text[:1] in ("+", "-") else parse_ns(text)
    if ns is None:
        raise ValueError(f"not a duration: {text!r}")
    return ns / NS_PER_S
