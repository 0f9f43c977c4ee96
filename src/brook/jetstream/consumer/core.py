"""The bookkeeping half of the consumer state machine: fields, counters, invariants and
the delivery/redelivery internals. `state.ConsumerState` adds the inputs on top; see the
module docstring there for the model."""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from brook.jetstream.consumer.acks import ack_subject
from brook.jetstream.consumer.actions import (
    MAX_DELIVERIES,
    Acked,
    Action,
    Deliver,
    RemoveMessage,
    Status,
    advisory,
)
from brook.jetstream.consumer.config import AckPolicy, ConsumerSettings, Retention
from brook.jetstream.consumer.pull import WaitingRequest, message_size
from brook.jetstream.consumer.source import MessageSource
from brook.jetstream.store.base import StoredMessage


@dataclass(slots=True)
class Pending:
    consumer_seq: int
    deliveries: int
    deadline_ns: int | None  # None while queued for redelivery
    first_delivered_ns: int
    last_delivered_ns: int


class ConsumerCore:
    def __init__(
        self,
        settings: ConsumerSettings,
        source: MessageSource,
        *,
        start_seq: int = 1,
        last_per_subject_seqs: Sequence[int] = (),
    ) -> None:
        self.cfg = settings
        self._src = source
        self._lps: deque[int] = deque(sorted(s for s in last_per_subject_seqs if s < start_seq))
        self._next_seq = max(start_seq, 1)
        self.delivered_consumer_seq = 0
        self.delivered_stream_seq = (self._lps[0] if self._lps else self._next_seq) - 1
        self._pending: dict[int, Pending] = {}
        self._rdq: dict[int, None] = {}  # ordered set: redelivery order
        self._timers: list[tuple[int, int]] = []  # (deadline_ns, stream_seq), lazy
        self._waiting: deque[WaitingRequest] = deque()
        self._np: int | None = None  # cached num_pending of the source
        self._push_interest = False
        self._push_hb_at: int | None = None
        self._pending_limit_slack = 0  # pending restored beyond a (lowered) max_ack_pending
        self.last_delivered_ns = 0
        self.last_ack_ns = 0

    # ------------------------------------------------------------------ counters

    @property
    def ack_floor(self) -> tuple[int, int]:
        """(consumer_seq, stream_seq) of the highest contiguous acknowledged point."""
        if not self._pending:
            return self.delivered_consumer_seq, self.delivered_stream_seq
        lowest = next(iter(self._pending))
        cseq = min(p.consumer_seq for p in self._pending.values())
        return cseq - 1, lowest - 1

    @property
    def num_ack_pending(self) -> int:
        return len(self._pending)

    @property
    def num_redelivered(self) -> int:
        return sum(1 for p in self._pending.values() if p.deliveries > 1)

    @property
    def push_interest(self) -> bool:
        """A push consumer's deliver subject has a subscriber (`set_push_interest`)."""
        return self._push_interest

    @property
    def num_waiting(self) -> int:
        return len(self._waiting)

    def num_pending(self) -> int:
        """Matching messages after the consumer position not yet delivered (redeliveries
        not counted)."""
        if self._np is None:
            self._np = self._src.num_pending(self._next_seq)
        return self._np + len(self._lps)

    def pending_seqs(self) -> list[int]:
        return list(self._pending)

    def delivery_count(self, stream_seq: int) -> int:
        p = self._pending.get(stream_seq)
        return p.deliveries if p else 0

    def info(self) -> dict[str, Any]:
        floor_c, floor_s = self.ack_floor
        return {
            "delivered": {
                "consumer_seq": self.delivered_consumer_seq,
                "stream_seq": self.delivered_stream_seq,
            },
            "ack_floor": {"consumer_seq": floor_c, "stream_seq": floor_s},
            "num_ack_pending": self.num_ack_pending,
            "num_redelivered": self.num_redelivered,
            "num_waiting": self.num_waiting,
            "num_pending": self.num_pending(),
        }

    # ------------------------------------------------------------------ invariants

    def check_invariants(self) -> None:
        floor_c, floor_s = self.ack_floor
        assert floor_s <= self.delivered_stream_seq, (floor_s, self.delivered_stream_seq)
        assert floor_c <= self.delivered_consumer_seq, (floor_c, self.delivered_consumer_seq)
        limit = self.cfg.max_ack_pending
        if limit > 0 and self.cfg.tracks_acks:
            assert len(self._pending) <= limit + self._pending_limit_slack
        assert all(s <= self.delivered_stream_seq for s in self._pending)
        assert all(self._pending[s].deadline_ns is None for s in self._rdq)

    def _finish(self, out: list[Action]) -> list[Action]:
        if self._pending:
            assert next(iter(self._pending)) <= self.delivered_stream_seq
        limit = self.cfg.max_ack_pending
        if limit > 0 and self.cfg.tracks_acks:
            assert len(self._pending) <= limit + self._pending_limit_slack
        return out

    # ------------------------------------------------------------------ internals

    def _advisory(self, kind: str, seq: int, p: Pending, **extra: Any) -> Action:
        fields: dict[str, Any] = {"stream_seq": seq, "deliveries": p.deliveries}
        if kind != MAX_DELIVERIES:
            fields = {"consumer_seq": p.consumer_seq, **fields}
        return advisory(kind, self.cfg.stream, self.cfg.name, **fields, **extra)

    def _arm(self, seq: int, p: Pending, deadline: int) -> None:
        p.deadline_ns = deadline
        heapq.heappush(self._timers, (deadline, seq))

    def _due(self, seq: int, p: Pending) -> list[Action]:
        """The message's deadline passed (or it was NAKed): queue it, or dead-letter it."""
        if 0 < self.cfg.max_deliver <= p.deliveries:
            self._pending.pop(seq)
            self._rdq.pop(seq, None)
            return [self._advisory(MAX_DELIVERIES, seq, p)]
        p.deadline_ns = None
        self._rdq[seq] = None
        return []

    def _resolve(self, seq: int, out: list[Action]) -> None:
        """Acknowledged (or terminated): no longer pending; tell retention."""
        del self._pending[seq]
        self._rdq.pop(seq, None)
        if self.cfg.retention is Retention.WORKQUEUE:
            out.append(RemoveMessage(seq))
        elif self.cfg.retention is Retention.INTEREST:
            out.append(Acked(seq))

    def _ack(self, seq: int, now_ns: int) -> list[Action]:
        out: list[Action] = []
        if self.cfg.ack_policy is AckPolicy.EXPLICIT:
            if seq in self._pending:
                self._resolve(seq, out)
                self.last_ack_ns = now_ns
        elif self.cfg.ack_policy is AckPolicy.ALL and seq <= self.delivered_stream_seq:
            covered = []
            for s in self._pending:
                if s > seq:
                    break
                covered.append(s)
            for s in covered:
                self._resolve(s, out)
            if covered:
                self.last_ack_ns = now_ns
        return out

    def _candidate(self, now_ns: int) -> tuple[StoredMessage, Pending | None] | None:
        """The next message to send: redeliveries first, then (below max_ack_pending) new."""
        while self._rdq:
            seq = next(iter(self._rdq))
            msg = self._src.load(seq)
            if msg is not None:
                return msg, self._pending[seq]
            del self._rdq[seq]
            del self._pending[seq]
        limit = self.cfg.max_ack_pending
        if self.cfg.tracks_acks and limit > 0 and len(self._pending) >= limit:
            return None
        while self._lps:
            msg = self._src.load(self._lps[0])
            if msg is not None:
                return msg, None
            self._lps.popleft()
        found = self._src.next_matching(self._next_seq - 1)
        return (found, None) if found is not None else None

    def _deliver(
        self, msg: StoredMessage, p: Pending | None, reply: str, ack: str, now_ns: int
    ) -> list[Action]:
        out: list[Action] = []
        self.delivered_consumer_seq += 1
        cseq = self.delivered_consumer_seq
        seq = msg.seq
        self.last_delivered_ns = now_ns
        if p is not None:  # a redelivery
            del self._rdq[seq]
            p.deliveries += 1
            p.consumer_seq = cseq
            p.last_delivered_ns = now_ns
            self._arm(seq, p, now_ns + self.cfg.ack_wait_for(p.deliveries))
            count = p.deliveries
        else:
            if self._lps and self._lps[0] == seq:
                self._lps.popleft()
            else:
                self._next_seq = seq + 1
                if self._np is not None:
                    self._np = max(self._np - 1, 0)
            self.delivered_stream_seq = max(self.delivered_stream_seq, seq)
            count = 1
            if self.cfg.tracks_acks:
                assert not self._pending or next(reversed(self._pending)) < seq
                q = Pending(cseq, 1, None, now_ns, now_ns)
                self._pending[seq] = q
                self._arm(seq, q, now_ns + self.cfg.ack_wait_for(1))
            elif self.cfg.retention is Retention.WORKQUEUE:
                out.append(RemoveMessage(seq))
            elif self.cfg.retention is Retention.INTEREST:
                out.append(Acked(seq))
        out.insert(0, Deliver(msg, reply, ack, cseq, seq, count, self.num_pending(), msg.ts_ns))
        return out

    def _ack_subject_for(self, msg: StoredMessage, p: Pending | None) -> str:
        pending_after = self.num_pending() - (0 if p is not None else 1)
        return ack_subject(
            self.cfg.stream,
            self.cfg.name,
            p.deliveries + 1 if p is not None else 1,
            msg.seq,
            self.delivered_consumer_seq + 1,
            msg.ts_ns,
            max(pending_after, 0),
        )

    def _dispatch(self, now_ns: int) -> list[Action]:
        out: list[Action] = []
        if self.cfg.is_push:
            target = self.cfg.deliver_subject
            assert target is not None
            while self._push_interest and (c := self._candidate(now_ns)) is not None:
                msg, p = c
                out += self._deliver(msg, p, target, self._ack_subject_for(msg, p), now_ns)
                if self._push_hb_at is not None:
                    self._push_hb_at = now_ns + self.cfg.idle_heartbeat_ns
            return out
        waiting = self._waiting
        while waiting and (c := self._candidate(now_ns)) is not None:
            msg, p = c
            w = waiting[0]
            ack = self._ack_subject_for(msg, p)
            size = message_size(msg.subject, ack, msg.header, msg.data)
            if w.max_bytes > 0 and size > w.bytes_left:
                waiting.popleft()
                out.append(w.pending_status(409, "Message Size Exceeds MaxBytes"))
                continue
            out += self._deliver(msg, p, w.reply, ack, now_ns)
            w.batch_left -= 1
            w.delivered += 1
            if w.max_bytes > 0:
                w.bytes_left -= size
            if w.next_heartbeat_ns is not None:
                w.next_heartbeat_ns = now_ns + w.heartbeat_ns
            waiting.popleft()
            if w.batch_left > 0:
                waiting.append(w)  # round robin across requests, as nats-server does
            elif w.max_bytes > 0 and w.bytes_left > 0:
                out.append(w.pending_status(409, "Batch Completed"))
        for w in [w for w in waiting if w.no_wait]:
            if w.delivered > 0 or w.expires_at_ns is None:
                waiting.remove(w)
                out.append(Status(w.reply, 404, "No Messages"))
        return out
