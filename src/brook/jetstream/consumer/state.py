"""The consumer core: a pure, synchronous state machine (design guide "Consumers").

Inputs are method calls carrying the current time (`now_ns`, from the owner's clock);
each returns the list of actions (`actions.py`) the owner must execute, in order. No I/O,
no timers: the owner arms one timer for `next_deadline()` and calls `tick()` when it fires.

Bookkeeping follows wire reference §6.7:

* `_next_seq` is the next stream sequence to consider for a first delivery; the
  `last_per_subject` start sequences (computed by the caller) are served before it.
* `_pending` maps stream seq -> `Pending` for delivered, unacknowledged messages, in
  ascending stream-seq order (new deliveries always have a higher sequence), so the
  lowest pending message is the first key. A pending entry is either timed (`deadline_ns`
  set, with a matching entry in the lazy `_deadlines`) or queued for redelivery
  (`deadline_ns is None`, key in the ordered set `_rdq`).
* Ack floors are derived: stream floor = lowest pending seq - 1, consumer floor = lowest
  pending consumer seq - 1 (both monotonic); with nothing pending they equal `delivered`.

Invariants (checked after every input, fully by `check_invariants()`): ack floor <=
delivered, and new deliveries never push `len(pending)` beyond `max_ack_pending`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any

from brook.jetstream.consumer.acks import AckKind, AckPayload, PullRequest
from brook.jetstream.consumer.actions import (
    MSG_NAKED,
    MSG_TERMINATED,
    Action,
    Status,
    heartbeat_headers,
)
from brook.jetstream.consumer.config import AckPolicy
from brook.jetstream.consumer.core import ConsumerCore, Pending
from brook.jetstream.consumer.pull import WaitingRequest, admission_error
from brook.jetstream.consumer.source import MessageSource

__all__ = ["ConsumerState", "Pending"]


class ConsumerState(ConsumerCore):
    # ------------------------------------------------------------------ inputs

    def message_stored(self, seq: int, now_ns: int) -> list[Action]:
        """A message was stored in the stream (it may or may not match the filter)."""
        self._np = None
        return self._finish(self._dispatch(now_ns))

    def messages_removed(self, seqs: Iterable[int]) -> None:
        """Messages left the stream (limits, purge, delete): never redeliver them."""
        gone = set(seqs)
        for s in gone:
            if self._pending.pop(s, None) is not None:
                self._rdq.pop(s, None)
        for s in gone & self._dead.keys():
            del self._dead[s]
        if gone and self._lps:
            self._lps = deque(s for s in self._lps if s not in gone)
        self._np = None

    def stream_starts_at(self, first_seq: int) -> None:
        """At start: deliveries still pending of messages below the stream's first
        sequence (max_age expired them while the server was down, before the consumer
        was restored) are dropped as nats-server's `checkPending` drops them when a
        consumer starts, without an advisory or an ack time: the floor moves up to the
        highest (consumer, stream) sequences dropped, or to `delivered` once nothing is
        pending."""
        pending = self._pending
        gone = [s for s in pending if s < first_seq]
        if not gone:
            return
        for s in gone:
            p = pending.pop(s)
            self._rdq.pop(s, None)
            self._floor_c = max(self._floor_c, p.consumer_seq)
            self._floor_s = max(self._floor_s, s)
        if not pending:
            self._floor_c, self._floor_s = self.delivered_consumer_seq, self.delivered_stream_seq
        self._mem_floor = None  # nats-server writes the floor it moved to its store
        self._np = None

    def message_removed(self, seq: int, now_ns: int) -> list[Action]:
        """The stream removed message `seq` on its own (STREAM.MSG.DELETE, a secure
        erase, a discard-old limit, max_age or its TTL). nats-server's store reports each
        such removal to the consumers (`storeUpdates` -> `decStreamPending`): a pending
        delivery of it is terminated (acknowledged, and a `MSG_TERMINATED` advisory
        "Unacknowledged message was deleted"), a dead letter forgotten. This is step 1
        of `stream_purged` on its own."""
        return self.stream_purged(None, now_ns, removed_seq=seq)

    def stream_purged(
        self,
        start_seq: int | None,
        now_ns: int,
        *,
        wider: bool = False,
        removed_seq: int = 0,
        dead_below: int = 0,
    ) -> list[Action]:
        """The stream was purged: what nats-server does to a consumer, in its order.

        1. The store reports the removal (nats-server's `storeUpdates`). A purge that took
           out one message on its own (`removed_seq`: a filtered or `keep` purge of one)
           forgets it as a dead letter (an ack in nats-server's consumer store, which
           sets the ack floor's `last_active`), or, if it is pending, terminates it after step 2
           (`decStreamPending`: acknowledged, and a `MSG_TERMINATED` advisory). Any other
           purge that removed something forgets the dead letters below `dead_below`, the
           stream's new first sequence (`removeRedeliveredBelow`).
        2. Unless the purge left this consumer alone (`start_seq` None), its messages now
           begin at `start_seq` (nats-server's consumer `purge`):
           * the position moves up to `start_seq` (never back);
           * if the in-memory ack floor (core.py `_mem_floor`) is below `start_seq`,
             what is pending below it is dropped, and so is, for a consumer `wider` than
             a filtered purge, what is pending above whose message is gone. Each drop
             acknowledges the delivery in nats-server's consumer store (`UpdateAcks`:
             `_move_store_floor`); the in-memory floor becomes (highest consumer
             sequence dropped, `start_seq - 1`);
           * with nothing pending the in-memory floor is `delivered`;
           * the in-memory floor is written to the store, and replaces its floor unless
             that one's stream sequence is higher by then. So the reported floor may end
             above a delivery still pending, which `_move_store_floor` then leaves alone;
           * the redelivery queue is emptied (nats-server keeps only its entries at or
             above the position, which none are): a queued message still pending is
             redelivered when its ack wait, counted from its last delivery, runs out;
             one queued by an ack wait that ran out already gets one more ack wait.
           Nothing is dispatched for it (nats-server signals no consumer) and no retention
           action results: the messages dropped are gone from the stream.
        """
        self._np = None
        term: Pending | None = None
        if removed_seq:
            term = self._pending.get(removed_seq)
            if term is None and self._dead.pop(removed_seq, None) is not None:
                self.last_ack_ns = now_ns  # nats-server "acks" it in its store
        elif dead_below and self._dead:
            for s in [s for s in self._dead if s < dead_below]:
                del self._dead[s]
        if start_seq is not None:
            self._purge_to(start_seq, now_ns, wider=wider)
        if term is None:
            return []
        out: list[Action] = []
        self._terminate_removed(removed_seq, term, now_ns, out)
        return self._finish(out + self._dispatch(now_ns))

    def _purge_to(self, start_seq: int, now_ns: int, *, wider: bool) -> None:
        """Step 2 of `stream_purged`, on nats-server's two ack floors (core.py
        `_mem_floor`): the in-memory one decides and is written to the store, whose floor
        has meanwhile moved on each drop, unless that one is higher by then."""
        if self._next_seq < start_seq:
            self._next_seq = start_seq
            self.delivered_stream_seq = max(self.delivered_stream_seq, start_seq - 1)
        pending = self._pending
        mem_c, mem_s = self._mem_floor or (self._floor_c, self._floor_s)
        if mem_s < start_seq:
            gone = [s for s in pending if s < start_seq or (wider and self._src.load(s) is None)]
            for s in gone:
                p = pending.pop(s)
                self._rdq.pop(s, None)
                mem_c = max(mem_c, p.consumer_seq)
                if self.cfg.ack_policy is AckPolicy.ALL:
                    if p.consumer_seq > self._floor_c:
                        self._floor_c, self._floor_s = p.consumer_seq, s
                else:
                    self._move_store_floor(s, p)
            if gone:
                self.last_ack_ns = now_ns
            mem_s = start_seq - 1
        if not pending:
            mem_c, mem_s = self.delivered_consumer_seq, self.delivered_stream_seq
        if mem_s >= self._floor_s:
            self._floor_c, self._floor_s = mem_c, mem_s
        self._mem_floor = (
            None if (mem_c, mem_s) == (self._floor_c, self._floor_s) else (mem_c, mem_s)
        )
        for s in self._rdq:
            p = pending[s]
            wait = self.cfg.ack_wait_for(p.deliveries)
            deadline = p.last_delivered_ns + wait
            if deadline <= now_ns:
                deadline = max(deadline + wait, now_ns)
            self._arm(s, p, deadline)
        self._rdq.clear()

    def set_push_interest(self, interest: bool, now_ns: int) -> list[Action]:
        """Push consumers deliver only while their deliver subject has a subscriber."""
        self._push_interest = interest
        if not interest:
            self._fc_reset()  # the request went to a subscriber that is gone
        hb = self.cfg.idle_heartbeat_ns
        self._push_hb_at = now_ns + hb if interest and hb > 0 else None
        return self._finish(self._dispatch(now_ns) if interest else [])

    def flow_control_response(self, subject: str, now_ns: int) -> list[Action]:
        """The client answered a flow-control request: the bytes it covered are confirmed
        and the window doubles (up to its maximum). Answers to older requests are ignored."""
        if subject != self._fc_reply:
            return []
        self._fc_bytes = max(self._fc_bytes - self._fc_covers, 0)
        self._fc_reply = None
        self._fc_covers = 0
        self._fc_window = min(self._fc_window * 2, self.cfg.fc_window_max_bytes)
        return self._finish(self._dispatch(now_ns))

    def dispatch(self, now_ns: int) -> list[Action]:
        """Deliver what can be delivered now (after inputs given `dispatch=False`)."""
        return self._finish(self._dispatch(now_ns))

    def settings_changed(self, now_ns: int) -> list[Action]:
        """`cfg` was replaced (an update or a pause/resume): deliver what the new settings
        allow now."""
        return self._finish(self._dispatch(now_ns))

    def source_changed(self, source: MessageSource, now_ns: int) -> list[Action]:
        """The filters changed (an update): read through `source` from the same position
        on, with the pending count taken again; deliver what it allows now."""
        self._src = source
        self._np = None
        return self._finish(self._dispatch(now_ns))

    def pull_request(
        self,
        reply: str,
        now_ns: int,
        *,
        batch: int = 1,
        expires_ns: int = 0,
        no_wait: bool = False,
        max_bytes: int = 0,
        idle_heartbeat_ns: int = 0,
    ) -> list[Action]:
        batch = max(batch, 1)
        err = admission_error(self.cfg, reply, batch, expires_ns, max_bytes, idle_heartbeat_ns)
        if err is not None:
            return [err]
        if no_wait:
            # nats-server: 404 only with nothing available and no expiry; 408 when the
            # requests already waiting want more than is available.
            available = self.num_pending() + len(self._rdq)
            if available == 0 and expires_ns <= 0:
                return [Status(reply, 404, "No Messages")]
            if 0 < available < sum(w.batch_left for w in self._waiting):
                return [Status(reply, 408, "Requests Pending")]
        if self.cfg.max_waiting > 0 and len(self._waiting) >= self.cfg.max_waiting:
            return [] if idle_heartbeat_ns > 0 else [Status(reply, 409, "Exceeded MaxWaiting")]
        hb = idle_heartbeat_ns
        self._waiting.append(
            WaitingRequest(
                reply=reply,
                batch_left=batch,
                expires_at_ns=now_ns + expires_ns if expires_ns > 0 else None,
                no_wait=no_wait,
                max_bytes=max_bytes,
                bytes_left=max_bytes,
                heartbeat_ns=hb,
                next_heartbeat_ns=now_ns + hb if hb > 0 else None,
            )
        )
        return self._finish(self._dispatch(now_ns))

    def pull(self, reply: str, req: PullRequest, now_ns: int) -> list[Action]:
        return self.pull_request(
            reply,
            now_ns,
            batch=req.batch,
            expires_ns=req.expires_ns,
            no_wait=req.no_wait,
            max_bytes=req.max_bytes,
            idle_heartbeat_ns=req.idle_heartbeat_ns,
        )

    def reset(self, seq: int) -> None:
        """CONSUMER.RESET to stream sequence `seq` (validated by the caller), as nats-server's
        `resetLocalStartingSeq`: every message from `seq` on is to come (again), what was
        pending, queued for redelivery or given up on is forgotten with its delivery
        counts, consumer sequences start again at 1, and the ack floor and `delivered` sit
        right below `seq`. Waiting pull requests stay; the owner calls `dispatch()` to
        serve them (after answering the reset, whose answer shows the state it made)."""
        self._pending.clear()
        self._order.clear()
        self._rdq.clear()
        self._deadlines.clear()
        self._dead.clear()
        self._lps.clear()
        self._ahead.clear()
        self._pending_limit_slack = 0
        self._next_seq = max(seq, 1)
        self._np = None
        self.delivered_consumer_seq = self._floor_c = 0
        self.delivered_stream_seq = self._floor_s = self._next_seq - 1
        self.last_delivered_ns = self.last_ack_ns = 0
        self._replay_prev = None

    def consumer_deleted(self) -> list[Action]:
        """The consumer is going away: every waiting pull request gets `409 Consumer Deleted`."""
        out: list[Action] = [Status(w.reply, 409, "Consumer Deleted") for w in self._waiting]
        self._waiting.clear()
        return out

    def server_shutdown(self) -> list[Action]:
        """The server is stopping: every waiting pull request ends with `409 Server
        Shutdown` and what it still wanted (`Nats-Pending-Messages`/`-Bytes`), so that the
        client asks again once reconnected. As nats-server's `signalPullConsumers`: one
        answer per reply subject, with the last request's counts."""
        last = {w.reply: w for w in self._waiting}
        self._waiting.clear()
        return [w.pending_status(409, "Server Shutdown") for w in last.values()]

    def drop_unheard_requests(self) -> None:
        """Drop every waiting request whose reply subject nobody listens to any more (a
        client gave up on a fetch), as nats-server's `processWaiting` does on its timer
        and for consumer info (which counts only live requests). Deliveries check the
        request they go to (`_next_request`)."""
        has_interest = self._has_interest
        if not all(has_interest(w.reply) for w in self._waiting):
            self._waiting = deque(w for w in self._waiting if has_interest(w.reply))

    def ack(
        self,
        stream_seq: int,
        consumer_seq: int,
        kind: AckKind,
        now_ns: int,
        *,
        delay_ns: int | None = None,
        reason: str = "",
        reply: str | None = None,
        next_request: PullRequest | None = None,
        deliveries: int = 1,
        dispatch: bool = True,
    ) -> list[Action]:
        """An ack verb for the delivery named by the ack subject (stream and consumer seq,
        delivery count), as nats-server's `processAck`.

        Acks of sequences beyond the consumer's position are ignored (`acceptable`);
        NAK and WPI only act on pending messages; TERM acknowledges and always sends its
        advisory; `+NXT` acknowledges and then runs `next_request` (default batch 1) with
        `reply` (the ack message's reply subject). With `dispatch=False` the deliveries the
        ack makes possible are left to a later `dispatch()` (the owner batches them).
        """
        if not self.acceptable(stream_seq):
            return []
        out: list[Action] = []
        p = self._pending.get(stream_seq) if self.cfg.tracks_acks else None
        if kind in (AckKind.ACK, AckKind.NXT):
            out += self._ack(stream_seq, consumer_seq, now_ns)
        elif kind is AckKind.TERM:
            out += self._ack(stream_seq, consumer_seq, now_ns)
            extra = {"reason": reason} if reason else {}
            out.append(
                self._advisory(MSG_TERMINATED, stream_seq, deliveries, consumer_seq, **extra)
            )
        elif p is None:
            pass
        elif kind is AckKind.NAK:
            if self._floor_c < consumer_seq <= self.delivered_consumer_seq:
                out.append(self._advisory(MSG_NAKED, stream_seq, deliveries, consumer_seq))
                self._rdq.pop(stream_seq, None)
                if delay_ns is not None and delay_ns > 0:
                    self._arm(stream_seq, p, now_ns + delay_ns)
                else:
                    self._queue(stream_seq, p)  # max_deliver is checked when it comes up
        elif kind is AckKind.WPI:
            self._rdq.pop(stream_seq, None)
            self._arm(stream_seq, p, now_ns + self.cfg.ack_wait_for(p.deliveries))
        if dispatch:
            out += self._dispatch(now_ns)
        if kind is AckKind.NXT and reply is not None:
            req = next_request or PullRequest()
            out += self.pull(reply, req, now_ns)
        return self._finish(out)

    def ack_explicit_run(self, stream_seqs: Iterable[int], now_ns: int) -> list[Action]:
        """`ack(stream_seq, _, AckKind.ACK, now_ns, dispatch=False)` of each of
        `stream_seqs` in turn under `ack_policy: explicit`: the hot path of plain acks, a
        read chunk's at a time, without the verb dispatch; the owner calls `dispatch()`
        later. (Explicit acks need no consumer sequence: the pending entry has it.)"""
        assert self.cfg.ack_policy is AckPolicy.EXPLICIT
        delivered = self.delivered_stream_seq
        out: list[Action] = []
        self._ack_explicit_run((s for s in stream_seqs if s <= delivered), now_ns, out)
        return out

    def ack_payload(
        self,
        stream_seq: int,
        consumer_seq: int,
        payload: AckPayload,
        now_ns: int,
        reply: str | None = None,
        deliveries: int = 1,
        *,
        dispatch: bool = True,
    ) -> list[Action]:
        return self.ack(
            stream_seq,
            consumer_seq,
            payload.kind,
            now_ns,
            delay_ns=payload.delay_ns,
            reason=payload.reason,
            reply=reply,
            next_request=payload.next_request,
            deliveries=deliveries,
            dispatch=dispatch,
        )

    def acceptable(self, stream_seq: int) -> bool:
        """An ack for a sequence the consumer has not reached is ignored, unanswered
        (nats-server: it may come from a delivery this server never made)."""
        return stream_seq <= self.delivered_stream_seq

    def tick(self, now_ns: int) -> list[Action]:
        """Time passed: ack deadlines, request expiry, then deliveries and heartbeats."""
        out: list[Action] = []
        while (due := self._deadlines.pop_due(now_ns)) is not None:
            deadline, seq = due
            p = self._pending.get(seq)
            if p is not None and p.deadline_ns == deadline:
                out += self._due(seq, p)
        for w in [w for w in self._waiting if w.expires_at_ns is not None]:
            if w.expires_at_ns is not None and now_ns >= w.expires_at_ns:
                self._waiting.remove(w)
                out.append(w.pending_status(408, "Request Timeout"))
        self.drop_unheard_requests()  # no heartbeats into the void
        out += self._dispatch(now_ns)
        hb = heartbeat_headers(self.delivered_consumer_seq, self.delivered_stream_seq)
        if self._fc_reply is not None:
            hb += (("Nats-Consumer-Stalled", self._fc_reply),)
        for w in self._waiting:
            if w.next_heartbeat_ns is not None and now_ns >= w.next_heartbeat_ns:
                out.append(Status(w.reply, 100, "Idle Heartbeat", hb))
                w.next_heartbeat_ns = now_ns + w.heartbeat_ns
        if self._push_hb_at is not None and now_ns >= self._push_hb_at:
            assert self.cfg.deliver_subject is not None
            out.append(Status(self.cfg.deliver_subject, 100, "Idle Heartbeat", hb))
            self._push_hb_at = now_ns + self.cfg.idle_heartbeat_ns
        return self._finish(out)

    def next_deadline(self) -> int | None:
        """When `tick` next has something to do, or None."""
        # The minimum of the candidates that are set, without building a list (per input).
        at = self._deadlines.earliest(self._pending)
        for w in self._waiting:
            t = w.expires_at_ns
            if t is not None and (at is None or t < at):
                at = t
            t = w.next_heartbeat_ns
            if t is not None and (at is None or t < at):
                at = t
        t = self._push_hb_at
        if t is not None and (at is None or t < at):
            at = t
        t = self._held_until
        if t is not None and (at is None or t < at):
            at = t
        return at

    # ------------------------------------------------------------------ persistence

    def persist_mark(self) -> tuple[int, ...]:
        """Differs whenever `snapshot()` would: every addition to `pending` comes with a
        delivery (a new consumer sequence), every removal shrinks it."""
        return (
            self.delivered_consumer_seq,
            self.delivered_stream_seq,
            len(self._pending),
            self._next_seq,
            len(self._lps),
            len(self._dead),
            self._floor_c,
            self._floor_s,
        )

    def snapshot(self) -> dict[str, Any]:
        floor_c, floor_s = self.ack_floor
        return {
            "delivered": {
                "consumer_seq": self.delivered_consumer_seq,
                "stream_seq": self.delivered_stream_seq,
            },
            "ack_floor": {"consumer_seq": floor_c, "stream_seq": floor_s},
            "next_seq": self._next_seq,
            "last_per_subject": list(self._lps),
            "pending": [
                [s, p.consumer_seq, p.deliveries, p.first_delivered_ns, p.last_delivered_ns]
                for s, p in self._pending.items()
            ],
            "dead": sorted([s, d] for s, d in self._dead.items()),
        }

    def restore(self, data: dict[str, Any], now_ns: int) -> None:
        """Replace the state with a snapshot; every pending message gets a fresh ack
        deadline from `now_ns`. Waiting pull requests are not persisted."""
        self.delivered_consumer_seq = int(data["delivered"]["consumer_seq"])
        self.delivered_stream_seq = int(data["delivered"]["stream_seq"])
        self._next_seq = int(data["next_seq"])
        self._lps = deque(int(s) for s in data.get("last_per_subject", []))
        self._pending.clear()
        self._rdq.clear()
        self._deadlines.clear()
        self._waiting.clear()
        self._np = None
        self._dead = {int(s): int(d) for s, d in data.get("dead", [])}
        floor = data.get("ack_floor", {})
        self._mem_floor = None  # nats-server starts with the store's
        self._floor_c = int(floor.get("consumer_seq", 0))
        self._floor_s = int(floor.get("stream_seq", self.delivered_stream_seq))
        for s, c, d, first, last in sorted(data.get("pending", [])):
            p = Pending(int(c), int(d), None, int(first), int(last))
            self._pending[int(s)] = p
            self._arm(int(s), p, now_ns + self.cfg.ack_wait_for(p.deliveries))
        self._order = deque(self._pending)
        limit = self.cfg.max_ack_pending
        self._pending_limit_slack = max(len(self._pending) - limit, 0) if limit > 0 else 0
        self.check_invariants()
