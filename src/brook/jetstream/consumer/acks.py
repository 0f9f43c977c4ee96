"""Pure codecs for the consumer wire surface: ack reply subjects (wire reference §6.1), ack
payloads (§6.2) and pull request payloads (§6.5). No state, no I/O."""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass

from brook import durations, strconv

ACK_PREFIX = "$JS.ACK."
ACK_ROUTE_TOKENS = 2
"""The tokens after `ACK_PREFIX` that say which consumer an ack is for (stream,
consumer): the engine registers the prefix as an exclusive route prefix with them
(`Sublist.add_exclusive_prefix`), each consumer's ack subscription being a route."""


def ack_subject(
    stream: str,
    consumer: str,
    delivered: int,
    stream_seq: int,
    consumer_seq: int,
    timestamp_ns: int,
    pending: int,
) -> str:
    """The version 1 (9-token) ack reply subject nats-py expects."""
    return (
        f"{ACK_PREFIX}{stream}.{consumer}.{delivered}.{stream_seq}.{consumer_seq}."
        f"{timestamp_ns}.{pending}"
    )


@dataclass(frozen=True, slots=True)
class AckMeta:
    stream: str
    consumer: str
    delivered: int
    stream_seq: int
    consumer_seq: int
    timestamp_ns: int
    pending: int
    domain: str | None = None  # version 2 only; "_" (no domain) reads as None
    account_hash: str | None = None  # version 2 only


def parse_ack_subject(subject: str) -> AckMeta | None:
    """Read either ack subject form; None if it is not a well-formed ack subject.

    Version 1: `$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>`;
    version 2: `$JS.ACK.<domain>.<acc-hash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.
    <ts>.<pending>[.<extra>...]`.
    """
    tokens = subject.split(".")
    if len(tokens) < 9 or tokens[0] != "$JS" or tokens[1] != "ACK":
        return None
    domain: str | None = None
    acc: str | None = None
    if len(tokens) == 9:
        names, nums = tokens[2:4], tokens[4:9]
    elif len(tokens) >= 11:
        domain = None if tokens[2] == "_" else tokens[2]
        acc = tokens[3]
        names, nums = tokens[4:6], tokens[6:11]
    else:
        return None
    if not all(names) or not all(n.isascii() and n.isdigit() for n in nums):
        return None
    d, s, c, t, p = (int(n) for n in nums)
    return AckMeta(names[0], names[1], d, s, c, t, p, domain, acc)


# The version 1 form with every check `parse_ack_subject` makes (bytes `\d` is ASCII only).
_ACK_V1 = re.compile(rb"\$JS\.ACK\.[^.]+\.[^.]+\.(\d+)\.(\d+)\.(\d+)\.\d+\.\d+")


def ack_sequences(subject: bytes) -> tuple[int, int, int] | None:
    """(delivered, stream_seq, consumer_seq) of an ack subject as received, or None when
    `parse_ack_subject` would refuse it.

    The hot path of every ack: the common 9-token form is recognised on the bytes by one
    regular expression, without decoding, splitting or building the metadata object;
    anything else (version 2, or not an ack subject) goes through `parse_ack_subject`.
    """
    m = _ACK_V1.fullmatch(subject)
    if m is not None:
        d, s, c = m.groups()
        return int(d), int(s), int(c)
    meta = parse_ack_subject(subject.decode("utf-8", "surrogateescape"))
    return None if meta is None else (meta.delivered, meta.stream_seq, meta.consumer_seq)


# `_ACK_V1` for each of several subjects joined by blanks (which no subject holds),
# keeping the stream sequence only.
_ACK_V1_RUN = re.compile(rb"(?<![^ ])\$JS\.ACK\.[^. ]+\.[^. ]+\.\d+\.(\d+)\.\d+\.\d+\.\d+(?![^ ])")


def ack_run_stream_seqs(subjects: list[bytes]) -> list[int] | None:
    """The stream sequence of each ack subject, as `ack_sequences` gives it, in one
    regular-expression scan; None unless every subject is of the version 1 form.

    For subjects as the parser reads them, which hold no blanks (the run's separator).
    An explicit ack needs no more: the consumer finds the rest in its pending entry.
    """
    found = _ACK_V1_RUN.findall(b" ".join(subjects))
    if len(found) != len(subjects):
        return None
    return list(map(int, found))


class AckKind(enum.Enum):
    ACK = "+ACK"
    NAK = "-NAK"
    WPI = "+WPI"
    TERM = "+TERM"
    NXT = "+NXT"


@dataclass(frozen=True, slots=True)
class PullGroup:
    """The priority-group fields of a pull request (nats-server's `PriorityGroup`)."""

    group: str = ""
    min_pending: int = 0
    min_ack_pending: int = 0
    id: str = ""
    priority: int = 0


@dataclass(frozen=True, slots=True)
class PullRequest:
    batch: int = 1
    expires_ns: int = 0
    no_wait: bool = False
    max_bytes: int = 0
    idle_heartbeat_ns: int = 0
    group: PullGroup | None = None  # None: not the JSON form (nats-server's nil group)


class PullRequestError(ValueError):
    """The payload is not a valid pull request; str(e) is the status description."""


@dataclass(frozen=True, slots=True)
class AckPayload:
    kind: AckKind
    delay_ns: int | None = None  # -NAK with a delay
    reason: str = ""  # +TERM reason
    next_request: PullRequest | None = None  # +NXT: the pull request that follows the ack


def _nak_delay(arg: str) -> int | None:
    arg = arg.strip()
    if not arg:
        return None
    if arg.startswith("{"):
        try:
            obj = json.loads(arg)
        except ValueError:
            return None
        delay = obj.get("delay") if isinstance(obj, dict) else None
        if isinstance(delay, int) and not isinstance(delay, bool) and delay > 0:
            return delay
        return None
    ns = durations.parse_ns(arg)  # nats-server: time.ParseDuration
    return ns if ns is not None and ns > 0 else None  # unparsable or not positive: plain NAK


