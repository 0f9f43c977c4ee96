"""Sources (ADR 0020): the `Nats-Stream-Source` header each sourced message carries.

nats-server writes `<name> <origin seq> <filters> <destinations> <origin subject>` and,
when the origin told it its identity, ` <ident>` (`genSourceHeader`); the first, third and
fourth fields are the source's internal name (`StreamSource.iname`), the origin sequence
is read from the delivery's ack reply. When a stream starts, the newest message carrying
a source's header says where that source resumes (`streamAndSeq`, which also reads the
two older forms: a whole ack reply, and `<name> <seq>` from before nats-server 2.10).
The origin sends its identity (`Nats-Stream-Identity`) with its consumer-create reply.

`Tracking` is what a mirror or a source knows of its origin's deliveries: the last origin
sequence stored and the last delivery sequence seen, and what each new delivery means
(`processInboundMirrorMsg`/`processInboundSourceMsg`). The link to each origin (its
consumer, flow control, heartbeats, retries) is the next step.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from brook.jetstream.models.info import format_ts_ns
from brook.jetstream.models.sources import go_hash
from brook.protocol import headers as hdrs

STREAM_SOURCE_HEADER = "Nats-Stream-Source"
IDENTITY_HEADER = b"Nats-Stream-Identity"  # nats-server's JSStreamIdentity
_STREAM_SOURCE_RAW = STREAM_SOURCE_HEADER.encode()
_ACK_PREFIX = "$JS.ACK."
_REPLY_TOKENS_V1 = 9  # $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<dseq>.<ts>.<pending>
_REPLY_TOKENS_V2 = 11  # ... with <domain>.<account hash> after $JS.ACK


def stream_identity(created_ns: int) -> str:
    """An origin's identity, the last field of the header (nats-server's `identity()`:
    the hash of its creation time in RFC 3339 with nanoseconds). A recreated origin has
    another, which is how a source tells it from the one it was copying."""
    return go_hash(format_ts_ns(created_ns))


def sourced_header(header: bytes | None, value: str) -> bytes:
    """The header a sourced message is stored with, as `processInboundSourceMsg` makes
    it: the origin's header (which the link stripped of `Nats-Expected-*` and
    `Nats-Batch-*`) without its own `Nats-Stream-Source` (a daisy chain: the last hop's
    is kept; nats-server's `removeHeaderIfPresent`), then `Nats-Stream-Source: value`
    last (`genHeader`)."""
    if header:
        header = hdrs.remove_prefixed(header, _STREAM_SOURCE_RAW + b":")
    head = header[:-2] if header and len(header) > 2 else hdrs.PREFIX + b"\r\n"
    return head + b"%s: %s\r\n\r\n" % (_STREAM_SOURCE_RAW, value.encode("utf-8", "surrogateescape"))


def source_header(iname: str, reply: str, subject: str, ident: str = "") -> str:
    """The header value nats-server's `genSourceHeader` writes for a message delivered
    with ack `reply` on the origin's `subject`; the sequence is "1" when the reply is not
    an ack reply it knows."""
    seq = "1"
    tokens = reply.split(".")
    if len(tokens) > 1 and tokens[0] == "$JS" and tokens[1] == "ACK":
        if len(tokens) == _REPLY_TOKENS_V1:
            seq = tokens[5]
        elif len(tokens) >= _REPLY_TOKENS_V2:
            seq = tokens[7]
    return source_header_at(iname, seq, subject, ident)


def source_header_at(iname: str, seq: str, subject: str, ident: str = "") -> str:
    """`source_header` of origin sequence `seq` (as its ack reply spells it)."""
    head, middle, tail = source_header_parts(iname, ident)
    return f"{head}{seq}{middle}{subject}{tail}"


def source_header_parts(iname: str, ident: str = "") -> tuple[str, str, str]:
    """The value `source_header_at` writes, around the sequence and the subject:
    `head + seq + middle + subject + tail` (made once for a run of one source's messages)."""
    name, filters, destinations = iname.split(" ")
    return f"{name} ", f" {filters} {destinations} ", f" {ident}" if ident else ""


@dataclass(frozen=True, slots=True)
class SourcePosition:
    """What a stored header says: the origin stream's name, the source's internal name
    ("" for the older forms, which match any source of that name), the origin sequence
    and the origin's identity ("" if none)."""

    stream: str
    iname: str
    seq: int
    ident: str = ""


def parse_source_header(value: str) -> SourcePosition | None:
    """nats-server's `streamAndSeq`; None where it finds nothing (its empty result). A
    sequence that is not a number is None too, where nats-server reads 2^64-1."""
    if value.startswith(_ACK_PREFIX):
        tokens = value.split(".")
        if len(tokens) != _REPLY_TOKENS_V1 and len(tokens) < _REPLY_TOKENS_V2:
            return None
        offset = 4 if len(tokens) >= _REPLY_TOKENS_V2 else 2
        seq = _number(tokens[offset + 3])
        return None if seq is None else SourcePosition(tokens[offset], "", seq)
    fields = value.split(" ")
    if len(fields) == 3 or len(fields) < 2:
        return None
    seq = _number(fields[1])
    if seq is None:
        return None
    if len(fields) == 2:
        return SourcePosition(fields[0], "", seq)
    iname = f"{fields[0]} {fields[2]} {fields[3]}"
    return SourcePosition(fields[0], iname, seq, fields[5] if len(fields) >= 6 else "")


def _number(text: str) -> int | None:
    """nats-server's parseAckReplyNum: ASCII digits only."""
    return int(text) if text and text.isascii() and text.isdigit() else None


class Verdict(enum.Enum):
    """What to do with a delivery from the origin's consumer."""

    STORE = "store"  # the next message: store it
    SKIP_AND_STORE = "skip"  # a mirror's origin lost messages: skip them, then store
    DUPLICATE = "duplicate"  # already stored (an older delivery): nothing to store
    RETRY = "retry"  # a delivery is missing: recreate the consumer after the last stored
    IGNORE = "ignore"  # another consumer's, a redelivery, or a stale delivery: dropped


@dataclass(slots=True)
class Tracking:
    """The origin sequence last stored (`sseq`) and the delivery sequence last seen
    (`dseq`) of one mirror or source; `consumer` is the origin consumer whose deliveries
    count, named by its create reply ("" until then: every delivery is dropped, as
    nats-server's `isCurrentSub` drops them)."""

    sseq: int = 0
    dseq: int = 0
    consumer: str = ""

    def mirror_delivery(self, consumer: str, sseq: int, dseq: int, delivered: int) -> Verdict:
        """nats-server's mirror rules: sequences must follow, or the origin must have
        lost the ones between (the delivery sequence follows): those become gaps."""
        verdict = self._common(consumer, sseq, dseq, delivered)
        if verdict is not None:
            return verdict
        if sseq == self.sseq + 1:
            self.sseq, self.dseq = sseq, dseq
            return Verdict.STORE
        if dseq == self.dseq + 1:
            return Verdict.SKIP_AND_STORE  # the caller skips, then `skipped(sseq)`
        return Verdict.RETRY

    def skipped(self, sseq: int) -> None:
        """The mirror stored the gap before `sseq` and the message at it."""
        self.sseq = sseq
        self.dseq += 1

    def source_delivery(self, consumer: str, sseq: int, dseq: int, delivered: int) -> Verdict:
        """nats-server's source rules: a source stores whatever its filter lets through,
        so origin sequences may jump; only the delivery sequence must follow."""
        verdict = self._common(consumer, sseq, dseq, delivered)
        if verdict is not None:
            return verdict
        if dseq == self.dseq + 1:
            self.sseq, self.dseq = sseq, dseq
            return Verdict.STORE
        return Verdict.RETRY if dseq > self.dseq else Verdict.IGNORE

    def _common(self, consumer: str, sseq: int, dseq: int, delivered: int) -> Verdict | None:
        if not self.consumer or consumer != self.consumer or delivered > 1:
            return Verdict.IGNORE
        if sseq <= self.sseq:
            if dseq == self.dseq + 1:
                self.dseq += 1
            return Verdict.DUPLICATE
        return None


def lag(pending: int) -> int:
    """The `lag` shown in stream info from a delivery's pending count (nats-server counts
    the delivery itself in it)."""
    return pending - 1 if pending else 0
