"""Go durations (`brook.durations`) and the monitoring JSON's time formats.

Expected values are what Go's `time.ParseDuration`, `time.Duration.String()`, nats-server's
`myUptime` and `time.RFC3339Nano` produce for the same inputs; tools parse these, so they
must match.
"""

from __future__ import annotations

import calendar

import pytest

from brook.durations import go_string, parse_ns, parse_seconds
from brook.monitor.durations import (
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
def test_go_string_matches_go(ns: int, expected: str) -> None:
    assert go_string(ns) == expected


def test_micro_sign_is_the_one_go_uses() -> None:
    # Go writes U+00B5 MICRO SIGN, not U+03BC GREEK SMALL LETTER MU.
    assert go_string(12_000).encode() == b"12\xc2\xb5s"


@pytest.mark.parametrize(
    ("text", "expected"),
    [  # from Go's time/time_test.go parseDurationTests
        ("0", 0),
        ("5s", 5 * S),
        ("30s", 30 * S),
        ("1478s", 1478 * S),
        ("-5s", -5 * S),
        ("+5s", 5 * S),
        ("-0", 0),
        ("+0", 0),
        ("5.0s", 5 * S),
        ("5.6s", 5 * S + 600 * MS),
        ("5.s", 5 * S),
        (".5s", 500 * MS),
        ("1.0s", S),
        ("1.00s", S),
        ("1.004s", S + 4 * MS),
        ("100.00100s", 100 * S + 1 * MS),
        ("10ns", 10),
        ("11us", 11_000),
        ("12µs", 12_000),  # U+00B5
        ("12μs", 12_000),  # U+03BC
        ("13ms", 13 * MS),
        ("14s", 14 * S),
        ("15m", 15 * 60 * S),
        ("16h", 16 * 3600 * S),
        ("3h30m", (3 * 3600 + 30 * 60) * S),
        ("10.5s4m", 4 * 60 * S + 10_500 * MS),
        ("-2m3.4s", -(2 * 60 * S + 3_400 * MS)),
        ("1h2m3s4ms5us6ns", 3600 * S + 2 * 60 * S + 3 * S + 4 * MS + 5_000 + 6),
        ("39h9m14.425s", (39 * 3600 + 9 * 60 + 14) * S + 425 * MS),
        ("52763797000ns", 52_763_797_000),
        ("0.3333333333333333333h", 20 * 60 * S),
        ("9007199254740993ns", (1 << 53) + 1),
        ("9223372036854775807ns", (1 << 63) - 1),
        ("9223372036854775.807us", (1 << 63) - 1),
        ("-9223372036854775808ns", -(1 << 63)),
        ("0.100000000000000000000h", 6 * 60 * S),
    ],
)
def test_parse_ns_matches_go(text: str, expected: int) -> None:
    assert parse_ns(text) == expected
    assert parse_ns(text.encode()) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "3",
        "-",
        "s",
        ".",
        "-.",
        ".s",
        "+.s",
        "1d",
        "\x85\x85",
        "\xffff",
        "hello \xffff world",
        "9223372036854775808ns",
        "9223372036854775.808us",
        "2562048h",
        "5 s",
        " 5s",
    ],
)
def test_parse_ns_refuses_what_go_refuses(text: str) -> None:
    assert parse_ns(text) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2", 2.0),
        ("1.5", 1.5),
        ("-3", -3.0),
        ("2s", 2.0),
        ("500ms", 0.5),
        ("1m", 60.0),
        ("1h30m", 5400.0),
        (" 8s ", 8.0),
        ("1.s", 1.0),
    ],
)
def test_parse_seconds(text: str, expected: float) -> None:
    assert parse_seconds(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["", "s", "2x", "1m 2s", "soon", "-", "-2s", "+2s", "1d"])
def test_parse_seconds_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_seconds(text)


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
