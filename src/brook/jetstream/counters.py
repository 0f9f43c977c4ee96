"""Counter streams (`allow_msg_counter`, ADR-49), as nats-server 2.12+ keeps them.

A publish to a counter stream carries no payload and a `Nats-Incr` header: a base-10
integer of any size, with an optional sign. The stream stores, in place of the empty
payload, the subject's new total as `{"val":"<total>"}` (the header as published), and
the PubAck says the total too: `{"stream":..,"seq":..,"val":"<total>"}`. The total is
the last stored message of the subject plus the increment, so a counter continues from
its last stored value after a restart with no state of its own, is reset by a purge and
goes back one step when its last message is deleted, as with nats-server.

nats-server's checks, in its order (`processJetStreamMsg`): an unreadable `Nats-Incr` is
10171 on any stream; a readable one is 10168 on a stream without counters, 10170 with a
payload, and 10171 beside `Nats-Rollup` or any `Nats-Expected-*` header. A publish
without `Nats-Incr` to a counter stream is 10169, checked after the duplicate
`Nats-Msg-Id` (a duplicate is answered as one, without `val`) and the rollup checks. A
subject whose last message is not a counter's (a subject delete marker) is 10172.

Totals are `Decimal`s in an exact context: Go's `big.Int` has no size limit, while
Python's `int` refuses to convert more than 4300 digits to or from text.

On a counter stream with subject delete markers, a subject's last message outlives its
expiry (`outlives_expiry`): the marker meant to replace it is not a valid increment.

A counter stream with sources adds up its origins' counters (ADR-49's source-based
replicated counters, nats-server's `processJetStreamMsg`): a sourced message (one with
`Nats-Stream-Source`) brings its origin's total, not an increment; the stream keeps the
last total it took from each origin subject in `Nats-Counter-Sources` (JSON: origin
stream -> origin subject -> total), adds the difference to its own total and stores it as
the message's `Nats-Incr`. Every later message of the subject, a client's increment
included, carries the header on (replaced in place where the message has one, else added
last, as nats-server's `setHeader`), so the stream never loses what it took. A sourcing
stream without counters, and a mirror, store a counter's messages as they came.
"""

from __future__ import annotations

import decimal
import json
import re

from brook.jetstream.advisories import GO_ESCAPES
from brook.jetstream.errors import api_error
from brook.jetstream.store.base import MessageStore
from brook.protocol import headers as hdrs

INCR = b"Nats-Incr"
COUNTER_SOURCES = b"Nats-Counter-Sources"
_STREAM_SOURCE = b"Nats-Stream-Source"
_ORIGIN_SUBJECT_FIELD = 4  # <name> <seq> <filter> <dest> <origin subject> [<ident>]
# What Go's `big.Int.SetString(s, 10)` accepts: an optional sign and decimal digits only
# (no blanks, no underscores, no base prefix).
_INCREMENT = re.compile(rb"[+-]?[0-9]+")
# A stored total as `SetString` reads it when it fails part way: its leading integer.
_LEADING = re.compile(r"[+-]?[0-9]*")
# Headers that cannot accompany an increment (nats-server: "incompatible headers").
_INCOMPATIBLE = (
    b"Nats-Rollup",
    b"Nats-Expected-Stream",
    b"Nats-Expected-Last-Msg-Id",
    b"Nats-Expected-Last-Subject-Sequence-Subject",
    b"Nats-Expected-Last-Sequence",
    b"Nats-Expected-Last-Subject-Sequence",
)
_EXACT = decimal.Context(
    prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, traps=[]
)
_ZERO = decimal.Decimal(0)


def check_increment(header: bytes, data: bytes, allowed: bool, *, sourced: bool = False) -> None:
    """Check a publish's `Nats-Incr` (none or an empty one is no increment) as nats-server
    checks it, before any other JetStream header; raises the ApiError. A `sourced`
    message's increment need only be a number: it is stored as it came, or added up."""
    raw = hdrs.raw_value(header, INCR)
    if not raw:
        return
    if _INCREMENT.fullmatch(raw) is None:
        raise api_error("MESSAGE_INCR_INVALID")
    if sourced:
        return
    if not allowed:
        raise api_error("MESSAGE_INCR_DISABLED")
    if data:
        raise api_error("MESSAGE_INCR_PAYLOAD")
    for name in _INCOMPATIBLE:
        if hdrs.raw_value(header, name):
            raise api_error("MESSAGE_INCR_INVALID")


