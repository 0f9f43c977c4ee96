"""A delivery's ack reply subject, formatted compiled (ADR 0067).

Every message a consumer delivers carries its own ack subject, `$JS.ACK.<stream>.
<consumer>.` (the consumer's `prefix`, made once) then `<delivered>.<stream seq>.<consumer
seq>.<timestamp>.<pending>` (wire reference §6.1; `acks.ack_subject` is the same in one
string). CPython 3.11 formats those five integers by `bytes % tuple` at about 3,000
instructions a subject (the nanosecond timestamp is a multi-digit int); compiled, each
short int is written by mypyc's own formatter and the subject built in one allocation."""

from __future__ import annotations

from brook.jetstream.store.base import StoredMessage


def ack_reply(prefix: bytes, delivered: int, seq: int, cseq: int, ts_ns: int, np: int) -> bytes:
    """The ack subject of delivery `delivered` of message `seq`, the consumer's `cseq`th,
    stored at `ts_ns`, with `np` messages pending after it."""
    return b"%b%d.%d.%d.%d.%d" % (prefix, delivered, seq, cseq, ts_ns, np)


def first_ack_replies(
    prefix: bytes, msgs: list[StoredMessage], cseq: int, pending_before: int
) -> list[bytes]:
    """The ack subjects of the first deliveries of `msgs`, at consecutive consumer
    sequences from `cseq`, the pending count going down from `pending_before` (not
    below 0): a run's (`actions.DeliverRun`)."""
    head = prefix + b"1."
    np = pending_before
    acks: list[bytes] = []
    for m in msgs:
        if np > 0:
            np -= 1
        acks.append(b"%b%d.%d.%d.%d" % (head, m.seq, cseq, m.ts_ns, np))
        cseq += 1
    return acks
