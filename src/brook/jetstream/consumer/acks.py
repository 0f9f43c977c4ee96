"""Pure codecs for the consumer wire surface: ack reply subjects (wire reference §6.1), ack
payloads (§6.2) and pull request payloads (§6.5). No state, no I/O."""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass

from brook.config.conf_syntax import parse_duration

ACK_PREFIX = "$JS.ACK."


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


class AckKind(enum.Enum):
    ACK = "+ACK"
    NAK = "-NAK"
    WPI = "+WPI"
    TERM = "+TERM"
    NXT = "+NXT"


@dataclass(frozen=True, slots=True)
class PullRequest:
    batch: int = 1
    expires_ns: int = 0
    no_wait: bool = False
    max_bytes: int = 0
    idle_heartbeat_ns: int = 0


class PullRequestError(ValueError):
    """The payload is not a valid pull request; str(e) is the status description."""


@dataclass(frozen=True, slots=True)
class AckPayload:
    kind: AckKind
    delay_ns: int | None = None  # -NAK with a delay
    reason: str = ""  # +TERM reason
    next_request: PullRequest | None = None  # +NXT: the pull request that follows the ack


_GO_DURATION = re.compile(r"(\d+(\.\d*)?(ns|us|µs|ms|s|m|h))+")


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
    if _GO_DURATION.fullmatch(arg):
        ns = round(parse_duration(arg) * 1_000_000_000)
        return ns if ns > 0 else None
    return None  # unparsable: a plain NAK


def parse_ack_payload(payload: bytes) -> AckPayload | None:
    """Classify an ack message body; None for anything the server ignores."""
    if payload in (b"", b"+ACK", b"+OK"):
        return AckPayload(AckKind.ACK)
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


def _int_field(obj: dict[str, object], key: str) -> int:
    v = obj.get(key, 0)
    if v is None:
        return 0
    if isinstance(v, bool) or not isinstance(v, int):
        raise PullRequestError(f"Bad Request - invalid {key}")
    return v


def parse_pull_request(payload: bytes) -> PullRequest:
    """Empty -> batch 1; an ASCII integer -> that batch; else the JSON object form."""
    text = payload.strip()
    if not text:
        return PullRequest()
    if text.isdigit():
        return PullRequest(batch=max(int(text), 1))
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise PullRequestError(f"Bad Request - {e}") from None
    if not isinstance(obj, dict):
        raise PullRequestError("Bad Request - request must be a JSON object")
    no_wait = obj.get("no_wait", False)
    if not isinstance(no_wait, bool):
        raise PullRequestError("Bad Request - invalid no_wait")
    batch = _int_field(obj, "batch")
    return PullRequest(
        batch=batch if batch > 0 else 1,
        expires_ns=max(_int_field(obj, "expires"), 0),
        no_wait=no_wait,
        max_bytes=max(_int_field(obj, "max_bytes"), 0),
        idle_heartbeat_ns=max(_int_field(obj, "idle_heartbeat"), 0),
    )
