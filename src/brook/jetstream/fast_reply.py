"""What a fast batch publish's reply subject says (fast_batch.py), read once per message:
compiled (ADR 0045, 0066), as every message of a Spark write's batch is read here.

The reply is `<inbox>.<batch id>.<flow>.<gap mode>.<batch seq>.<op>.$FI`. A batch's
messages differ only in sequence and op, so the head (`<inbox>.<id>.<flow>.<gap mode>`)
is read once per batch (or per switch between batches) and remembered; the sequence and
op are read from the end for every message, with nats-server's refusals in its order:
the pattern (10206) before a long batch id (10207).
"""

from __future__ import annotations

from typing import Final, final

from mypy_extensions import i64

from brook.jetstream.errors import api_error

SUFFIX: Final = b".$FI"
START: Final = 0
APPEND: Final = 1
COMMIT: Final = 2
COMMIT_EOB: Final = 3
PING: Final = 4
_ID_BYTES_MAX: Final = 64
_FLOW_DEFAULT: Final = 10  # a flow of 0 or less (or no number)
_FLOW_MAX: Final = 0xFFFF
_UINT64_MAX: Final = 2**64 - 1
_SEQ_SHORT: Final = 10**18  # a sequence below it is compared as a machine integer
_DIGITS_NATIVE: Final = 18  # numbers of up to 18 digits are read in an i64
_DOT: Final = 46
_ZERO: Final = 48
_NINE: Final = 57


@final
class FastOp:
    """What a fast batch publish's reply subject says (one made per message)."""

    def __init__(self, batch_id: str, flow: int, gap_ok: bool, seq: int, op: int) -> None:
        self.batch_id = batch_id
        self.flow = flow  # acks at most this many messages apart (10 for none, at most 65535)
        self.gap_ok = gap_ok  # gap mode `ok` (else `fail`)
        self.seq = seq  # the batch sequence, from 1
        self.op = op  # START, APPEND, COMMIT, COMMIT_EOB or PING

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FastOp):
            return NotImplemented
        return (self.batch_id, self.flow, self.gap_ok, self.seq, self.op) == (
            other.batch_id,
            other.flow,
            other.gap_ok,
            other.seq,
            other.op,
        )

    def __hash__(self) -> int:
        return hash((self.batch_id, self.flow, self.gap_ok, self.seq, self.op))

    def __repr__(self) -> str:
        return (
            f"FastOp(batch_id={self.batch_id!r}, flow={self.flow}, gap_ok={self.gap_ok}, "
            f"seq={self.seq}, op={self.op})"
        )


# The last head read and what it says, one tuple replaced whole, so that servers on other
# threads never see a head with another head's reading.
_last: tuple[bytes, str, int, bool] = (b"", "", 0, False)


def parse_reply(reply: bytes) -> FastOp:
    """The batch a reply subject ending in `.$FI` names; raises nats-server's error for a
    pattern it does not take (10206) or an id longer than 64 bytes (10207)."""
    global _last
    end: i64 = len(reply) - len(SUFFIX)
    op_dot = _last_dot(reply, end)
    seq_dot = _last_dot(reply, op_dot)
    if seq_dot < 0:  # fewer than two dots: no sequence (or no head) to read
        raise api_error("BATCH_PUBLISH_INVALID_PATTERN")
    op = _digits(reply, op_dot + 1, end)
    seq = _digits(reply, seq_dot + 1, op_dot)
    if (
        not START <= op <= PING
        or not (0 < seq < _SEQ_SHORT or _SEQ_SHORT <= seq < _UINT64_MAX)  # a short int first
        or (seq == 1 and op == COMMIT_EOB)
        or (op == START and seq != 1)
        or (op == APPEND and seq <= 1)
    ):
        raise api_error("BATCH_PUBLISH_INVALID_PATTERN")
    head = reply[:seq_dot]
    last = _last
    if head != last[0] or not head:
        batch_id, flow, gap_ok = _parse_head(head)
        _last = (head, batch_id, flow, gap_ok)
        return FastOp(batch_id, flow, gap_ok, seq, op)
    return FastOp(last[1], last[2], last[3], seq, op)


def _last_dot(reply: bytes, end: i64) -> i64:
    """The position of the last `.` before `end`, -1 for none."""
    i = end - 1
    while i >= 0 and reply[i] != _DOT:
        i -= 1
    return i


def _digits(reply: bytes, start: i64, end: i64) -> int:
    """The value of `reply[start:end]` when it is ASCII digits (`int(raw)` for
    `raw.isdigit()`), -1 for anything else. Up to 18 digits in a machine integer (Python
    ints as large as 2**64 are objects whose arithmetic costs far more), more by `int`."""
    if start >= end:
        return -1
    if end - start > _DIGITS_NATIVE:
        raw = reply[start:end]
        return int(raw) if raw.isdigit() else -1
    value: i64 = 0
    i = start
    while i < end:
        c: i64 = reply[i]
        if c < _ZERO or c > _NINE:
            return -1
        value = value * 10 + (c - _ZERO)
        i += 1
    return value


def _parse_head(head: bytes) -> tuple[str, int, bool]:
    """`<anything>.<batch id>.<flow>.<gap mode>`: the id, the flow and whether gaps are ok;
    raises as `parse_reply` says (a bad pattern first, then a long id)."""
    parts = head.rsplit(b".", 3)
    if len(parts) < 4 or parts[3] not in (b"fail", b"ok"):
        raise api_error("BATCH_PUBLISH_INVALID_PATTERN")
    _, raw_id, raw_flow, gap_mode = parts
    flow = int(raw_flow) if raw_flow.isdigit() else -1  # nats-server's `parseInt64`
    flow = _FLOW_DEFAULT if flow <= 0 else min(flow, _FLOW_MAX)
    if len(raw_id) > _ID_BYTES_MAX:
        raise api_error("BATCH_PUBLISH_INVALID_BATCH_ID")
    return raw_id.decode("utf-8", "surrogateescape"), flow, gap_mode == b"ok"
