"""A consumer's delivered, unacknowledged messages and its ack floors (wire reference §6.7).

`Ledger` keeps what acks, ack deadlines, redelivery and removals change:

* `pending` maps stream seq -> `Pending` for delivered, unacknowledged messages, in
  ascending stream-seq order (first deliveries always have a higher sequence), so the
  lowest pending message is the first key. A pending entry is either timed (`deadline_ns`
  set, with a matching entry in the lazy `deadlines`, deadlines.py) or queued for
  redelivery (`deadline_ns is None`, key in the ordered set `rdq`).
* The ack floor is state, as in nats-server: it moves only on acks (`ack`), so it stays
  below a message given up on after max_deliver or removed while pending. nats-server's
  consumer keeps a second floor in memory (`mem_floor`), which a purge writes to the
  consumer store (`purge_floors`); it also moves when a message is given up on.
* `delivered_consumer_seq`/`delivered_stream_seq` name the last delivery: the floor goes
  there once nothing is pending. The delivery side (delivery.py) advances them.

No I/O: methods that produce actions append them to the `out` list they are given (or
return them), for the state machine (state.py) to hand to its owner.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import repeat
from typing import Any

from brook.jetstream.consumer.actions import (
    DELETED_WHILE_PENDING,
    MAX_DELIVERIES,
    MSG_TERMINATED,
    Acked,
    Action,
    RemoveMessage,
    ack_metric,
    advisory,
)
from brook.jetstream.consumer.config import AckPolicy, ConsumerSettings, Retention
from brook.jetstream.consumer.deadlines import AckDeadlines


@dataclass(slots=True)
class Pending:
    """A delivered message awaiting its ack. `Delivery.deliver_new` makes first deliveries'
    without calling `__init__` (it sets each field): a field added here is set there too."""

    consumer_seq: int
    deliveries: int
    deadline_ns: int | None  # None while queued for redelivery
    first_delivered_ns: int
    last_delivered_ns: int


def pending_runs(pending: dict[int, Pending]) -> list[list[int]]:
    """`pending` as a snapshot holds it: `[stream_seq, consumer_seq, deliveries,
    first_delivered_ns, last_delivered_ns]` per entry, with a sixth number, the count,
    for a run of entries whose stream and consumer sequences both go up by one and whose
    other fields are the same (ADR 0064). One dispatch's first deliveries share their
    time, so a push consumer's thousands pending are a few runs: the snapshot, encoded
    on the loop up to ten times a second, then costs little more than this walk."""
    runs: list[list[int]] = []
    run: list[int] = []
    next_s = next_c = deliveries = first = last = -1
    for s, p in pending.items():
        c = p.consumer_seq
        if (
            s == next_s
            and c == next_c
            and p.deliveries == deliveries
            and p.first_delivered_ns == first
            and p.last_delivered_ns == last
        ):
            if len(run) == 5:
                run.append(2)
            else:
                run[5] += 1
        else:
            deliveries, first, last = p.deliveries, p.first_delivered_ns, p.last_delivered_ns
            run = [s, c, deliveries, first, last]
            runs.append(run)
        next_s, next_c = s + 1, c + 1
    return runs


class Ledger:
    def __init__(self, settings: ConsumerSettings, delivered_stream_seq: int) -> None:
        self.cfg = settings
        self.delivered_consumer_seq = 0
        self.delivered_stream_seq = delivered_stream_seq
        self.floor_c = 0
        self.floor_s = delivered_stream_seq
        # The in-memory floor where it differs from the reported one (module docstring);
        # None while the two are the same, as they are until a message is given up on.
        self.mem_floor: tuple[int, int] | None = None
        self.pending: dict[int, Pending] = {}
        # The keys of `pending` in ascending order, pruned lazily (`lowest`): the lowest
        # pending seq is needed on every ack and input, and `next(iter(dict))` on a dict
        # used as a FIFO walks over every deleted slot at its front (O(n) per call with
        # thousands pending). Every key of `pending` is in it; first deliveries are
        # strictly ascending, so appends keep it sorted; `restore` rebuilds it.
        self.order: deque[int] = deque()
        self.rdq: dict[int, None] = {}  # ordered set: redelivery order
        # Given up on after max_deliver, never acked -> delivery count. Interest retention
        # keeps these (as nats-server, for inspection), a late ack still releases them
        # (retention.py), and they count as redelivered until then (nats-server's `rdc`).
        self.dead: dict[int, int] = {}
        self.deadlines = AckDeadlines()  # of the timed pending messages
        self.limit_slack = 0  # pending restored beyond a (lowered) max_ack_pending
        self.last_ack_ns = 0
        self._sample_credit = 0  # sample_freq: percent accumulated towards the next metric

    # ------------------------------------------------------------------ counters

    def num_redelivered(self) -> int:
        pending = sum(1 for p in self.pending.values() if p.deliveries > 1)
        return pending + sum(1 for d in self.dead.values() if d > 1)

    def lowest(self) -> int | None:
        """The lowest pending stream seq (the first key of `pending`), or None."""
        order = self.order
        pending = self.pending
        while order:
            seq = order[0]
            if seq in pending:
                return seq
            order.popleft()
        return None

    def check_invariants(self) -> None:
        assert self.floor_s <= self.delivered_stream_seq, (self.floor_s, self.delivered_stream_seq)
        assert self.floor_c <= self.delivered_consumer_seq, (
            self.floor_c,
            self.delivered_consumer_seq,
        )
        self.check_limit()
        assert all(s <= self.delivered_stream_seq for s in self.pending)
        assert all(self.pending[s].deadline_ns is None for s in self.rdq)
        assert self.lowest() == (next(iter(self.pending)) if self.pending else None)
        assert set(self.pending) <= set(self.order)

    def check_limit(self) -> None:
        """New deliveries never push `len(pending)` beyond `max_ack_pending` (checked
        after every input)."""
        if self.pending:
            lowest = self.lowest()
            assert lowest is not None
            assert lowest <= self.delivered_stream_seq
            limit = self.cfg.max_ack_pending
            if limit > 0 and self.cfg.tracks_acks:
                assert len(self.pending) <= limit + self.limit_slack

    # ------------------------------------------------------------------ deadlines

    def advisory(
        self, kind: str, seq: int, deliveries: int, consumer_seq: int | None = None, **extra: Any
    ) -> Action:
        fields: dict[str, Any] = {"stream_seq": seq, "deliveries": deliveries}
        if consumer_seq is not None:
            fields = {"consumer_seq": consumer_seq, **fields}
        return advisory(kind, self.cfg.stream, self.cfg.name, **fields, **extra)

    def arm(self, seq: int, p: Pending, deadline: int) -> None:
        if not self.cfg.redelivers:  # flow_control: pending until a flow-control answer
            p.deadline_ns = None
            return
        p.deadline_ns = deadline
        self.deadlines.add(deadline, seq)

    def queue(self, seq: int, p: Pending) -> None:
        p.deadline_ns = None
        self.rdq[seq] = None

    def exhausted(self, p: Pending) -> bool:
        return 0 < self.cfg.max_deliver <= p.deliveries

    def give_up(self, seq: int, p: Pending) -> Action:
        """max_deliver reached: no longer pending, a dead letter (the floor stays; the
        in-memory one moves)."""
        del self.pending[seq]
        self.rdq.pop(seq, None)
        self.dead[seq] = p.deliveries
        self._move_mem_floor(seq, p)
        return self.advisory(MAX_DELIVERIES, seq, p.deliveries)

    def due(self, now_ns: int) -> list[Action]:
        """Queue for redelivery what is pending past its ack deadline at `now_ns`.
        `Delivery.candidate` gives up on a message past max_deliver when it comes up,
        once something may be delivered (a pull request waits, a push consumer has
        interest), as nats-server's `getNextMsg`. Only with max_deliver 1 does
        nats-server's `checkPending` give up at the deadline (`hasMaxDeliveries`): the
        delivery count it checks there (`deliveryCount`) is the number of redeliveries,
        or 1 before the first."""
        out: list[Action] = []
        max_deliver = self.cfg.max_deliver
        while (due := self.deadlines.pop_due(now_ns)) is not None:
            deadline, seq = due
            p = self.pending.get(seq)
            if p is None or p.deadline_ns != deadline:
                continue
            if 0 < max_deliver <= max(p.deliveries - 1, 1):
                out.append(self.give_up(seq, p))
            else:
                self.queue(seq, p)
        return out

    # ------------------------------------------------------------------ acks

    def resolve(self, seq: int, out: list[Action], now_ns: int | None = None) -> None:
        """Acknowledged (or terminated, `now_ns` None): no longer pending; tell retention;
        sample the ack for the ack metric when `sample_freq` asks for it."""
        p = self.pending.pop(seq)
        cfg = self.cfg
        if now_ns is not None and cfg.sample_percent > 0:
            self._sample_credit += cfg.sample_percent
            if self._sample_credit >= 100:
                self._sample_credit -= 100
                out.append(
                    ack_metric(
                        cfg.stream,
                        cfg.name,
                        consumer_seq=p.consumer_seq,
                        stream_seq=seq,
                        ack_time=max(now_ns - p.last_delivered_ns, 0),
                        deliveries=p.deliveries,
                    )
                )
        self.rdq.pop(seq, None)
        if cfg.retention is Retention.WORKQUEUE:
            out.append(RemoveMessage(seq))
        elif cfg.retention is Retention.INTEREST:
            out.append(Acked(seq))

    def terminate_removed(self, seq: int, p: Pending, now_ns: int, out: list[Action]) -> None:
        """`seq`, pending as `p`, is gone from the stream: acknowledged (the floors move)
        and announced with a `MSG_TERMINATED` advisory, as nats-server's `processTerm`
        with reason "Unacknowledged message was deleted" (`ConsumerState.message_removed`,
        or found gone when due for redelivery)."""
        out += self.ack(seq, p.consumer_seq, now_ns)
        if seq in self.pending:  # ack all, and an ack of a later redelivery passed it
            self.resolve(seq, out)
        out.append(
            self.advisory(
                MSG_TERMINATED, seq, p.deliveries, p.consumer_seq, reason=DELETED_WHILE_PENDING
            )
        )

    def release_dead(self, seq: int, out: list[Action]) -> None:
        """A late ack of a message given up on: retention may drop it now."""
        if self.dead.pop(seq, None) is not None:
            retention = self.cfg.retention
            if retention is Retention.WORKQUEUE:
                out.append(RemoveMessage(seq))
            elif retention is Retention.INTEREST:
                out.append(Acked(seq))

    def ack(self, seq: int, consumer_seq: int, now_ns: int) -> list[Action]:
        """nats-server's `processAckMsg`. Explicit: the floor moves when the acked delivery
        (by its original consumer sequence) sits right on it, then up to below the next
        pending message, or to `delivered` once nothing is pending. All: everything up to
        the acked (consumer, stream) sequences, unless that is at or below the floor."""
        out: list[Action] = []
        if self.cfg.ack_policy is AckPolicy.EXPLICIT:
            self.ack_explicit((seq,), now_ns, out)
        elif self.cfg.acks_cumulative:
            if consumer_seq <= self.floor_c or seq <= self.floor_s:
                return out
            if seq > self.delivered_stream_seq or consumer_seq > self.delivered_consumer_seq:
                return out
            self.floor_c, self.floor_s = consumer_seq, seq
            self.mem_floor = None
            covered = []
            for s in self.pending:
                if s > seq:
                    break
                covered.append(s)
            for s in covered:
                self.resolve(s, out, now_ns)
            for s in [d for d in self.dead if d <= seq]:
                self.release_dead(s, out)
            self.last_ack_ns = now_ns
        return out

    def ack_explicit(self, seqs: Iterable[int], now_ns: int, out: list[Action]) -> None:
        """`ack` of each of `seqs` in turn under `ack_policy: explicit` (a consumer
        sequence is not needed: the floor moves by the pending entries' own)."""
        pending = self.pending
        for seq in seqs:
            p = pending.get(seq)
            if p is None:
                self.release_dead(seq, out)
                continue
            self.resolve(seq, out, now_ns)
            self.last_ack_ns = now_ns
            if self.mem_floor is not None:
                self._move_mem_floor(seq, p)
            c = p.consumer_seq
            if c > self.floor_c and (c == self.floor_c + 1 or not pending):
                self.move_store_floor(seq, p)  # (its test, inline: per ack)

    def ack_explicit_run(self, seqs: Iterable[int], now_ns: int, out: list[Action]) -> None:
        """`ack_explicit(seqs, ...)`, for a read chunk of acks: when the floor sits right
        below the lowest pending message (as it does unless messages were given up on or
        removed while pending), the acks are applied without moving the floor, which is
        then put right below the lowest message still pending (or at `delivered`) if that
        one was acked. One by one, each ack of the lowest message moves the floor to right
        below the next lowest, and no other ack moves it: the same place in the end."""
        pending = self.pending
        lowest = self.lowest()
        if (
            lowest is None
            or pending[lowest].consumer_seq != self.floor_c + 1
            or self.mem_floor is not None
        ):
            self.ack_explicit(seqs, now_ns, out)
            return
        cfg = self.cfg
        before = len(pending)
        if (
            cfg.sample_percent <= 0
            and cfg.retention is Retention.LIMITS
            and not (self.rdq or self.dead)
        ):
            # No metric, no retention action, nothing queued or given up on: an ack that
            # finds its message pending removes it, and any other does nothing.
            deque(map(pending.pop, seqs, repeat(None)), 0)  # each popped, in C: per ack
        else:
            for seq in seqs:
                if seq in pending:
                    self.resolve(seq, out, now_ns)
                else:
                    self.release_dead(seq, out)
        if len(pending) < before:
            self.last_ack_ns = now_ns
        if lowest in pending:
            return
        if not pending:
            self.floor_c = self.delivered_consumer_seq
            self.floor_s = self.delivered_stream_seq
            return
        nxt = self.lowest()
        assert nxt is not None
        self.floor_c, self.floor_s = pending[nxt].consumer_seq - 1, nxt - 1

    # ------------------------------------------------------------------ floors

    def move_store_floor(self, seq: int, p: Pending) -> None:
        """`seq`, pending as `p`, was acknowledged explicitly and left `pending`: move the
        floor as nats-server's consumer store does (`UpdateAcks`, whose floor consumer info
        reports; the in-memory one: `_move_mem_floor`). A delivery at or below the floor's
        consumer sequence (only after a purge put the floor above messages still pending:
        `purge_floors`) leaves it alone; so does one not right on it while others are
        pending (checked here first: the common case, per ack)."""
        c = p.consumer_seq
        floor_c = self.floor_c
        if c <= floor_c or (c != floor_c + 1 and self.pending):
            return
        self.floor_c, self.floor_s = self._floor_after(seq, p, (floor_c, self.floor_s))
        if self.mem_floor == (self.floor_c, self.floor_s):
            self.mem_floor = None

    def _move_mem_floor(self, seq: int, p: Pending) -> None:
        """Move the in-memory floor as nats-server's `moveAckFloor` does: as the store's,
        but also for a message given up on, and with no exception below the floor."""
        floor = self.mem_floor or (self.floor_c, self.floor_s)
        floor = self._floor_after(seq, p, floor)
        self.mem_floor = None if floor == (self.floor_c, self.floor_s) else floor

    def _floor_after(self, seq: int, p: Pending, floor: tuple[int, int]) -> tuple[int, int]:
        """Where `floor` goes once `seq` (pending as `p`) left `pending`: to `delivered`
        with nothing pending; from right on it to right below the next pending message."""
        pending = self.pending
        if not pending:
            return self.delivered_consumer_seq, self.delivered_stream_seq
        if p.consumer_seq != floor[0] + 1:
            return floor
        # The first pending seq above `seq`: the lowest one, unless something below `seq`
        # is still pending (after a purge: `purge_floors`).
        lowest = self.lowest()
        nxt = (
            lowest
            if lowest is None or lowest > seq
            else next((s for s in pending if s > seq), None)
        )
        if nxt is None:
            return p.consumer_seq, seq
        return pending[nxt].consumer_seq - 1, nxt - 1

    # ------------------------------------------------------------------ removals

    def forget(self, gone: set[int]) -> None:
        """Messages left the stream: never redeliver them, nor keep them as dead letters."""
        for s in gone:
            if self.pending.pop(s, None) is not None:
                self.rdq.pop(s, None)
        for s in gone & self.dead.keys():
            del self.dead[s]

    def drop_below(self, first_seq: int) -> bool:
        """`ConsumerState.stream_starts_at`: drop what is pending below `first_seq`, the
        floor moving up to the highest (consumer, stream) sequences dropped, or to
        `delivered` once nothing is pending. Whether anything was dropped."""
        pending = self.pending
        gone = [s for s in pending if s < first_seq]
        if not gone:
            return False
        for s in gone:
            p = pending.pop(s)
            self.rdq.pop(s, None)
            self.floor_c = max(self.floor_c, p.consumer_seq)
            self.floor_s = max(self.floor_s, s)
        if not pending:
            self.floor_c, self.floor_s = self.delivered_consumer_seq, self.delivered_stream_seq
        self.mem_floor = None  # nats-server writes the floor it moved to its store
        return True

    def purge_floors(
        self, start_seq: int, now_ns: int, gone_from_stream: Callable[[int], bool] | None
    ) -> None:
        """Step 2 of `ConsumerState.stream_purged` on nats-server's two ack floors: the
        in-memory one decides and is written to the store, whose floor has meanwhile moved
        on each drop, unless that one is higher by then. `gone_from_stream` (for a
        consumer wider than a filtered purge) also drops what is pending above
        `start_seq` whose message is gone. Queued redeliveries get an ack deadline again."""
        pending = self.pending
        mem_c, mem_s = self.mem_floor or (self.floor_c, self.floor_s)
        if mem_s < start_seq:
            gone = [
                s
                for s in pending
                if s < start_seq or (gone_from_stream is not None and gone_from_stream(s))
            ]
            for s in gone:
                p = pending.pop(s)
                self.rdq.pop(s, None)
                mem_c = max(mem_c, p.consumer_seq)
                if self.cfg.acks_cumulative:
                    if p.consumer_seq > self.floor_c:
                        self.floor_c, self.floor_s = p.consumer_seq, s
                else:
                    self.move_store_floor(s, p)
            if gone:
                self.last_ack_ns = now_ns
            mem_s = start_seq - 1
        if not pending:
            mem_c, mem_s = self.delivered_consumer_seq, self.delivered_stream_seq
        if mem_s >= self.floor_s:
            self.floor_c, self.floor_s = mem_c, mem_s
        self.mem_floor = None if (mem_c, mem_s) == (self.floor_c, self.floor_s) else (mem_c, mem_s)
        for s in self.rdq:
            p = pending[s]
            wait = self.cfg.ack_wait_for(p.deliveries)
            deadline = p.last_delivered_ns + wait
            if deadline <= now_ns:
                deadline = max(deadline + wait, now_ns)
            self.arm(s, p, deadline)
        self.rdq.clear()

    # ------------------------------------------------------------------ persistence

    def reset(self, delivered_stream_seq: int) -> None:
        """Forget everything; the floor and `delivered` sit at (0, `delivered_stream_seq`)."""
        self.pending.clear()
        self.order.clear()
        self.rdq.clear()
        self.deadlines.clear()
        self.dead.clear()
        self.limit_slack = 0
        self.delivered_consumer_seq = self.floor_c = 0
        self.delivered_stream_seq = self.floor_s = delivered_stream_seq
        self.last_ack_ns = 0

    def snapshot(self) -> dict[str, Any]:
        return {
            "delivered": {
                "consumer_seq": self.delivered_consumer_seq,
                "stream_seq": self.delivered_stream_seq,
            },
            "ack_floor": {"consumer_seq": self.floor_c, "stream_seq": self.floor_s},
            "pending": pending_runs(self.pending),
            "dead": sorted([s, d] for s, d in self.dead.items()),
        }

    def restore(self, data: dict[str, Any], now_ns: int) -> None:
        """The ledger part of `ConsumerState.restore`: every pending message gets a fresh
        ack deadline from `now_ns`."""
        self.delivered_consumer_seq = int(data["delivered"]["consumer_seq"])
        self.delivered_stream_seq = int(data["delivered"]["stream_seq"])
        self.pending.clear()
        self.rdq.clear()
        self.deadlines.clear()
        self.dead.clear()
        self.dead.update((int(s), int(d)) for s, d in data.get("dead", []))
        floor = data.get("ack_floor", {})
        self.mem_floor = None  # nats-server starts with the store's
        self.floor_c = int(floor.get("consumer_seq", 0))
        self.floor_s = int(floor.get("stream_seq", self.delivered_stream_seq))
        for s, c, d, first, last, *count in sorted(data.get("pending", [])):
            deadline = now_ns + self.cfg.ack_wait_for(int(d))
            for i in range(int(count[0]) if count else 1):
                p = Pending(int(c) + i, int(d), None, int(first), int(last))
                self.pending[int(s) + i] = p
                self.arm(int(s) + i, p, deadline)
        self.order.clear()
        self.order.extend(self.pending)
        limit = self.cfg.max_ack_pending
        self.limit_slack = max(len(self.pending) - limit, 0) if limit > 0 else 0
