"""Fast batch publishes (`allow_batched`, ADR-50's fast ingest), as a single nats-server
2.14+ handles them (`processJetStreamFastBatchMsg`, `jetstream_batching.go`).

A fast batch is named by the publish's reply subject,
`<inbox>.<batch id>.<flow>.<gap mode>.<batch seq>.<op>.$FI` (op 0 start, 1 append,
2 commit, 3 commit by an end marker, 4 ping). Unlike an atomic batch nothing is staged:
each message is stored at once through the stream's checks, and the publisher hears,
on the reply subject of its latest message:

* flow acks `{"type":"ack","seq":S,"msgs":N}`: the messages up to batch sequence `S` are
  stored, and the next ack comes after `N` more (N starts at the publisher's `flow`,
  at most 500, and shrinks to share 500 among the stream's batches, or grows back);
  the first message gets one with `seq` 0 at once;
* gaps `{"type":"gap","last_seq":E,"seq":S}`: batch sequences `E` to `S - 1` never came;
  in gap mode `fail` the batch ends there, in `ok` it goes on;
* errors `{"type":"err","seq":S,"error":{...}}`: message `S` failed the stream's checks
  (a batch whose first message fails gets the plain error PubAck instead); in mode
  `fail` the batch ends there;
* the PubAck `{"stream":..,"seq":..,"batch":..,"count":..}` when the batch ends: by its
  commit (op 2 stores its message, op 3 stores none), or cut short by a gap or an error
  in mode `fail`, counting the messages up to the end.

A ping (op 4) stores nothing: it resends the last flow ack, or reports a gap when the
publisher sent more than arrived. Every reply leaves through the stream's durability
gate in order (`Stream._after_durable`), so a flow ack or a PubAck means what it says
on stable storage, as a PubAck does (ADR 0004); nats-server sends them once stored.

Batches are keyed by stream and id, bounded per stream and per server (nats-server's
1000 and 50,000 unless `limits { batch { max_inflight_* } }` says otherwise), and
dropped silently, without an advisory, when idle past the batch timeout (the same idle
timer as atomic batches, batch.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from brook.jetstream.batch import BatchLimits, IdleBatches
from brook.jetstream.errors import ApiError, api_error

SUFFIX = b".$FI"
_START, _APPEND, _COMMIT, _COMMIT_EOB, _PING = range(5)
_ID_BYTES_MAX = 64
_FLOW_DEFAULT = 10  # a flow of 0 or less (or no number)
_FLOW_MAX = 0xFFFF
_ACKS_SHARED = 500  # flow acks at most every 500 messages, shared among batches
_UINT64_MAX = 2**64 - 1

Send = Callable[[bytes, bytes], None]  # (reply subject, payload), in order


class FastOp(NamedTuple):
    """What a fast batch publish's reply subject says (a tuple: built once per message)."""

    batch_id: str
    flow: int
    gap_ok: bool
    seq: int
    op: int


def _go_int(text: bytes) -> int:
    """nats-server's `parseInt64`: the digits' value, -1 for anything else."""
    return int(text) if text.isdigit() else -1


# The last batch's reply subject up to its sequence (`<inbox>.<id>.<flow>.<gap mode>`) and
# what it says: a batch's messages differ only in sequence and op, so the head is checked
# once per batch (or per switch between batches), not once per message.
# One tuple, replaced whole, so that servers on other threads never see a head with
# another head's reading.
_last: tuple[bytes, tuple[str, int, bool]] = (b"", ("", 0, False))


def parse_reply(reply: bytes) -> FastOp:
    """The batch a reply subject ending in `.$FI` names; raises nats-server's error for a
    pattern it does not take (10206) or an id longer than 64 bytes (10207)."""
    global _last
    head, _, tail = reply[: -len(SUFFIX)].rpartition(b".")
    head, _, raw_seq = head.rpartition(b".")
    op = int(tail) if tail.isdigit() else -1
    seq = int(raw_seq) if raw_seq.isdigit() else 0
    if (
        not 0 <= op <= _PING
        or not 0 < seq < _UINT64_MAX
        or (seq == 1 and op == _COMMIT_EOB)
        or (op == _START and seq != 1)
        or (op == _APPEND and seq <= 1)
    ):
        raise api_error("BATCH_PUBLISH_INVALID_PATTERN")
    last = _last
    if head != last[0] or not head:
        said = _parse_head(head)
        _last = (head, said)
    else:
        said = last[1]
    return FastOp(said[0], said[1], said[2], seq, op)