def count(
    store: MessageStore, subject: str, header: bytes | None, data: bytes, max_msg_size: int
) -> tuple[bytes, bytes]:
    """The header and payload to store for a message to a counter stream whose increment
    passed `check_increment`: the subject's new total as nats-server writes it, and for a
    sourced message the difference it made as its `Nats-Incr` (module docstring); the
    subject's `Nats-Counter-Sources` carried on. Raises 10169 without an increment, 10172
    when the subject's last message holds no total or unreadable sources, or a sourced
    message no total, 10054 when the new message passes `max_msg_size` (nats-server checks
    that limit on the message it stores)."""
    raw = hdrs.raw_value(header, INCR) if header else None
    if not raw or header is None:
        raise api_error("MESSAGE_INCR_MISSING")
    last = store.load_last(subject)
    total = _ZERO
    sources: dict[str, dict[str, str]] = {}
    if last is not None:
        total = _stored_total(last.data)
        recorded = hdrs.raw_value(last.header, COUNTER_SOURCES) if last.header else None
        if recorded:
            sources = _read_sources(recorded)
    increment = decimal.Decimal(raw.decode())
    origin = hdrs.raw_value(header, _STREAM_SOURCE)
    if origin:
        fields = origin.decode("utf-8", "surrogateescape").split(" ")
        stream = fields[0]
        origin_subject = fields[_ORIGIN_SUBJECT_FIELD] if len(fields) > 4 else subject
        sourced = _stored_total(data)
        taken = sources.setdefault(stream, {})
        increment = _EXACT.subtract(sourced, _leading_integer(taken.get(origin_subject, "")))
        taken[origin_subject] = _text(sourced)
        header = set_header(header, INCR, _text(increment).encode())
    body = payload_of(_text(_EXACT.add(total, increment)).encode())
    if sources:
        header = set_header(header, COUNTER_SOURCES, _sources_json(sources))
    if 0 <= max_msg_size < len(body) + len(header):
        raise api_error("STREAM_MESSAGE_EXCEEDS_MAXIMUM")
    return header, body


def set_header(block: bytes, name: bytes, value: bytes) -> bytes:
    """nats-server's `setHeader`: the value of the first `name:` line replaced (one blank
    after the colon kept), or the line added last."""
    start = block.find(b"\r\n" + name + b":")
    if start >= 0:
        begin = start + 3 + len(name)
        if block[begin : begin + 1] == b" ":
            begin += 1
        end = block.find(b"\r", begin)
        if end < 0:
            return block  # malformed: left as it is, as nats-server leaves it
        return block[:begin] + value + block[end:]
    head = block[:-2] if block.endswith(b"\r\n") else block
    return head + name + b": " + value + b"\r\n\r\n"


def _read_sources(raw: bytes) -> dict[str, dict[str, str]]:
    """`Nats-Counter-Sources` read as Go's `json.Unmarshal` into `map[string]map[string]
    string` reads it; anything else is a broken counter (10172)."""
    try:
        value = json.loads(raw)
    except ValueError:
        raise api_error("MESSAGE_COUNTER_BROKEN") from None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise api_error("MESSAGE_COUNTER_BROKEN")
    out: dict[str, dict[str, str]] = {}
    for stream, subjects in value.items():
        if subjects is None:
            out[stream] = {}
            continue
        if not isinstance(subjects, dict):
            raise api_error("MESSAGE_COUNTER_BROKEN")
        if any(total is not None and not isinstance(total, str) for total in subjects.values()):
            raise api_error("MESSAGE_COUNTER_BROKEN")
        out[stream] = {key: total or "" for key, total in subjects.items()}
    return out


def _sources_json(sources: dict[str, dict[str, str]]) -> bytes:
    """`Nats-Counter-Sources` as Go's `json.Marshal` writes the map: keys sorted, no blanks."""
    text = json.dumps(sources, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.translate(GO_ESCAPES).encode("utf-8", "surrogateescape")


def _text(value: decimal.Decimal) -> str:
    """A total as Go's `big.Int.String()` writes it (no sign on zero)."""
    return str(value) if value else "0"


def outlives_expiry(counting: bool, store: MessageStore, subject: str) -> bool:
    """Whether an expired message stays, on a stream with subject delete markers: on a
    counter stream (`counting`) the marker nats-server would put in place of a subject's
    last message is refused by the counter's own check (it has no `Nats-Incr`), so that
    message, the counter's total, stays until a newer one on its subject lets it go (the
    expiry is tried again, as nats-server tries it again)."""
    return counting and store.subject_state(subject).messages == 1


def total_of(body: bytes) -> bytes:
    """The total in a payload `next_total` made, for the PubAck's `val`."""
    return body[8:-2]


def payload_of(total: bytes) -> bytes:
    """The payload stored for `total` (and republished: nats-server republishes what it
    stored)."""
    return b'{"val":"%s"}' % total


def _stored_total(data: bytes) -> decimal.Decimal:
    """The total a stored message holds, read as nats-server reads it: JSON with a string
    `val` (missing or null: 0); anything else is a broken counter (10172)."""
    try:
        value = json.loads(data)
    except ValueError:
        raise api_error("MESSAGE_COUNTER_BROKEN") from None
    if value is None:
        return _ZERO
    if not isinstance(value, dict):
        raise api_error("MESSAGE_COUNTER_BROKEN")
    text = ""
    for key, item in value.items():  # Go: any case of "val", the last one set wins
        if key.lower() != "val" or item is None:
            continue
        if not isinstance(item, str):
            raise api_error("MESSAGE_COUNTER_BROKEN")
        text = item
    return _leading_integer(text)


def _leading_integer(text: str) -> decimal.Decimal:
    """A total's text as `big.Int.SetString` leaves it: its leading integer, else 0."""
    digits = _LEADING.match(text)
    assert digits is not None  # the pattern matches the empty string
    found = digits.group()
    return decimal.Decimal(found) if found.lstrip("+-") else _ZERO
