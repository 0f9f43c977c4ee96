"""The JetStream headers a publish is checked by, read by both paths that check them: one
message (`Stream.ingest`, stream.py) and an atomic batch as a whole before it is stored
(`check_commit`, batch.py). Header names as nats-server spells them (`JSExpected*`,
`JSMsgRollup`), with the bound on a header block and the syntax of their integers."""

from __future__ import annotations

from brook.protocol.headers import HeaderBlock, contains

MSG_ID = "Nats-Msg-Id"  # dedup.py's: a publish's only checked header, most of the time

EXPECTED_STREAM = "Nats-Expected-Stream"
EXPECTED_LAST_SEQ = "Nats-Expected-Last-Sequence"
EXPECTED_LAST_SUBJ_SEQ = "Nats-Expected-Last-Subject-Sequence"
EXPECTED_LAST_MSG_ID = "Nats-Expected-Last-Msg-Id"
ROLLUP = "Nats-Rollup"
MAX_HEADER_BYTES = 65535  # a larger header block is refused (10097)
# Every header a publish is checked by (those above, `Nats-TTL`, `Nats-Incr`,
# `Nats-Batch-*`, `Nats-Schedule*`, `Nats-Stream-Source`) is named so.
_CHECKED = "Nats-"
_CHECKED_RAW = b"Nats-"
_MSG_ID_RAW = MSG_ID.encode()
_PLAIN_FIRST = b"NATS/1.0"  # a header block's first line, with no status
# What `Stream._ingest` looks for anywhere in a header block before its checks (a batch, a
# counter's increment, a schedule): batch.BATCH_ID, counters.INCR, schedules.PREFIX (equal,
# tests/unit/test_publish_plain.py), named here as this compiled module imports neither.
_GENERAL_ONLY = (b"Nats-Batch-Id", b"Nats-Incr", b"Nats-Schedule")


def uint(value: str) -> int | None:
    """ASCII digits only: `str.isdigit` also takes digits such as "²" that `int()` refuses."""
    return int(value) if value.isascii() and value.isdigit() else None


def plain_msg_id(block: HeaderBlock, plain: tuple[str, ...] = (MSG_ID,)) -> str | None:
    """The `Nats-Msg-Id` of `block` ("" for none) when none of its fields is one a
    publish is checked by but those named in `plain`; None when it has such a field, for
    the full checks. Most headers published to a stream are an application's own and a
    `Nats-Msg-Id` (Spark's writes): one pass over the names spares those the lookup of
    every JetStream header in turn."""
    for name, _ in block.fields:
        if name.startswith(_CHECKED) and name not in plain:
            return None
    return block.get(MSG_ID) or ""


def raw_msg_id(header: bytes) -> str | None:
    """`plain_msg_id(headers.parse(header))` read from the raw bytes, without the parse's
    objects, for the usual header block (ADR 0057): ASCII, no status, no field a
    publish is checked by but `Nats-Msg-Id`; None for any other (a block the parse
    refuses included), which the caller parses and checks in full. Lines, names and the
    value's trimming are the parse's (`str.strip` of the ASCII value)."""
    if not header.isascii():
        return None  # the parse's surrogateescape and str.strip: left to it
    lines = header.split(b"\r\n")
    if lines[0] != _PLAIN_FIRST:
        return None  # a status line, or no header block
    msg_id: str | None = None
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(b":")
        if not sep or not name:
            return None  # the parse refuses it
        if name.startswith(_CHECKED_RAW):
            if name != _MSG_ID_RAW:
                return None
            if msg_id is None:  # the first one counts (`HeaderBlock.get`)
                msg_id = value.decode().strip()
    return msg_id or ""


def plain_publish_id(header: bytes | None) -> str | None:
    """The `Nats-Msg-Id` ("" for none) of a publish whose header asks nothing of the
    stream but dedup, the one `PlainPublish.store` stores (ingress.py, ADR 0062): none, or a block
    within `MAX_HEADER_BYTES` that names no batch, increment or schedule anywhere and
    that `raw_msg_id` answers. None for any other header, which `Stream._ingest` checks
    in full. One compiled call for the tests `_ingest` makes one by one (`contains`)."""
    if not header:
        return ""
    if len(header) > MAX_HEADER_BYTES:
        return None
    for name in _GENERAL_ONLY:
        if contains(header, name):
            return None
    return raw_msg_id(header)
