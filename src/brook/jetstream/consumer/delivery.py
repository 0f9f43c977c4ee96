"""What a consumer delivers next, and to whom: its position in the stream, the waiting
pull requests, and the dispatch loops.

`dispatch` serves, in order, redeliveries, the `last_per_subject` start sequences and then
new messages (`candidate`), to a push consumer's deliver subject while it has a subscriber
or to the waiting pull requests round robin (or as a priority policy picks them:
priority.py), held back by pacing (pacing.py), flow control (flow.py) and max_ack_pending.
`deliver_new` makes the common case's first deliveries in one loop (never for a priority
policy); it must leave the same state and actions as the general loop would
(tests/unit/consumer/test_deliver_new.py runs the two side by side).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence

from brook.jetstream.consumer.ack_reply import ack_reply
from brook.jetstream.consumer.acks import ACK_PREFIX
from brook.jetstream.consumer.actions import (
    Acked,
    Action,
    Deliver,
    DeliverRun,
    RemoveMessage,
    Status,
    headers_only,
)
from brook.jetstream.consumer.config import (
    AckPolicy,
    ConsumerSettings,
    PriorityPolicy,
    Retention,
)
from brook.jetstream.consumer.flow import PushFlow
from brook.jetstream.consumer.pacing import Pacer
from brook.jetstream.consumer.pending import Ledger, Pending
from brook.jetstream.consumer.priority import PriorityGroups
from brook.jetstream.consumer.pull import WaitingRequest, message_size
from brook.jetstream.consumer.source import MessageSource
from brook.jetstream.store.base import RecordSpan, StoredMessage

AHEAD_MAX = 128  # the most messages `candidate` reads from the store at once


def _ack_digits(seq: int, cseq: int, ts: int, np: int) -> tuple[int, int, int, int, int, int]:
    """How many digits the four numbers of an ack subject have in all (its stream and
    consumer sequences, timestamp and pending count), and the bounds within which that
    stays: the sequences below their next power of ten, the pending count not below its
    own, the timestamp within its own two (`deliver_new`, which counts a delivery's size
    against the flow-control window without formatting its ack subject)."""
    ds, dc, dt, dn = len(str(seq)), len(str(cseq)), len(str(ts)), len(str(np))
    ts_lo, ts_hi = (10 ** (dt - 1), 10**dt) if ts > 0 else (1, 0)  # <= 0: each time
    return ds + dc + dt + dn, 10**ds, 10**dc, 10 ** (dn - 1) if dn > 1 else 0, ts_lo, ts_hi


class Delivery:
    def __init__(
        self,
        settings: ConsumerSettings,
        source: MessageSource,
        ledger: Ledger,
        pacer: Pacer,
        flow: PushFlow,
        *,
        start_seq: int,
        last_per_subject_seqs: Sequence[int],
        has_interest: Callable[[str], bool],
        priority: PriorityGroups | None = None,
    ) -> None:
        self.cfg = settings
        self.src = source
        self._ledger = ledger
        self._pacer = pacer
        self._flow = flow
        # Does some subscription still listen on a pull request's reply subject? A request
        # whose client went away is dropped rather than served (`next_request`).
        self.has_interest = has_interest
        # A pull consumer's priority policy, if it has one: it picks the request each
        # message goes to (`_dispatch_unpaused`), instead of plain round robin.
        self.priority = priority
        # The `last_per_subject` start sequences (ascending, below `start_seq`), served
        # before `next_seq`, the next stream seq to consider for a first delivery.
        self.lps: deque[int] = deque(last_per_subject_seqs)
        self.next_seq = start_seq
        self.np: int | None = None  # cached num_pending of the source
        self.waiting: deque[WaitingRequest] = deque()
        self.push_interest = False
        self.last_delivered_ns = 0
        # Matching messages from the position on, read in one batch by `candidate` during
        # one `dispatch` (the store cannot change meanwhile); emptied when it returns.
        self.ahead: deque[StoredMessage] = deque()
        self._ahead_want = 1  # how many `candidate` reads at once: what `dispatch` may send
        # What a push consumer's `dispatch` may still send (its `cap`; None: no cap), and
        # whether the cap ran out, so that more may go (`capped`).
        self._left: int | None = None
        self.capped = False
        # The ack subject's fixed part (see `acks.ack_subject`): deliveries format theirs
        # as bytes, which costs half an f-string and needs no encoding on the way out.
        self._ack_prefix = f"{ACK_PREFIX}{settings.stream}.{settings.name}.".encode()

    def num_pending(self) -> int:
        """Matching messages after the consumer position not yet delivered (redeliveries
        not counted)."""
        if self.np is None:
            self.np = self.src.num_pending(self.next_seq)
        return self.np + len(self.lps)

    # ------------------------------------------------------------------ the general loop

    def dispatch(self, now_ns: int, cap: int = 0) -> list[Action]:
        """Deliver what may go now; a push consumer that tracks acks at most `cap`
        messages (0: no cap), `capped` saying whether it stopped there (more may go)."""
        out: list[Action] = []
        cfg = self.cfg
        self._left = cap if cap > 0 and cfg.is_push and cfg.tracks_acks else None
        self.capped = False
        pacer = self._pacer
        pacer.held_until = None
        if pacer.paused(now_ns):
            pacer.held_until = self.cfg.paused_until_ns
            return self.expire_no_wait(out)
        try:
            return self._dispatch_unpaused(now_ns, out)
        finally:
            self.ahead.clear()

    def next_request(self, now_ns: int, out: list[Action]) -> WaitingRequest | None:
        """The pull request to serve next, as nats-server's `nextWaiting` picks it before
        every delivery: one whose expiry has come ends with `408 Request Timeout` (even if
        the timer that would have said so has not fired yet), one whose reply subject
        nobody listens to any more (the client gave up on it) is dropped unanswered."""
        waiting = self.waiting
        while waiting:
            w = waiting[0]
            if w.expires_at_ns is not None and now_ns >= w.expires_at_ns:
                waiting.popleft()
                out.append(w.pending_status(408, "Request Timeout"))
            elif not self.has_interest(w.reply):
                waiting.popleft()
            else:
                return w
        return None

    def _read_ahead(self) -> int:
        """How many messages `dispatch` may send now: what `candidate` reads at once."""
        cfg = self.cfg
        room = AHEAD_MAX
        limit = cfg.max_ack_pending
        if limit > 0 and cfg.ack_policy is not AckPolicy.NONE:
            room = min(room, limit - len(self._ledger.pending))
        if not cfg.is_push:
            room = min(room, sum(w.batch_left for w in self.waiting))
        return max(room, 1)

    def _dispatch_unpaused(self, now_ns: int, out: list[Action]) -> list[Action]:
        self._ahead_want = self._read_ahead()
        cfg = self.cfg
        # `hold` has nothing to hold back (and changes nothing) without pacing.
        paced = cfg.replay_original or cfg.rate_limit_bps > 0
        if (
            not paced
            and not self._ledger.rdq
            and not self.lps
            and (cfg.ack_policy is not AckPolicy.NONE or cfg.retention is Retention.LIMITS)
            and not cfg.headers_only
            and (self.push_interest if cfg.is_push else self.waiting)
            and all(w.max_bytes <= 0 for w in self.waiting)
            and self.priority is None
        ):
            self.deliver_new(now_ns, out)
        hold = self._pacer.hold
        if cfg.is_push:
            target = cfg.deliver_subject
            assert target is not None
            flow = self._flow
            while (
                self.push_interest
                and not flow.blocked()
                and self._within_cap()
                and (c := self.candidate(now_ns, out)) is not None
            ):
                msg, p = c
                ack, pending_after = self._ack_subject_for(msg, p)
                if cfg.headers_only:
                    msg = headers_only(msg)
                size = message_size(msg.subject, ack, msg.header, msg.data)
                if paced and (at := hold(msg, p is None, size, now_ns)) is not None:
                    self._pacer.held_until = at
                    break
                self._deliver(msg, p, target, ack, pending_after, now_ns, size, out)
                if cfg.flow_control:
                    flow.account(size, out, len(self._ledger.pending))
                if flow.hb_at is not None:
                    flow.hb_at = now_ns + cfg.idle_heartbeat_ns
            return out
        waiting = self.waiting
        priority = self.priority
        while True:
            if priority is None:
                w = self.next_request(now_ns, out)
                if w is None or (c := self.candidate(now_ns, out)) is None:
                    break
            else:  # the policy needs the message first (a redelivery counts as pending)
                if not waiting or (c := self.candidate(now_ns, out)) is None:
                    break
                np = self.num_pending() + (c[1] is not None)
                pending = len(self._ledger.pending)
                w = priority.pick(waiting, now_ns, out, self.has_interest, np, pending)
                if w is None:
                    break
            msg, p = c
            ack, pending_after = self._ack_subject_for(msg, p)
            if cfg.headers_only:
                msg = headers_only(msg)
            size = message_size(msg.subject, ack, msg.header, msg.data)
            if w.max_bytes > 0 and size > w.bytes_left:
                waiting.popleft()
                out.append(w.pending_status(409, "Message Size Exceeds MaxBytes"))
                if priority is not None and priority.just_pinned is w:
                    priority.release()
                continue
            if paced and (at := hold(msg, p is None, size, now_ns)) is not None:
                self._pacer.held_until = at
                break
            if priority is not None and cfg.priority_policy is PriorityPolicy.PINNED_CLIENT:
                msg = priority.stamp(msg)  # after the size: max_bytes does not count it
            self._deliver(msg, p, w.reply, ack, pending_after, now_ns, size, out)
            w.batch_left -= 1
            w.delivered += 1
            if w.max_bytes > 0:
                w.bytes_left -= size
            if w.next_heartbeat_ns is not None:
                w.next_heartbeat_ns = now_ns + w.heartbeat_ns
            if priority is not None:
                priority.requeue(waiting, w)
            else:
                waiting.popleft()
                if w.batch_left > 0:
                    waiting.append(w)  # round robin across requests, as nats-server does
            if w.batch_left <= 0 and w.max_bytes > 0 and w.bytes_left > 0:
                out.append(w.pending_status(409, "Batch Completed"))
        return self.expire_no_wait(out)

    def _within_cap(self) -> bool:
        """Whether the cap of this `dispatch` lets one more message go (and counts it)."""
        left = self._left
        if left is None:
            return True
        if left <= 0:
            self.capped = True
            return False
        self._left = left - 1
        return True

    def candidate(
        self, now_ns: int, out: list[Action]
    ) -> tuple[StoredMessage, Pending | None] | None:
        """The next message to send: redeliveries first (giving up on those past
        max_deliver, with the advisory in `out`), then (below max_ack_pending) new ones."""
        ledger = self._ledger
        rdq = ledger.rdq
        while rdq:
            seq = next(iter(rdq))
            p = ledger.pending[seq]
            if ledger.exhausted(p):  # NAKed at its last delivery
                out.append(ledger.give_up(seq, p))
                continue
            msg = self.src.load(seq)
            if msg is not None:
                return msg, p
            ledger.terminate_removed(seq, p, now_ns, out)  # a removal nobody reported
        cfg = self.cfg
        limit = cfg.max_ack_pending
        if limit > 0 and len(ledger.pending) >= limit and cfg.ack_policy is not AckPolicy.NONE:
            return None
        while self.lps:
            msg = self.src.load(self.lps[0])
            if msg is not None:
                return msg, None
            self.lps.popleft()
        ahead = self.ahead
        if not ahead:
            ahead.extend(self.src.next_batch(self.next_seq - 1, self._ahead_want))
            if not ahead:
                self._passed_end()
                return None
        return ahead[0], None

    def _passed_end(self) -> None:
        """The search for the next matching message found none: as nats-server's, the
        position moves past every message the search passed over (to the stream's end),
        so that a filter changed later starts there. Nothing it passed matched: the
        pending count stays, and `delivered` still names the last delivery."""
        end = self.src.searched_to(self.next_seq - 1) + 1
        if end > self.next_seq:
            self.next_seq = end

    def _ack_subject_for(self, msg: StoredMessage, p: Pending | None) -> tuple[bytes, int]:
        """The ack subject of the next delivery of `msg` (`acks.ack_subject`, with the
        prefix made once), and the consumer's num_pending after it."""
        if p is None:
            pending_after = max(self.num_pending() - 1, 0)
            deliveries = 1
        else:
            pending_after = self.num_pending()
            deliveries = p.deliveries + 1
        cseq = self._ledger.delivered_consumer_seq + 1
        ack = ack_reply(self._ack_prefix, deliveries, msg.seq, cseq, msg.ts_ns, pending_after)
        return ack, pending_after

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
        ledger = self._ledger
        cseq = ledger.delivered_consumer_seq = ledger.delivered_consumer_seq + 1
        seq = msg.seq
        self.last_delivered_ns = now_ns
        retained: Action | None = None  # a retention action following the Deliver
        if p is not None:  # a redelivery
            del ledger.rdq[seq]
            p.deliveries += 1  # p.consumer_seq stays the first delivery's (nats-server)
            p.last_delivered_ns = now_ns
            ledger.arm(seq, p, now_ns + cfg.ack_wait_for(p.deliveries))
            count = p.deliveries
        else:
            lps = self.lps
            if lps and lps[0] == seq:
                lps.popleft()
            else:
                ahead = self.ahead
                if ahead and ahead[0].seq == seq:
                    ahead.popleft()
                self.next_seq = seq + 1
                np = self.np
                if np is not None:
                    self.np = np - 1 if np > 0 else 0
            if seq > ledger.delivered_stream_seq:
                ledger.delivered_stream_seq = seq
            count = 1
            self._pacer.replay_prev = (msg.ts_ns, now_ns)
            if cfg.ack_policy is not AckPolicy.NONE:  # cfg.tracks_acks
                order = ledger.order
                assert not order or order[-1] < seq  # `order` stays sorted
                deadline = now_ns + cfg.ack_wait_for(1)
                p = ledger.pending[seq] = Pending(cseq, 1, deadline, now_ns, now_ns)
                order.append(seq)
                ledger.arm(seq, p, deadline)
            else:  # ack none: delivered is acknowledged
                ledger.floor_c, ledger.floor_s = cseq, ledger.delivered_stream_seq
                if cfg.retention is Retention.WORKQUEUE:
                    retained = RemoveMessage(seq)
                elif cfg.retention is Retention.INTEREST:
                    retained = Acked(seq)
        if cfg.rate_limit_bps > 0:
            self._pacer.spend(size)
        out.append(Deliver(msg, reply, ack, cseq, seq, count, pending_after, msg.ts_ns))
        if retained is not None:
            out.append(retained)

    def expire_no_wait(self, out: list[Action]) -> list[Action]:
        """`no_wait` requests end as soon as nothing more can be delivered to them now."""
        waiting = self.waiting
        for w in [w for w in waiting if w.no_wait]:
            if w.delivered > 0 or w.expires_at_ns is None:
                waiting.remove(w)
                out.append(Status(w.reply, 404, "No Messages"))
        return out

    # ------------------------------------------------------------------ first deliveries

    def deliver_new(self, now_ns: int, out: list[Action]) -> None:
        """First deliveries, as many as may go now, in one loop: what the general loop
        of `_dispatch_unpaused` does through `candidate`, `_ack_subject_for` and
        `_deliver`, for the common case it checked (nothing to redeliver, no last-per-
        subject queue, acks tracked or a limits stream's; no pacing, headers_only or
        max_bytes, which need each message's size). Push flow control is counted here as
        there (a mirror's or source's consumer: ack none, flow control), its request
        ending the run it follows. Same state and actions; the general loop then finds
        nothing more to send, or takes over where this stops."""
        cfg = self.cfg
        ledger = self._ledger
        limit = cfg.max_ack_pending
        pending = ledger.pending
        waiting = self.waiting
        target = cfg.deliver_subject
        tracked = cfg.ack_policy is not AckPolicy.NONE
        timed = cfg.redelivers
        flow = self._flow
        fc = cfg.flow_control and target is not None
        if target is None and self.next_request(now_ns, out) is None:
            return
        room = AHEAD_MAX * 1024 if limit <= 0 or not tracked else limit - len(pending)
        if target is None:
            room = min(room, sum(w.batch_left for w in waiting))
        left = self._left
        if left is not None and left < room:
            room = left
        if room <= 0 or (fc and flow.blocked()):
            return
        deadline = now_ns + cfg.ack_wait_for(1)
        first_deadline = deadline if timed else None
        new_pending = object.__new__
        np = self.num_pending()  # no last-per-subject queue: `np`, now cached
        prefix = self._ack_prefix + b"1."
        cseq = ledger.delivered_consumer_seq
        order_append = ledger.order.append
        # Every deadline of this call is the same, for sequences from `next_seq` up.
        timer_append = ledger.deadlines.adder(deadline, self.next_seq)
        out_append = out.append
        next_batch = self.src.next_batch
        # One reply for all (push, or a single waiting pull request): one `DeliverRun`.
        run_to = target if target is not None else waiting[0].reply if len(waiting) == 1 else None
        ack_prefix = self._ack_prefix
        acks: list[bytes] = []
        run_acks = acks.append
        # A push run under flow control leaves its ack subjects unformatted
        # (`DeliverRun.ack_subjects`): only their length counts; it carries the records
        # its messages were read from (`DeliverRun.spans`, for a mirror in this process).
        spans: list[RecordSpan] | None = [] if fc else None
        run = DeliverRun(
            run_to or "",
            [],
            None if fc else acks,
            cseq + 1,
            np,
            ack_prefix,
            () if spans is None else spans,
        )
        run_msgs = run.msgs.append
        headroom = flow.headroom() if fc else 0  # bytes to count with no flow-control event
        spent = 0  # bytes counted in `headroom` and not told to `flow` yet
        ack_len = seq_hi = cseq_hi = np_lo = ts_lo = ts_hi = 0  # `_ack_digits`
        base_len = len(prefix) + 3  # and the three dots between the numbers
        subject = ""  # the last delivered message's subject, and its length in bytes
        subject_len = 0
        msg: StoredMessage | None = None  # the last one delivered
        # Round robin: each request is checked (`next_request`) when its first turn
        # comes; time and interest stand still during this call, and the queue keeps its
        # order, so after `unchecked` turns every request left has been checked. (The one
        # request of a run was checked above.)
        unchecked = len(waiting) if run_to is None else 0
        while room > 0:
            batch = next_batch(self.next_seq - 1, min(room, AHEAD_MAX), spans)
            if not batch:
                self._passed_end()
                break
            room -= len(batch)
            for candidate in batch:
                if unchecked > 0:
                    before = len(waiting)
                    if self.next_request(now_ns, out) is None:
                        room = 0
                        break
                    unchecked -= before - len(waiting) + 1  # those dropped, and the head
                msg = candidate
                seq = msg.seq
                cseq += 1
                if np > 0:
                    np -= 1
                if tracked:
                    # `Pending(cseq, 1, first_deadline, now_ns, now_ns)` without the call
                    # of its `__init__`: a third of this loop's cost.
                    p = new_pending(Pending)
                    p.consumer_seq = cseq
                    p.deliveries = 1
                    p.deadline_ns = first_deadline
                    p.first_delivered_ns = p.last_delivered_ns = now_ns
                    pending[seq] = p
                    order_append(seq)
                    if timed:
                        timer_append((deadline, seq))
                if fc:  # push: a run; a flow-control request ends it
                    run_msgs(msg)
                    # The delivery's size (`message_size`), its ack subject's length from
                    # the digits of its numbers, which change only at powers of ten.
                    ts = msg.ts_ns
                    if seq >= seq_hi or cseq >= cseq_hi or np < np_lo or not ts_lo <= ts < ts_hi:
                        ack_len, seq_hi, cseq_hi, np_lo, ts_lo, ts_hi = _ack_digits(
                            seq, cseq, ts, np
                        )
                    if msg.subject is not subject:  # the same string object: the same subject
                        subject = msg.subject
                        subject_len = len(subject.encode())
                    header = msg.header
                    size = base_len + ack_len + subject_len + len(msg.data)
                    if header:
                        size += len(header)
                    if size <= headroom:
                        headroom -= size
                        spent += size
                        continue
                    flow.spend(spent)
                    spent = 0
                    before = len(out)
                    flow.account(size, out, len(pending))
                    headroom = flow.headroom()
                    if len(out) > before:  # the request goes after the run so far
                        out.insert(before, run)
                        run = DeliverRun(
                            target or "", [], None, cseq + 1, np, ack_prefix, run.spans
                        )
                        run_msgs = run.msgs.append
                    if flow.blocked():
                        room = 0
                        break
                    continue
                ack = ack_reply(ack_prefix, 1, seq, cseq, msg.ts_ns, np)
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
            if run_to is not None and not fc:
                run.msgs += batch
            if msg is not None:
                self.next_seq = msg.seq + 1
        if spent:
            flow.spend(spent)
        if msg is None:
            return
        if run.msgs:
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
        if left is not None:
            self._left = left - (cseq - ledger.delivered_consumer_seq)
        ledger.delivered_consumer_seq = cseq
        self.np = np
        if msg.seq > ledger.delivered_stream_seq:
            ledger.delivered_stream_seq = msg.seq
        if not tracked:  # ack none: delivered is acknowledged
            ledger.floor_c, ledger.floor_s = cseq, ledger.delivered_stream_seq
        self.last_delivered_ns = now_ns
        self._pacer.replay_prev = (msg.ts_ns, now_ns)
        flow = self._flow
        if target is not None and flow.hb_at is not None:
            flow.hb_at = now_ns + cfg.idle_heartbeat_ns
