"""Go-compatible time formatting for the monitoring JSON.

Expected strings are what Go's `time.Duration.String()`, nats-server's `myUptime` and
`time.RFC3339Nano` produce for the same inputs; tools parse these, so they must match.
"""

from __future__ import annotations

import calendar

import pytest

from brook.monitor.durations import (
    duration_string,
    rfc3339_nano,
    rtt_string,
    seconds_to_ns,
    uptime_string,
)

MS = 1_000_000
S = 1_000_000_000


@pytest.mark.parametrize(
    ("ns", "expected"),
    [
        (0, "0s"),
        (1, "1ns"),
        (999, "999ns"),
        (1_000, "1µs"),
        (12_000, "12µs"),
        (1_500, "1.5µs"),
        (150 * MS, "150ms"),
        (1_234_000, "1.234ms"),
        (1_234_567, "1.234567ms"),
        (999_999_999, "999.999999ms"),
        (S, "1s"),
        (1_500 * MS, "1.5s"),
        (S + 1, "1.000000001s"),
        (59 * S, "59s"),
        (60 * S, "1m0s"),
        (120 * S, "2m0s"),
        (90 * S, "1m30s"),
        (3600 * S, "1h0m0s"),
        (3723 * S, "1h2m3s"),
        (3723 * S + 500 * MS, "1h2m3.5s"),
        (100 * 3600 * S, "100h0m0s"),
        (-1_500 * MS, "-1.5s"),
        (-5, "-5ns"),
    ],
)
def test_duration_string_matches_go(ns: int, expected: str) -> None:
    assert duration_string(ns) == expected


def test_micro_sign_is_the_one_go_uses() -> None:
    # Go writes U+00B5 MICRO SIGN, not U+03BC GREEK SMALL LETTER MU.
    assert duration_string(12_000).encode() == b"12\xc2\xb5s"


def test_seconds_to_ns_is_go_json_for_configured_durations() -> None:
    assert seconds_to_ns(120.0) == 120 * S
    assert seconds_to_ns(0.25) == 250 * MS
    assert isinstance(seconds_to_ns(2.0), int)


@pytest.mark.parametrize(
    ("rtt_s", "expected"),
    [
        (None, "0s"),
        (0.0, "0s"),
        (0.000664123, "664µs"),  # sub-millisecond: truncated to whole microseconds
        (0.001234, "1.234ms"),
        (1.5, "1.5s"),
    ],
)
def test_rtt_string_follows_nats_server(rtt_s: float | None, expected: str) -> None:
    assert rtt_string(rtt_s) == expected


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (0, "0s"),
        (0.9, "0s"),
        (59.99, "59s"),
        (60, "1m0s"),
        (3723, "1h2m3s"),
        (86400, "1d0h0m0s"),
        (86400 + 3723, "1d1h2m3s"),
        (365 * 86400 + 86400 + 1, "1y1d0h0m1s"),
        (-3, "0s"),
    ],
)
def test_uptime_string_is_nats_server_my_uptime(seconds: float, expected: str) -> None:
    assert uptime_string(seconds) == expected


def test_rfc3339_nano_is_utc_with_trimmed_fraction() -> None:
    base = calendar.timegm((2024, 3, 5, 7, 8, 9, 0, 0, 0))
    assert rfc3339_nano(base) == "2024-03-05T07:08:09Z"
    assert rfc3339_nano(base + 0.5) == "2024-03-05T07:08:09.5Z"
    assert rfc3339_nano(base + 0.123456) == "2024-03-05T07:08:09.123456Z"
    assert rfc3339_nano(base + 0.9999996) == "2024-03-05T07:08:10Z"