def _parse_head(head: bytes) -> tuple[str, int, bool]:
    """`<anything>.<batch id>.<flow>.<gap mode>`: the id, the flow and whether gaps are ok;
    raises as `parse_reply` says (a bad pattern first, then a long id)."""
    parts = head.rsplit(b".", 3)
    if len(parts) < 4 or parts[3] not in (b"fail", b"ok"):
        raise api_error("BATCH_PUBLISH_INVALID_PATTERN")
    _, raw_id, raw_flow, gap_mode = parts
    flow = _go_int(raw_flow)
    flow = _FLOW_DEFAULT if flow <= 0 else min(flow, _FLOW_MAX)
    if len(raw_id) > _ID_BYTES_MAX:
        raise api_error("BATCH_PUBLISH_INVALID_BATCH_ID")
    return raw_id.decode("utf-8", "surrogateescape"), flow, gap_mode == b"ok"


@dataclass(slots=True)
class _Fast:
    touched_ns: int
    gap_ok: bool
    max_ack: int  # the publisher's flow: acks at most this many messages apart
    ack_every: int  # acks this many messages apart now
    lseq: int = 0  # the highest batch sequence received
    pseq: int = 0  # the highest batch sequence stored (or skipped as a duplicate)
    fseq: int = 0  # the batch sequence of the last flow ack
    sseq: int = 0  # the stream sequence of the batch's last stored message
    # Ended while a message it counts is not stored (after an error in gap mode `ok`): it
    # takes no more messages and waits for its timeout (nats-server's `commit`).
    ending: bool = False


