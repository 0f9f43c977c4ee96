"""JSON shapes of stream state, stream info and account info (wire reference §3.3, §9.2).

Timestamps are RFC 3339 in UTC with up to nine fractional digits and trailing zeros
dropped, as Go formats `time.Time` with RFC3339Nano; the zero time is
`0001-01-01T00:00:00Z`. Only documented keys are emitted (§11 item 15).
"""

from __future__ import annotations

import functools
import time
from datetime import UTC, datetime
from typing import Any

from brook.jetstream.store.base import StreamState

ZERO_TIME = "0001-01-01T00:00:00Z"


@functools.lru_cache(maxsize=64)
def _second(seconds: int) -> str:
    """A second's RFC 3339 text: the messages of a batch are mostly stored in few seconds."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))


def format_ts_ns(ts_ns: int) -> str:
    if ts_ns <= 0:
        return ZERO_TIME
    seconds, nanos = divmod(ts_ns, 1_000_000_000)
    base = _second(seconds)
    if nanos:
        return f"{base}.{nanos:09d}".rstrip("0") + "Z"
    return base + "Z"


def parse_ts(text: str) -> int:
    """RFC 3339 (any offset, up to 9 fractional digits) → ns since the epoch; ValueError if bad."""
    text = text.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    main, frac, tail = text, "", ""
    if "." in text:
        main, rest = text.split(".", 1)
        digits = len(rest) - len(rest.lstrip("0123456789"))
        frac, tail = rest[:digits], rest[digits:]
        main += tail
    dt = datetime.fromisoformat(main)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    nanos = int((frac + "000000000")[:9]) if frac else 0
    return int(dt.timestamp()) * 1_000_000_000 + nanos


def stream_state_to_json(state: StreamState, consumer_count: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "messages": state.messages,
        "bytes": state.bytes,
        "first_seq": state.first_seq,
        "first_ts": format_ts_ns(state.first_ts_ns if state.messages else 0),
        "last_seq": state.last_seq,
        "last_ts": format_ts_ns(state.last_ts_ns),
    }
    if state.num_subjects:
        out["num_subjects"] = state.num_subjects
    if state.subjects is not None:
        out["subjects"] = state.subjects
    if state.num_deleted:
        out["num_deleted"] = state.num_deleted
    if state.deleted:  # nats-server's omitempty: no gaps, no key
        out["deleted"] = state.deleted
    if state.lost is not None:  # nats-server's `lost`: messages damage or a crash took
        out["lost"] = {"msgs": list(state.lost.msgs), "bytes": state.lost.bytes}
    out["consumer_count"] = consumer_count
    return out
