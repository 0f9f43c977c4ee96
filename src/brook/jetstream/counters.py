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

`Nats-Counter-Sources` (the totals a sourcing stream has taken from each origin) belongs
to sources, which Brook does not have yet.
"""

from __future__ import annotations

import decimal
import json
import re

from brook.jetstream.errors import api_error
from brook.jetstream.store.base import MessageStore
from brook.protocol import headers as hdrs

INCR = b"Nats-Incr"
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


def check_increment(header: bytes, data: bytes, allowed: bool) -> None:
    """Check a publish's `Nats-Incr` (none or an empty one is no increment) as nats-server
    checks it, before any other JetStream header; raises the ApiError."""
    raw = hdrs.raw_value(header, INCR)
    if not raw:
        return
    if _INCREMENT.fullmatch(raw) is None:
        raise api_error("MESSAGE_INCR_INVALID")
    if not allowed:
        raise api_error("MESSAGE_INCR_DISABLED")
    if data:
        raise api_error("MESSAGE_INCR_PAYLOAD")
    for name in _INCOMPATIBLE:
        if hdrs.raw_value(header, name):
            raise api_error("MESSAGE_INCR_INVALID")


def next_total(store: MessageStore, subject: str, header: bytes | None, max_msg_size: int) -> bytes:
    """The payload to store for a publish to a counter stream whose increment passed
    `check_increment`: the subject's new total as nats-server writes it. Raises 10169
    without an increment, 10172 when the subject's last message holds no total, 10054
    when the new message passes `max_msg_size` (nats-server checks that limit on the
    message it stores)."""
    raw = hdrs.raw_value(header, INCR) if header else None
    if not raw:
        raise api_error("MESSAGE_INCR_MISSING")
    last = store.load_last(subject)
    increment = decimal.Decimal(raw.decode())
    total = _EXACT.add(_ZERO if last is None else _stored_total(last.data), increment)
    body = payload_of((str(total) if total else "0").encode())
    if 0 <= max_msg_size < len(body) + (len(header) if header else 0):
        raise api_error("STREAM_MESSAGE_EXCEEDS_MAXIMUM")
    return body


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
    digits = _LEADING.match(text)
    assert digits is not None  # the pattern matches the empty string
    found = digits.group()
    return decimal.Decimal(found) if found.lstrip("+-") else _ZERO
