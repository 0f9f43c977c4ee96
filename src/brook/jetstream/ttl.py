"""Per-message TTL (`Nats-TTL`): parsing the header as nats-server does, and the TTL index.

Everything here is pure (no I/O, no clock): the stream (`stream.py`) reads headers, removes
messages from its store and asks the index what is due, so expiry is exact to the
nanosecond under a manual clock in tests.

Semantics, each checked against nats-server 2.15.1 (see the conformance scenarios
`msg-ttl-*` and tests/unit/test_msg_ttl.py):

* The value is taken from the first header line named exactly `Nats-TTL` (case-sensitive),
  with leading spaces (not tabs) skipped and trailing whitespace kept, so `"5 "` is
  invalid. An empty value means "no TTL".
* `never` (any case) exempts the message from the stream's `max_age`.
* Otherwise the value is first tried as a Go duration (`time.ParseDuration`: `"30s"`,
  `"1h30m"`, `"+5s"`, `"1.5s"`); it must be at least 1 s and is truncated to whole
  seconds (`"1500ms"` lives 1 s). Failing that, it must be a string of ASCII digits
  (`"30"`, `"01"`); nats-server parses those with wrapping int64 arithmetic, so
  `"18446744073709551621"` (2^64 + 5) is a 5 s TTL and `"9223372036854775808"` (2^63,
  which wraps negative) is invalid. A digit string of zeros (`"00"`) is "no TTL", while the
  duration `"0"` is invalid because it parses as a duration shorter than 1 s.
* A positive TTL does NOT extend a message past the stream's `max_age`: max_age 2 s with
  `Nats-TTL: 4` removes the message after 2 s. Only `never` exempts.
* The deadline is `ts + ttl * 1e9` in wrapping int64 arithmetic, as nats-server computes
  it: an absurd TTL (`"9223372036854775807"`, `"2562047h"`) overflows to a deadline in the
  past and the message expires at once, exactly as on the reference server.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from brook import durations
from brook.protocol import headers as hdrs

NEVER = -1
"""`parse_ttl` result for `Nats-TTL: never`."""

NS_PER_S = durations.NS_PER_S
_HEADER = b"Nats-TTL"
_INT64_MIN = -(1 << 63)
_UINT64 = 1 << 64


class InvalidTTL(ValueError):
    """The `Nats-TTL` value is not one nats-server accepts (error 10165)."""


def _wrap64(n: int) -> int:
    """`n` as Go's int64 arithmetic would leave it after overflow."""
    return (n - _INT64_MIN) % _UINT64 + _INT64_MIN


def header_value(header: bytes | None) -> str | None:
    """The raw `Nats-TTL` value of a header block, or None when there is no such line.

    Not `headers.parse(...).get()`: that strips trailing whitespace, and nats-server keeps
    it (so `"5 "` is rejected there). Leading spaces are skipped, tabs are not.
    """
    value = hdrs.raw_value(header, _HEADER) if header else None
    return None if value is None else value.decode("utf-8", "surrogateescape")


def parse_ttl(value: str) -> int:
    """A `Nats-TTL` value -> whole seconds (> 0), `NEVER`, or 0 for "no TTL".

    Raises `InvalidTTL` for anything nats-server answers with 10165.
    """
    if value.lower() == "never":
        return NEVER
    raw = value.encode("utf-8", "surrogateescape")
    duration = durations.parse_ns(raw)
    if duration is not None:
        if duration < NS_PER_S:
            raise InvalidTTL(value)
        # Go: int64(d.Seconds()), where Seconds() is float64(sec) + float64(nsec)/1e9; the
        # float rounding is kept so a duration a nanosecond short of N s rounds like Go's.
        sec, nsec = divmod(duration, NS_PER_S)
        return int(float(sec) + float(nsec) / 1e9)
    if not raw.isdigit():  # bytes.isdigit: ASCII digits only, False when empty
        raise InvalidTTL(value)
    seconds = _wrap64(int(raw))
    if seconds < 0:
        raise InvalidTTL(value)
    return seconds


def format_seconds(seconds: int) -> str:
    """Whole seconds as Go's `time.Duration.String()` writes them: "5s", "1m30s",
    "1h0m0s" (the form of the `Nats-TTL` header on subject delete markers)."""
    return durations.go_string(seconds * NS_PER_S)


def deadline(ts_ns: int, ttl_s: int) -> int:
    """When a message stored at `ts_ns` with a positive TTL expires (nats-server's int64
    arithmetic, overflow included)."""
    return _wrap64(ts_ns + _wrap64(ttl_s * NS_PER_S))


class TtlIndex:
    """Which stored messages have a TTL, and which are exempt from max_age (`never`).

    A min-heap of `(deadline_ns, seq)` plus a set of `never` sequences. Entries are added
    when a message is stored and never updated when it is removed some other way (limits,
    purge, delete, rollup, max_age): a stale entry only ever makes the stream look at a
    sequence that is gone, which it skips. `compact` drops stale entries once they could
    dominate memory.
    """

    __slots__ = ("_heap", "_never")

    def __init__(self) -> None:
        self._heap: list[tuple[int, int]] = []
        self._never: set[int] = set()

    def __len__(self) -> int:
        return len(self._heap) + len(self._never)

    def add(self, seq: int, ts_ns: int, ttl_s: int) -> int | None:
        """Record the TTL of a message just stored (or found at recovery); returns its
        deadline for a positive TTL, None for `never` or no TTL."""
        if ttl_s == NEVER:
            self._never.add(seq)
            return None
        if ttl_s <= 0:
            return None
        due = deadline(ts_ns, ttl_s)
        heapq.heappush(self._heap, (due, seq))
        return due

    @property
    def has_exempt(self) -> bool:
        """Whether any (possibly already removed) message is exempt from max_age."""
        return bool(self._never)

    def is_exempt(self, seq: int) -> bool:
        return seq in self._never

    def pop_due(self, now_ns: int) -> list[int]:
        """Sequences whose deadline is at or before `now_ns`, ascending (removing in
        sequence order lets a store advance its first sequence cheaply)."""
        heap = self._heap
        due: list[int] = []
        while heap and heap[0][0] <= now_ns:
            due.append(heapq.heappop(heap)[1])
        due.sort()
        return due

    def next_deadline(self, alive: Callable[[int], bool]) -> int | None:
        """The earliest deadline of a message that still exists; stale heads are dropped."""
        heap = self._heap
        while heap:
            due, seq = heap[0]
            if alive(seq):
                return due
            heapq.heappop(heap)
        return None

    def compact(self, alive: Callable[[int], bool]) -> None:
        """Forget every entry whose message is gone."""
        self._heap = [entry for entry in self._heap if alive(entry[1])]
        heapq.heapify(self._heap)
        self._never = {seq for seq in self._never if alive(seq)}

    def seqs(self) -> list[int]:
        """Every recorded sequence, ascending (tests and diagnostics)."""
        return sorted([seq for _, seq in self._heap] + list(self._never))