_PLAIN_ACK = AckPayload(AckKind.ACK)  # immutable: one shared value for the common case
PLAIN_ACK_BODIES = (b"", b"+ACK", b"+OK")


def parse_ack_payload(payload: bytes) -> AckPayload | None:
    """Classify an ack message body; None for anything the server ignores."""
    if payload in PLAIN_ACK_BODIES:
        return _PLAIN_ACK
    try:
        text = payload.decode()
    except UnicodeDecodeError:
        return None
    if text.startswith("-NAK"):
        return AckPayload(AckKind.NAK, delay_ns=_nak_delay(text[4:]))
    if text == "+WPI":
        return AckPayload(AckKind.WPI)
    if text.startswith("+TERM"):
        return AckPayload(AckKind.TERM, reason=text[5:].strip())
    if text.startswith("+NXT"):
        try:
            req = parse_pull_request(text[4:].strip().encode())
        except PullRequestError:
            req = PullRequest()
        return AckPayload(AckKind.NXT, next_request=req)
    return None


# The Go types of nats-server's pull request struct (JSApiConsumerGetNextRequest and its
# embedded PriorityGroup), by JSON key: type errors are reported in Go's words.
_GO_FIELDS = {
    "expires": "time.Duration",
    "batch": "int",
    "max_bytes": "int",
    "no_wait": "bool",
    "idle_heartbeat": "time.Duration",
    "group": "string",
    "min_pending": "int64",
    "min_ack_pending": "int64",
    "id": "string",
    "priority": "int",
}
_INT64 = range(-(2**63), 2**63)


class _Number(str):
    """A JSON number kept as its literal text: Go's error names the literal."""


class _Object(list[tuple[str, object]]):
    """A JSON object kept as its key/value pairs, in order, duplicates included."""


def _no_constant(name: str) -> object:
    raise ValueError(f"invalid character {name[0]!r} looking for beginning of value")


def _go_kind(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, _Number):
        return "number"
    if isinstance(value, str):
        return "string"
    return "object" if isinstance(value, _Object) else "array"


def _go_decode(key: str, value: object) -> int | bool | str:
    """Decode one field as Go's encoding/json would into its Go type, or raise with the
    text of Go's `UnmarshalTypeError`."""
    go_type = _GO_FIELDS[key.lower()]
    if go_type == "bool" and isinstance(value, bool):
        return value
    if go_type == "string" and isinstance(value, str) and not isinstance(value, _Number):
        return str(value)
    if go_type not in ("bool", "string") and isinstance(value, _Number):
        if strconv.INTEGER.fullmatch(value) and int(value) in _INT64:
            return int(value)
        kind = f"number {value}"  # Go quotes the literal when it is a number
    else:
        kind = _go_kind(value)
    raise PullRequestError(
        f"Bad Request - json: cannot unmarshal {kind} into Go struct field .{key} of type {go_type}"
    )


def _go_object(text: bytes) -> dict[str, int | bool | str]:
    """The JSON object form decoded as nats-server does: keys match case-insensitively,
    unknown keys and nulls are ignored, a later duplicate wins, and the first value of
    the wrong type fails the request."""
    try:
        pairs = json.loads(
            text.decode("utf-8", "replace"),  # Go reads invalid UTF-8 in strings as U+FFFD
            object_pairs_hook=_Object,
            parse_int=_Number,
            parse_float=_Number,
            parse_constant=_no_constant,
        )
    except ValueError as e:  # Python's syntax error texts, not Go's: only the status matters
        raise PullRequestError(f"Bad Request - {e}") from None
    except RecursionError:
        raise PullRequestError("Bad Request - exceeded max depth") from None
    fields: dict[str, int | bool | str] = {}
    for key, value in pairs:
        if key.lower() in _GO_FIELDS and value is not None:
            fields[key.lower()] = _go_decode(key, value)
    return fields


def parse_pull_request(payload: bytes) -> PullRequest:
    """A pull request payload, read as nats-server reads it.

    Empty -> batch 1; starting with `{` -> the JSON object form; otherwise a decimal
    integer is the batch and anything else means batch 1 (never an error). Errors carry
    nats-server's status description: Go's type errors, `heartbeat value too large`
    (2 * idle_heartbeat > expires). The JSON form always carries its priority-group
    fields (`group`, checked by the consumer: `priority.request_error`)."""
    text = payload.strip()
    if not text:
        return PullRequest()
    if not text.startswith(b"{"):
        digits = text.decode("ascii", "replace")
        if strconv.INTEGER.fullmatch(digits) and int(digits) in _INT64:
            return PullRequest(batch=max(int(digits), 1))
        return PullRequest()
    obj = _go_object(text)
    expires = int(obj.get("expires", 0))
    heartbeat = int(obj.get("idle_heartbeat", 0))
    if heartbeat > 0 and 2 * heartbeat > expires:
        raise PullRequestError("Bad Request - heartbeat value too large")
    batch = int(obj.get("batch", 0))
    return PullRequest(
        batch=batch if batch > 0 else 1,
        expires_ns=max(expires, 0),
        no_wait=bool(obj.get("no_wait", False)),
        max_bytes=max(int(obj.get("max_bytes", 0)), 0),
        idle_heartbeat_ns=max(heartbeat, 0),
        group=PullGroup(
            str(obj.get("group", "")),
            int(obj.get("min_pending", 0)),
            int(obj.get("min_ack_pending", 0)),
            str(obj.get("id", "")),
            int(obj.get("priority", 0)),
        ),
    )
