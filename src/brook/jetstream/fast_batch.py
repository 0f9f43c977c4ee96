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

from brook.jetstream.batch import BatchLimits, IdleBatches
from brook.jetstream.errors import ApiError, api_error

# The reply subject's reading (compiled), and what the batch's code needs of it.
from brook.jetstream.fast_reply import COMMIT as _COMMIT
from brook.jetstream.fast_reply import COMMIT_EOB as _COMMIT_EOB
from brook.jetstream.fast_reply import PING as _PING
from brook.jetstream.fast_reply import SUFFIX as SUFFIX
from brook.jetstream.fast_reply import FastOp as FastOp
from brook.jetstream.fast_reply import parse_reply as parse_reply

_ACKS_SHARED = 500  # flow acks at most every 500 messages, shared among batches

Send = Callable[[bytes, bytes], None]  # (reply subject, payload), in order


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
        # none expires before the timeout after it: `begin` skips `_expire` until then.
        self._oldest_ns = 0
        # The batch touched last, which is last in `_batches` already (or dropped since):
        # its next message needs no `move_to_end`.
        self._newest: _Fast | None = None

    def begin(self, op: FastOp, reply: bytes, *, level_refused: bool = False) -> _Fast | None:
        """One fast batch publish, up to its message's store: the batch to hand to
        `stored` (or `refused`) once the caller stored the message through the stream's
        checks, or None when it stores nothing (a ping, a gap, the end marker, a batch
        ending; what it says is sent). Raises the `ApiError` to answer as a plain
        publish's (nothing of the batch stored before it). `level_refused`: the message
        asks for a higher API level (versioning.py), which ends its batch. Three calls
        rather than one taking the store as a callback: no closure per message."""
        # The batch `op` belongs to (`_start` begins one), touched now: inline, as it
        # runs for every message.
        now_ns = self._now_ns()
        if now_ns - self._limits.timeout_ns >= self._oldest_ns:  # else none can have expired
            self._expire(now_ns)
            oldest = next(iter(self._batches.values()), None)
            self._oldest_ns = now_ns if oldest is None else oldest.touched_ns
        b = self._batches.get(op.batch_id)
        if b is None:
            b = self._start(op, now_ns)
        b.touched_ns = now_ns
        if now_ns < self._oldest_ns:  # a clock set back
            self._oldest_ns = now_ns
        if b is not self._newest:
            self._batches.move_to_end(op.batch_id)
            self._newest = b
        if level_refused:
            self._drop(op.batch_id)
            raise api_error("REQUIRED_API_LEVEL")
        if op.op == _PING:
            self._ping(b, op, reply)
            return None
        if b.ending:
            return None
        b.lseq += 1
        if b.lseq != op.seq:
            # Reported backwards too (nats-server 2.15.1; its newer source reports only
            # forward gaps).
            self._gap(reply, b.lseq, op.seq)
            if not (b.gap_ok and op.seq > b.lseq):
                b.lseq -= 1
                self._end(b, op, reply)
                return None
            b.lseq = op.seq
        if op.op == _COMMIT_EOB:
            b.lseq -= 1
            b.pseq = b.lseq
            self._end(b, op, reply)
            return None
        if op.seq == 1 and op.op != _COMMIT:
            self._flow(reply, 0, b.ack_every)
        return b

    def stored(self, b: _Fast, op: FastOp, reply: bytes, seq: int, duplicate: bool) -> int:
        """The message `begin` let through is stored at stream sequence `seq` (or was a
        `duplicate` of `seq`): the replies it is due. Returns the stream sequence stored,
        or 0."""
        commit = op.op == _COMMIT
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

    def refused(self, b: _Fast, op: FastOp, reply: bytes, err: ApiError) -> None:
        """The stream's checks refused the message `begin` let through: an error reply
        (the batch ends in gap mode `fail`), or `err` raised again to answer as a plain
        publish's when it is the first message of a batch in gap mode `fail`."""
        if not b.gap_ok and b.lseq == 1:
            self._drop(op.batch_id)
            raise err
        body = {"type": "err", "seq": op.seq, "error": err.to_json()}
        self._send(reply, json.dumps(body, separators=(",", ":")).encode())
        if b.gap_ok and op.op != _COMMIT:
            return
        b.lseq -= 1
        b.pseq = b.lseq
        self._end(b, op, reply)

    def clear(self) -> None:
        """Drop every batch (`allow_batched` turned off, the stream deleted)."""
        self._limits.fast_inflight -= len(self._batches)
        self._batches.clear()
        self.timer.cancel()

    # ------------------------------------------------------------------ internals

    def _start(self, op: FastOp, now_ns: int) -> _Fast:
        """The batch `op` begins by its first message, within the limits."""
        lim = self._limits
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