class FastBatches(IdleBatches[_Fast]):
    """One stream's fast batches in progress. `send` is the stream's durability gate;
    `name_json` its name as JSON, for PubAcks."""

    def __init__(
        self, limits_: BatchLimits, now_ns: Callable[[], int], send: Send, name_json: bytes
    ) -> None:
        super().__init__(limits_, now_ns)
        self._send = send
        self._name_json = name_json
        # No batch was touched before this (the oldest's time when `_expire` last ran), so
        # none expires before the timeout after it: `_enter` skips `_expire` until then.
        self._oldest_ns = 0

    def publish(
        self,
        op: FastOp,
        reply: bytes,
        store: Callable[[], tuple[int, bool]],
        *,
        level_refused: bool = False,
    ) -> int:
        """One fast batch publish; `store` stores its message through the stream's
        checks: (stream sequence, duplicate), or raises the `ApiError`. Returns the
        stream sequence stored, or 0. Raises the `ApiError` to answer as a plain
        publish's (nothing of the batch stored before it). `level_refused`: the message
        asks for a higher API level (versioning.py), which ends its batch."""
        b = self._enter(op)
        if level_refused:
            self._drop(op.batch_id)
            raise api_error("REQUIRED_API_LEVEL")
        if op.op == _PING:
            self._ping(b, op, reply)
            return 0
        if b.ending:
            return 0
        b.lseq += 1
        if b.lseq != op.seq:
            # Reported backwards too (nats-server 2.15.1; its newer source reports only
            # forward gaps).
            self._gap(reply, b.lseq, op.seq)
            if not (b.gap_ok and op.seq > b.lseq):
                b.lseq -= 1
                self._end(b, op, reply)
                return 0
            b.lseq = op.seq
        if op.op == _COMMIT_EOB:
            b.lseq -= 1
            b.pseq = b.lseq
            self._end(b, op, reply)
            return 0
        commit = op.op == _COMMIT
        if op.seq == 1 and not commit:
            self._flow(reply, 0, b.ack_every)
        try:
            seq, duplicate = store()
        except ApiError as err:
            if not b.gap_ok and b.lseq == 1:
                self._drop(op.batch_id)
                raise
            body = {"type": "err", "seq": op.seq, "error": err.to_json()}
            self._send(reply, json.dumps(body, separators=(",", ":")).encode())
            if b.gap_ok and not commit:
                return 0
            b.lseq -= 1
            b.pseq = b.lseq
            self._end(b, op, reply)
            return 0
        if duplicate:
            b.pseq = op.seq
            self._check_flow(b, reply)
            if not commit:
                return 0
            if not b.gap_ok and b.lseq == 1:
                self._drop(op.batch_id)
                self._send(reply, self._pub_ack(seq, op.batch_id, op.seq, b'"duplicate": true,'))
                return 0
            self._end(b, op, reply)
            return 0
        b.sseq = seq
        b.pseq = b.lseq
        if commit:
            self._end(b, op, reply)
        elif b.pseq >= b.fseq + b.ack_every:  # `_check_flow`'s test, without its call
            self._check_flow(b, reply)
        return seq

    def clear(self) -> None:
        """Drop every batch (`allow_batched` turned off, the stream deleted)."""
        self._limits.fast_inflight -= len(self._batches)
        self._batches.clear()
        self.timer.cancel()

    # ------------------------------------------------------------------ internals

    def _enter(self, op: FastOp) -> _Fast:
        """The batch `op` belongs to, begun by its first message within the limits."""
        lim = self._limits
        now_ns = self._now_ns()
        if now_ns - lim.timeout_ns >= self._oldest_ns:  # else none can have expired
            self._expire(now_ns)
            oldest = next(iter(self._batches.values()), None)
            self._oldest_ns = now_ns if oldest is None else oldest.touched_ns
        b = self._batches.get(op.batch_id)
        if b is None:
            if op.seq != 1:
                raise api_error("BATCH_PUBLISH_UNKNOWN_BATCH_ID")
            if len(self._batches) + 1 > lim.fast_inflight_per_stream:
                raise api_error("BATCH_PUBLISH_TOO_MANY_INFLIGHT")
            if lim.fast_inflight + 1 > lim.fast_inflight_total:
                raise api_error("BATCH_PUBLISH_TOO_MANY_INFLIGHT")
            b = self._batches[op.batch_id] = _Fast(now_ns, op.gap_ok, op.flow, 0)
            lim.fast_inflight += 1
            # The only batch gets what its publisher asks; others start slowly.
            b.ack_every = min(_ACKS_SHARED, op.flow) if len(self._batches) == 1 else 1
            if self.timer.at is None:
                self.timer.arm(now_ns + lim.timeout_ns)
        b.touched_ns = now_ns
        if now_ns < self._oldest_ns:  # a clock set back
            self._oldest_ns = now_ns
        self._batches.move_to_end(op.batch_id)
        return b

    def _ping(self, b: _Fast, op: FastOp, reply: bytes) -> None:
        """The publisher sent up to `op.seq`: resend the last flow ack, or report what
        never arrived (and end the batch in gap mode `fail`)."""
        if op.seq > b.lseq:
            self._gap(reply, b.lseq + 1, op.seq + 1)
            if not b.gap_ok:
                self._end(b, op, reply)
                return
            b.lseq = b.pseq = op.seq
            if self._check_flow(b, reply):
                return
        self._flow(reply, b.fseq, b.ack_every)

    def _check_flow(self, b: _Fast, reply: bytes) -> bool:
        """A flow ack when `ack_every` more messages are stored, with `ack_every` moved
        towards this batch's share of 500 (and the publisher's flow); True if sent."""
        if b.pseq < b.fseq + b.ack_every:
            return False
        b.fseq += (b.pseq - b.fseq) // b.ack_every * b.ack_every
        share = min(max(_ACKS_SHARED // len(self._batches), 1), b.max_ack)
        if b.ack_every < share:
            b.ack_every = min(b.ack_every * 2, share)
        elif b.ack_every > share:
            b.ack_every = max(b.ack_every // 2, share)
        self._flow(reply, b.fseq, b.ack_every)
        return True

    def _end(self, b: _Fast, op: FastOp, reply: bytes) -> None:
        """The batch ends: its PubAck names the last stored message and counts the batch
        sequences up to its end, if all of them are stored or skipped."""
        b.ending = True
        if b.lseq == b.pseq:
            self._drop(op.batch_id)
            self._send(reply, self._pub_ack(b.sseq, op.batch_id, b.lseq))

    def _pub_ack(self, seq: int, batch_id: str, count: int, extra: bytes = b"") -> bytes:
        return b'{"stream":%b,"seq":%d,%b"batch":%b,"count":%d}' % (
            self._name_json,
            seq,
            extra,
            json.dumps(batch_id).encode(),
            count,
        )

    def _flow(self, reply: bytes, seq: int, every: int) -> None:
        self._send(reply, b'{"type":"ack","seq":%d,"msgs":%d}' % (seq, every))

    def _gap(self, reply: bytes, expected: int, seq: int) -> None:
        self._send(reply, b'{"type":"gap","last_seq":%d,"seq":%d}' % (expected, seq))

    def _drop(self, key: str) -> None:
        if self._batches.pop(key, None) is not None:
            self._limits.fast_inflight -= 1

    def timed_out(self, key: str) -> None:
        self._drop(key)  # no advisory
