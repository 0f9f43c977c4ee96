"""The bookkeeping half of the consumer state machine: fields, counters, invariants and
the delivery/redelivery internals. `state.ConsumerState` adds the inputs on top; see the
module docstring there for the model."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from brook.jetstream.consumer.acks import ACK_PREFIX
from brook.jetstream.consumer.actions import (
    DELETED_WHILE_PENDING,
    MAX_DELIVERIES,
    MSG_TERMINATED,
    Acked,
    Action,
    Deliver,
    DeliverRun,
    RemoveMessage,
    Status,
    ack_metric,
    advisory,
    headers_only,
)
from brook.jetstream.consumer.config import AckPolicy, ConsumerSettings, Retention
from brook.jetstream.consumer.deadlines import AckDeadlines
from brook.jetstream.consumer.pull import WaitingRequest, message_size
from brook.jetstream.consumer.source import MessageSource
from brook.jetstream.store.base import StoredMessage

AHEAD_MAX = 128  # the most messages `_candidate` reads from the store at once


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
        has_interest: Callable[[str], bool] = lambda reply: True,
    ) -> None:
        self.cfg = settings
        self._src = source
        # Does some subscription still listen on a pull request's reply subject? A request
        # whose client went away is dropped rather than served (`_next_request`).
        self._has_interest = has_interest
        self._lps: deque[int] = deque(sorted(s for s in last_per_subject_seqs if s < start_seq))
        self._next_seq = max(start_seq, 1)
        self.delivered_consumer_seq = 0
        self.delivered_stream_seq = (self._lps[0] if self._lps else self._next_seq) - 1
        # The ack floor is state, as in nats-server: it moves only on acks (see `_ack`), so
        # it stays below a message given up on after max_deliver or removed while pending.
        self._floor_c = 0
        self._floor_s = self.delivered_stream_seq
        # nats-server's consumer keeps a second ack floor in memory, and a purge writes it
        # to the consumer store, whose floor info reports (`ConsumerState.stream_purged`).
        # It moves as the reported one on acks, and also when a message is given up on
        # (`_give_up`); None while the two are the same, as they are until then.
        self._mem_floor: tuple[int, int] | None = None
        self._pending: dict[int, Pending] = {}
        # The keys of `_pending` in ascending order, pruned lazily (`_lowest_pending`): the
        # lowest pending seq is needed on every ack and input, and `next(iter(dict))` on a
        # dict used as a FIFO walks over every deleted slot at its front (O(n) per call
        # with thousands pending). Every key of `_pending` is in it; first deliveries are
        # strictly ascending, so appends keep it sorted; `restore` rebuilds it.
        self._order: deque[int] = deque()
        self._rdq: dict[int, None] = {}  # ordered set: redelivery order
        # Given up on after max_deliver, never acked -> delivery count. Interest retention
        # keeps these (as nats-server, for inspection), a late ack still releases them
        # (retention.py), and they count as redelivered until then (nats-server's `rdc`).
        self._dead: dict[int, int] = {}
        self._deadlines = AckDeadlines()  # of the timed pending messages (deadlines.py)
        self._waiting: deque[WaitingRequest] = deque()
        self._np: int | None = None  # cached num_pending of the source
        self._push_interest = False
        self._push_hb_at: int | None = None
        self._pending_limit_slack = 0  # pending restored beyond a (lowered) max_ack_pending
        self.last_delivered_ns = 0
        self.last_ack_ns = 0
        # Push flow control (§6.6): bytes delivered since the last answered request, the
        # outstanding request (its reply subject and the bytes it covers), the window.
        self._fc_bytes = 0
        self._fc_reply: str | None = None
        self._fc_covers = 0
        self._fc_window = settings.fc_window_start_bytes
        self._fc_serial = 0
        # Pacing: replay_policy original and rate_limit_bps hold deliveries until then.
        self._held_until: int | None = None
        self._replay_prev: tuple[int, int] | None = None  # (stored ts, delivered at)
        self._rl_tokens = float(settings.rate_burst_bytes)
        self._rl_at: int | None = None
        self._sample_credit = 0  # sample_freq: percent accumulated towards the next metric
        # Matching messages from the position on, read in one batch by `_candidate` during
        # one `_dispatch` (the store cannot change meanwhile); emptied when it returns.
        self._ahead: deque[StoredMessage] = deque()
        self._ahead_want = 1  # how many `_candidate` reads at once: what `_dispatch` may send
        # The ack subject's fixed part (see `acks.ack_subject`): deliveries format theirs
        # as bytes, which costs half an f-string and needs no encoding on the way out.
        self._ack_prefix = f"{ACK_PREFIX}{settings.stream}.{settings.name}.".encode()

    # ------------------------------------------------------------------ counters

    @property
    def ack_floor(self) -> tuple[int, int]:
        """(consumer_seq, stream_seq) below which everything is acknowledged."""
        return self._floor_c, self._floor_s

    @property
    def num_ack_pending(self) -> int:
        return len(self._pending)

    @property
    def num_redelivered(self) -> int:
        pending = sum(1 for p in self._pending.values() if p.deliveries > 1)
        return pending + sum(1 for d in self._dead.values() if d > 1)

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

    @property
    def next_stream_seq(self) -> int:
        """The consumer's position: every matching message from here on is still to come."""
        return self._next_seq

    def needs(self, seq: int) -> bool:
        """Does this consumer still hold `seq` (to deliver it, for its ack, or as a dead
        letter)? Filters aside: the caller matches the subject (retention.py)."""
        return (
            seq >= self._next_seq
            or seq in self._pending
            or seq in self._dead
            or (bool(self._lps) and seq in self._lps)
        )

    def holds(self, seq: int) -> bool:
        """A delivery of `seq` is pending here, or was given up on (a dead letter)."""
        return seq in self._pending or seq in self._dead

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
        assert self._lowest_pending() == (next(iter(self._pending)) if self._pending else None)
        assert set(self._pending) <= set(self._order)

    def _lowest_pending(self) -> int | None:
        """The lowest pending stream seq (the first key of `_pending`), or None."""
        order = self._order
        pending = self._pending
        while order:
            seq = order[0]
            if seq in pending:
                return seq
            order.popleft()
        return None

    def _finish(self, out: list[Action]) -> list[Action]:
        if self._pending:
            lowest = self._lowest_pending()
            assert lowest is not None
            assert lowest <= self.delivered_stream_seq
            limit = self.cfg.max_ack_pending
            if limit > 0 and self.cfg.tracks_acks:
                assert len(self._pending) <= limit + self._pending_limit_slack
        return out

    # ------------------------------------------------------------------ internals

    def _advisory(
        self, kind: str, seq: int, deliveries: int, consumer_seq: int | None = None, **extra: Any
    ) -> Action:
        fields: dict[str, Any] = {"stream_seq": seq, "deliveries": deliveries}
        if consumer_seq is not None:
            fields = {"consumer_seq": consumer_seq, **fields}
        return advisory(kind, self.cfg.stream, self.cfg.name, **fields, **extra)

    def _arm(self, seq: int, p: Pending, deadline: int) -> None:
        p.deadline_ns = deadline
        self._deadlines.add(deadline, seq)

    def _exhausted(self, seq: int, p: Pending) -> bool:
        return 0 < self.cfg.max_deliver <= p.deliveries

    def _give_up(self, seq: int, p: Pending) -> Action:
        """max_deliver reached: no longer pending, a dead letter (the floor stays; the
        in-memory one moves)."""
        del self._pending[seq]
        self._rdq.pop(seq, None)
        self._dead[seq] = p.deliveries
        self._move_mem_floor(seq, p)
        return self._advisory(MAX_DELIVERIES, seq, p.deliveries)

    def _due(self, seq: int, p: Pending) -> list[Action]:
        """The ack deadline passed: queue for redelivery. `_candidate` gives up on a
        message past max_deliver when it comes up, once something may be delivered (a
        pull request waits, a push consumer has interest), as nats-server's
        `getNextMsg`. Only with max_deliver 1 does nats-server's `checkPending` give up at
        the deadline (`hasMaxDeliveries`): the delivery count it checks there
        (`deliveryCount`) is the number of redeliveries, or 1 before the first."""
        max_deliver = self.cfg.max_deliver
        if 0 < max_deliver <= max(p.deliveries - 1, 1):
            return [self._give_up(seq, p)]
        self._queue(seq, p)
        return []

    def _queue(self, seq: int, p: Pending) -> None:
        p.deadline_ns = None
        self._rdq[seq] = None

    def _resolve(self, seq: int, out: list[Action], now_ns: int | None = None) -> None:
        """Acknowledged (or terminated, `now_ns` None): no longer pending; tell retention;
        sample the ack for the ack metric when `sample_freq` asks for it."""
        p = self._pending.pop(seq)
        if now_ns is not None and self.cfg.sample_percent > 0:
            self._sample_credit += self.cfg.sample_percent
            if self._sample_credit >= 100:
                self._sample_credit -= 100
                out.append(
                    ack_metric(
                        self.cfg.stream,
                        self.cfg.name,
                        consumer_seq=p.consumer_seq,
                        stream_seq=seq,
                        ack_time=max(now_ns - p.last_delivered_ns, 0),
                        deliveries=p.deliveries,
                    )
                )
        self._rdq.pop(seq, None)
        if self.cfg.retention is Retention.WORKQUEUE:
            out.append(RemoveMessage(seq))
        elif self.cfg.retention is Retention.INTEREST:
            out.append(Acked(seq))

    def _terminate_removed(self, seq: int, p: Pending, now_ns: int, out: list[Action]) -> None:
        """`seq`, pending as `p`, is gone from the stream: acknowledged (the floors move)
        and announced with a `MSG_TERMINATED` advisory, as nats-server's `processTerm`
        with reason "Unacknowledged message was deleted" (`ConsumerState.message_removed`,
        or found gone when due for redelivery)."""
        out += self._ack(seq, p.consumer_seq, now_ns)
        if seq in self._pending:  # ack all, and an ack of a later redelivery passed it
            self._resolve(seq, out)
        out.append(
            self._advisory(
                MSG_TERMINATED, seq, p.deliveries, p.consumer_seq, reason=DELETED_WHILE_PENDING
            )
        )

    def _release_dead(self, seq: int, out: list[Action]) -> None:
        """A late ack of a message given up on: retention may drop it now."""
        if self._dead.pop(seq, None) is not None:
            retention = self.cfg.retention
            if retention is Retention.WORKQUEUE:
                out.append(RemoveMessage(seq))
            elif retention is Retention.INTEREST:
                out.append(Acked(seq))

    def _ack(self, seq: int, consumer_seq: int, now_ns: int) -> list[Action]:
        """nats-server's `processAckMsg`. Explicit: the floor moves when the acked delivery
        (by its original consumer sequence) sits right on it, then up to below the next
        pending message, or to `delivered` once nothing is pending. All: everything up to
        the acked (consumer, stream) sequences, unless that is at or below the floor."""
        out: list[Action] = []
        if self.cfg.ack_policy is AckPolicy.EXPLICIT:
            self._ack_explicit((seq,), now_ns, out)
        elif self.cfg.ack_policy is AckPolicy.ALL:
            if consumer_seq <= self._floor_c or seq <= self._floor_s:
                return out
            if seq > self.delivered_stream_seq or consumer_seq > self.delivered_consumer_seq:
                return out
            self._floor_c, self._floor_s = consumer_seq, seq
            self._mem_floor = None
            covered = []
            for s in self._pending:
                if s > seq:
                    break
                covered.append(s)
            for s in covered:
                self._resolve(s, out, now_ns)
            for s in [d for d in self._dead if d <= seq]:
                self._release_dead(s, out)
            self.last_ack_ns = now_ns
        return out

    def _ack_explicit(self, seqs: Iterable[int], now_ns: int, out: list[Action]) -> None:
        """`_ack` of each of `seqs` in turn under `ack_policy: explicit` (a consumer
        sequence is not needed: the floor moves by the pending entries' own)."""
        pending = self._pending
        for seq in seqs:
            p = pending.get(seq)
            if p is None:
                self._release_dead(seq, out)
                continue
            self._resolve(seq, out, now_ns)
            self.last_ack_ns = now_ns
            if self._mem_floor is not None:
                self._move_mem_floor(seq, p)
            c = p.consumer_seq
            if c > self._floor_c and (c == self._floor_c + 1 or not pending):
                self._move_store_floor(seq, p)  # (its test, inline: per ack)

    def _move_store_floor(self, seq: int, p: Pending) -> None:
        """`seq`, pending as `p`, was acknowledged explicitly and left `_pending`: move the
        floor as nats-server's consumer store does (`UpdateAcks`, whose floor consumer info
        reports; the in-memory one: `_move_mem_floor`). A delivery at or below the floor's
        consumer sequence (only after a purge put the floor above messages still pending:
        `stream_purged`) leaves it alone; so does one not right on it while others are
        pending (checked here first: the common case, per ack)."""
        c = p.consumer_seq
        floor_c = self._floor_c
        if c <= floor_c or (c != floor_c + 1 and self._pending):
            return
        self._floor_c, self._floor_s = self._floor_after(seq, p, (floor_c, self._floor_s))
        if self._mem_floor == (self._floor_c, self._floor_s):
            self._mem_floor = None

    def _move_mem_floor(self, seq: int, p: Pending) -> None:
        """Move the in-memory floor as nats-server's `moveAckFloor` does: as the store's,
        but also for a message given up on, and with no exception below the floor."""
        floor = self._mem_floor or (self._floor_c, self._floor_s)
        floor = self._floor_after(seq, p, floor)
        self._mem_floor = None if floor == (self._floor_c, self._floor_s) else floor

    def _floor_after(self, seq: int, p: Pending, floor: tuple[int, int]) -> tuple[int, int]:
        """Where `floor` goes once `seq` (pending as `p`) left `_pending`: to `delivered`
        with nothing pending; from right on it to right below the next pending message."""
        pending = self._pending
        if not pending:
            return self.delivered_consumer_seq, self.delivered_stream_seq
        if p.consumer_seq != floor[0] + 1:
            return floor
        # The first pending seq above `seq`: the lowest one, unless something below `seq`
        # is still pending (after a purge: `stream_purged`).
        lowest = self._lowest_pending()
        nxt = (
            lowest
            if lowest is None or lowest > seq
            else next((s for s in pending if s > seq), None)
        )
        if nxt is None:
            return p.consumer_seq, seq
        return pending[nxt].consumer_seq - 1, nxt - 1

    def _ack_explicit_run(self, seqs: Iterable[int], now_ns: int, out: list[Action]) -> None:
        """`_ack_explicit(seqs, ...)`, for a read chunk of acks: when the floor sits right
        below the lowest pending message (as it does unless messages were given up on or
        removed while pending), the acks are applied without moving the floor, which is
        then put right below the lowest message still pending (or at `delivered`) if that
        one was acked. One by one, each ack of the lowest message moves the floor to right
        below the next lowest, and no other ack moves it: the same place in the end."""
        pending = self._pending
        lowest = self._lowest_pending()
        if (
            lowest is None
            or pending[lowest].consumer_seq != self._floor_c + 1
            or self._mem_floor is not None
        ):
            self._ack_explicit(seqs, now_ns, out)
            return
        cfg = self.cfg
        before = len(pending)
        if (
            cfg.sample_percent <= 0
            and cfg.retention is Retention.LIMITS
            and not (self._rdq or self._dead)
        ):
            # No metric, no retention action, nothing queued or given up on: an ack that
            # finds its message pending removes it, and any other does nothing.
            pop = pending.pop
            for seq in seqs:
                pop(seq, None)
        else:
            for seq in seqs:
                if seq in pending:
                    self._resolve(seq, out, now_ns)
                else:
                    self._release_dead(seq, out)
        if len(pending) < before:
            self.last_ack_ns = now_ns
        if lowest in pending:
            return
        if not pending:
            self._floor_c = self.delivered_consumer_seq
            self._floor_s = self.delivered_stream_seq
            return
        nxt = self._lowest_pending()
        assert nxt is not None
        self._floor_c, self._floor_s = pending[nxt].consumer_seq - 1, nxt - 1

    def _candidate(
        self, now_ns: int, out: list[Action]
    ) -> tuple[StoredMessage, Pending | None] | None:
        """The next message to send: redeliveries first (giving up on those past
        max_deliver, with the advisory in `out`), then (below max_ack_pending) new ones."""
        while self._rdq:
            seq = next(iter(self._rdq))
            p = self._pending[seq]
            if self._exhausted(seq, p):  # NAKed at its last delivery
                out.append(self._give_up(seq, p))
                continue
            msg = self._src.load(seq)
            if msg is not None:
                return msg, p
            self._terminate_removed(seq, p, now_ns, out)  # a removal nobody reported
        cfg = self.cfg
        limit = cfg.max_ack_pending
        if limit > 0 and len(self._pending) >= limit and cfg.ack_policy is not AckPolicy.NONE:
            return None
        while self._lps:
            msg = self._src.load(self._lps[0])
            if msg is not None:
                return msg, None
            self._lps.popleft()
        ahead = self._ahead
        if not ahead:
            ahead.extend(self._src.next_batch(self._next_seq - 1, self._ahead_want))
            if not ahead:
                self._passed_end()
                return None
        return ahead[0], None

    def _passed_end(self) -> None:
        """The search for the next matching message found none: as nats-server's, the
        position moves past every message the search passed over (to the stream's end),
        so that a filter changed later starts there. Nothing it passed matched: the
        pending count stays, and `delivered` still names the last delivery."""
        end = self._src.searched_to(self._next_seq - 1) + 1
        if end > self._next_seq:
            self._next_seq = end

    def _deliver(
        self,
        msg: StoredMessage,
        p: Pending | None,
        reply: str,
        ack: bytes,
        pending_after: int,
        now_ns: int,
        size: int,
        out: list[Action],
    ) -> None:
        """Record the delivery of `msg` (as sent: `headers_only` already applied) whose
        wire size is `size`, and append the `Deliver` plus any retention action to `out`.
        `ack` and `pending_after` come from `_ack_subject_for`."""
        # Runs once per delivered message: locals instead of repeated attribute lookups.
        cfg = self.cfg
        cseq = self.delivered_consumer_seq = self.delivered_consumer_seq + 1
        seq = msg.seq
        self.last_delivered_ns = now_ns
        retained: Action | None = None  # a retention action following the Deliver
        if p is not None:  # a redelivery
            del self._rdq[seq]
            p.deliveries += 1  # p.consumer_seq stays the first delivery's (nats-server)
            p.last_delivered_ns = now_ns
            self._arm(seq, p, now_ns + cfg.ack_wait_for(p.deliveries))
            count = p.deliveries
        else:
            lps = self._lps
            if lps and lps[0] == seq:
                lps.popleft()
            else:
                ahead = self._ahead
                if ahead and ahead[0].seq == seq:
                    ahead.popleft()
                self._next_seq = seq + 1
                np = self._np
                if np is not None:
                    self._np = np - 1 if np > 0 else 0
            if seq > self.delivered_stream_seq:
                self.delivered_stream_seq = seq
            count = 1
            self._replay_prev = (msg.ts_ns, now_ns)
            if cfg.ack_policy is not AckPolicy.NONE:  # cfg.tracks_acks
                order = self._order
                assert not order or order[-1] < seq  # `_order` stays sorted
                deadline = now_ns + cfg.ack_wait_for(1)
                p = self._pending[seq] = Pending(cseq, 1, deadline, now_ns, now_ns)
                order.append(seq)
                self._arm(seq, p, deadline)
            else:  # ack none: delivered is acknowledged
                self._floor_c, self._floor_s = cseq, self.delivered_stream_seq
                if cfg.retention is Retention.WORKQUEUE:
                    retained = RemoveMessage(seq)
                elif cfg.retention is Retention.INTEREST:
                    retained = Acked(seq)
        if cfg.rate_limit_bps > 0:
            self._rl_tokens -= size
        out.append(Deliver(msg, reply, ack, cseq, seq, count, pending_after, msg.ts_ns))
        if retained is not None:
            out.append(retained)

    # ------------------------------------------------------------------ pacing

    def paused(self, now_ns: int) -> bool:
        until = self.cfg.paused_until_ns
        return until is not None and now_ns < until

    def _hold(self, msg: StoredMessage, p: Pending | None, size: int, now_ns: int) -> int | None:
        """The time `msg` may go when pacing holds it back, else None. Replay `original`
        spaces first deliveries as their stored timestamps were spaced; `rate_limit_bps`
        is a token bucket of `rate_burst_bytes` refilled at bps/8 bytes per second."""
        at = now_ns
        if self.cfg.replay_original and p is None and self._replay_prev is not None:
            prev_ts, prev_at = self._replay_prev
            at = max(at, prev_at + max(msg.ts_ns - prev_ts, 0))
        bps = self.cfg.rate_limit_bps
        if bps > 0:
            burst = self.cfg.rate_burst_bytes
            if self._rl_at is not None:
                gained = (now_ns - self._rl_at) * bps / 8e9
                self._rl_tokens = min(self._rl_tokens + gained, float(burst))
            self._rl_at = now_ns
            need = min(size, burst)
            if self._rl_tokens < need:
                at = max(at, now_ns + int((need - self._rl_tokens) * 8e9 / bps) + 1)
        return at if at > now_ns else None

    def _fc_blocked(self) -> bool:
        return self.cfg.flow_control and self._fc_bytes > self._fc_window

    def _fc_account(self, size: int, out: list[Action]) -> None:
        """Count a push delivery against the flow-control window; ask the client for a
        response once half of it is used (nats-server's `needFlowControl`)."""
        self._fc_bytes += size
        if self._fc_reply is None:
            if self._fc_bytes > self._fc_window // 2:
                self._fc_serial += 1
                self._fc_reply = f"$JS.FC.{self.cfg.stream}.{self.cfg.name}.{self._fc_serial}"
                self._fc_covers = self._fc_bytes
                assert self.cfg.deliver_subject is not None
                out.append(
                    Status(
                        self.cfg.deliver_subject,
                        100,
                        "FlowControl Request",
                        respond_to=self._fc_reply,
                    )
                )
        elif self._fc_bytes - self._fc_covers >= self._fc_window:
            self._fc_covers = self._fc_bytes

    def _fc_reset(self) -> None:
        self._fc_bytes = self._fc_covers = 0
        self._fc_reply = None

    def _ack_subject_for(self, msg: StoredMessage, p: Pending | None) -> tuple[bytes, int]:
        """The ack subject of the next delivery of `msg` (`acks.ack_subject`, with the
        prefix made once), and the consumer's num_pending after it."""
        if p is None:
            pending_after = max(self.num_pending() - 1, 0)
            deliveries = 1
        else:
            pending_after = self.num_pending()
            deliveries = p.deliveries + 1
        cseq = self.delivered_consumer_seq + 1
        ack = b"%b%d.%d.%d.%d.%d" % (
            self._ack_prefix,
            deliveries,
            msg.seq,
            cseq,
            msg.ts_ns,
            pending_after,
        )
        return ack, pending_after

    def _dispatch(self, now_ns: int) -> list[Action]:
        out: list[Action] = []
        self._held_until = None
        if self.paused(now_ns):
            self._held_until = self.cfg.paused_until_ns
            return self._expire_no_wait(out)
        try:
            return self._dispatch_unpaused(now_ns, out)
        finally:
            self._ahead.clear()

    def _next_request(self, now_ns: int, out: list[Action]) -> WaitingRequest | None:
        """The pull request to serve next, as nats-server's `nextWaiting` picks it before
        every delivery: one whose expiry has come ends with `408 Request Timeout` (even if
        the timer that would have said so has not fired yet), one whose reply subject
        nobody listens to any more (the client gave up on it) is dropped unanswered."""
        waiting = self._waiting
        while waiting:
            w = waiting[0]
            if w.expires_at_ns is not None and now_ns >= w.expires_at_ns:
                waiting.popleft()
                out.append(w.pending_status(408, "Request Timeout"))
            elif not self._has_interest(w.reply):
                waiting.popleft()
            else:
                return w
        return None

    def _read_ahead(self) -> int:
        """How many messages `_dispatch` may send now: what `_candidate` reads at once."""
        cfg = self.cfg
        room = AHEAD_MAX
        limit = cfg.max_ack_pending
        if limit > 0 and cfg.ack_policy is not AckPolicy.NONE:
            room = min(room, limit - len(self._pending))
        if not cfg.is_push:
            room = min(room, sum(w.batch_left for w in self._waiting))
        return max(room, 1)

    def _dispatch_unpaused(self, now_ns: int, out: list[Action]) -> list[Action]:
        self._ahead_want = self._read_ahead()
        cfg = self.cfg
        # `_hold` has nothing to hold back (and changes nothing) without pacing.
        paced = cfg.replay_original or cfg.rate_limit_bps > 0
        if (
            not paced
            and not self._rdq
            and not self._lps
            and cfg.ack_policy is not AckPolicy.NONE
            and not cfg.headers_only
            and not cfg.flow_control
            and (self._push_interest if cfg.is_push else self._waiting)
            and all(w.max_bytes <= 0 for w in self._waiting)
        ):
            self._deliver_new(now_ns, out)
        if cfg.is_push:
            target = cfg.deliver_subject
            assert target is not None
            while (
                self._push_interest
                and not self._fc_blocked()
                and (c := self._candidate(now_ns, out)) is not None
            ):
                msg, p = c
                ack, pending_after = self._ack_subject_for(msg, p)
                if cfg.headers_only:
                    msg = headers_only(msg)
                size = message_size(msg.subject, ack, msg.header, msg.data)
                if paced and (at := self._hold(msg, p, size, now_ns)) is not None:
                    self._held_until = at
                    break
                self._deliver(msg, p, target, ack, pending_after, now_ns, size, out)
                if cfg.flow_control:
                    self._fc_account(size, out)
                if self._push_hb_at is not None:
                    self._push_hb_at = now_ns + cfg.idle_heartbeat_ns
            return out
        waiting = self._waiting
        while (w := self._next_request(now_ns, out)) is not None and (
            c := self._candidate(now_ns, out)
        ) is not None:
            msg, p = c
            ack, pending_after = self._ack_subject_for(msg, p)
            if cfg.headers_only:
                msg = headers_only(msg)
            size = message_size(msg.subject, ack, msg.header, msg.data)
            if w.max_bytes > 0 and size > w.bytes_left:
                waiting.popleft()
                out.append(w.pending_status(409, "Message Size Exceeds MaxBytes"))
                continue
            if paced and (at := self._hold(msg, p, size, now_ns)) is not None:
                self._held_until = at
                break
            self._deliver(msg, p, w.reply, ack, pending_after, now_ns, size, out)
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
        return self._expire_no_wait(out)

    def _deliver_new(self, now_ns: int, out: list[Action]) -> None:
        """First deliveries, as many as may go now, in one loop: what the general loop
        of `_dispatch_unpaused` does through `_candidate`, `_ack_subject_for` and
        `_deliver`, for the common case it checked (nothing to redeliver, no last-per-
        subject queue, acks tracked; no pacing, flow control, headers_only or max_bytes,
        which need each message's size). Same state and actions; the general loop then
        finds nothing more to send, or takes over where this stops."""
        cfg = self.cfg
        limit = cfg.max_ack_pending
        pending = self._pending
        waiting = self._waiting
        target = cfg.deliver_subject
        if target is None and self._next_request(now_ns, out) is None:
            return
        room = AHEAD_MAX * 1024 if limit <= 0 else limit - len(pending)
        if target is None:
            room = min(room, sum(w.batch_left for w in waiting))
        if room <= 0:
            return
        deadline = now_ns + cfg.ack_wait_for(1)
        np = self.num_pending()  # no last-per-subject queue: `_np`, now cached
        prefix = self._ack_prefix + b"1."
        cseq = self.delivered_consumer_seq
        order_append = self._order.append
        # Every deadline of this call is the same, for sequences from `_next_seq` up.
        timer_append = self._deadlines.adder(deadline, self._next_seq)
        out_append = out.append
        # One reply for all (push, or a single waiting pull request): one `DeliverRun`.
        run_to = target if target is not None else waiting[0].reply if len(waiting) == 1 else None
        run = DeliverRun(run_to or "", [], [], cseq + 1, np)
        run_acks = run.acks.append
        msg: StoredMessage | None = None  # the last one delivered
        # Round robin: each request is checked (`_next_request`) when its first turn
        # comes; time and interest stand still during this call, and the queue keeps its
        # order, so after `unchecked` turns every request left has been checked. (The one
        # request of a run was checked above.)
        unchecked = len(waiting) if run_to is None else 0
        while room > 0:
            batch = self._src.next_batch(self._next_seq - 1, min(room, AHEAD_MAX))
            if not batch:
                self._passed_end()
                break
            room -= len(batch)
            for candidate in batch:
                if unchecked > 0:
                    before = len(waiting)
                    if self._next_request(now_ns, out) is None:
                        room = 0
                        break
                    unchecked -= before - len(waiting) + 1  # those dropped, and the head
                msg = candidate
                seq = msg.seq
                cseq += 1
                if np > 0:
                    np -= 1
                ack = b"%b%d.%d.%d.%d" % (prefix, seq, cseq, msg.ts_ns, np)
                pending[seq] = Pending(cseq, 1, deadline, now_ns, now_ns)
                order_append(seq)
                timer_append((deadline, seq))
                if run_to is not None:
                    run_acks(ack)
                    continue
                w = waiting.popleft()
                out_append(Deliver(msg, w.reply, ack, cseq, seq, 1, np, msg.ts_ns))
                w.batch_left -= 1
                w.delivered += 1
                if w.next_heartbeat_ns is not None:
                    w.next_heartbeat_ns = now_ns + w.heartbeat_ns
                if w.batch_left > 0:
                    waiting.append(w)  # round robin across requests, as nats-server does
            if run_to is not None:
                run.msgs += batch
            if msg is not None:
                self._next_seq = msg.seq + 1
        if msg is None:
            return
        if run_to is not None:
            out_append(run)
            if target is None:  # the one request: what each delivery did to it, at once
                w = waiting[0]
                n = len(run.msgs)
                w.batch_left -= n
                w.delivered += n
                if w.next_heartbeat_ns is not None:
                    w.next_heartbeat_ns = now_ns + w.heartbeat_ns
                if w.batch_left <= 0:
                    waiting.popleft()
        self.delivered_consumer_seq = cseq
        self._np = np
        if msg.seq > self.delivered_stream_seq:
            self.delivered_stream_seq = msg.seq
        self.last_delivered_ns = now_ns
        self._replay_prev = (msg.ts_ns, now_ns)
        if target is not None and self._push_hb_at is not None:
            self._push_hb_at = now_ns + cfg.idle_heartbeat_ns

    def _expire_no_wait(self, out: list[Action]) -> list[Action]:
        """`no_wait` requests end as soon as nothing more can be delivered to them now."""
        waiting = self._waiting
        for w in [w for w in waiting if w.no_wait]:
            if w.delivered > 0 or w.expires_at_ns is None:
                waiting.remove(w)
                out.append(Status(w.reply, 404, "No Messages"))
        return out
