"""The consumer: a pure, synchronous state machine (design guide "Consumers").

Inputs are method calls carrying the current time (`now_ns`, from the owner's clock);
each returns the list of actions (`actions.py`) the owner must execute, in order. No I/O,
no timers: the owner arms one timer for `next_deadline()` and calls `tick()` when it fires.

`ConsumerState` turns inputs into actions; its parts keep the state, one concern each:

* `ledger` (pending.py): the delivered, unacknowledged messages, the redelivery queue,
  the dead letters, the ack deadlines (deadlines.py) and nats-server's ack floors;
* `delivery` (delivery.py): the position in the stream, the waiting pull requests and
  the dispatch loops (the general one and `deliver_new`, the first deliveries' shortcut);
* `pacer` (pacing.py): pause, replay_policy `original` and rate_limit_bps;
* `flow` (flow.py): push flow control and idle heartbeats;
* `priority` (priority.py): a pull consumer's priority policy and its pin, if it has one.

Invariants (checked after every input, fully by `check_invariants()`): ack floor <=
delivered, and new deliveries never push `len(pending)` beyond `max_ack_pending`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from brook.jetstream.consumer.acks import AckKind, AckPayload, PullGroup, PullRequest
from brook.jetstream.consumer.actions import (
    MSG_NAKED,
    MSG_TERMINATED,
    Acked,
    Action,
    RemoveMessage,
    Status,
)
from brook.jetstream.consumer.config import AckPolicy, ConsumerSettings, PriorityPolicy, Retention
from brook.jetstream.consumer.delivery import Delivery
from brook.jetstream.consumer.flow import PushFlow
from brook.jetstream.consumer.pacing import Pacer
from brook.jetstream.consumer.pending import Ledger, Pending
from brook.jetstream.consumer.priority import PriorityGroups, request_error
from brook.jetstream.consumer.pull import WaitingRequest, admission_error
from brook.jetstream.consumer.source import MessageSource
from brook.nuid import random_id

# Messages read at a time when a flow-control answer moves a consumer past some
# (`ConsumerState._catch_up`).
CATCH_UP_CHUNK = 256


class ConsumerState:
    def __init__(
        self,
        settings: ConsumerSettings,
        source: MessageSource,
        *,
        start_seq: int = 1,
        last_per_subject_seqs: Sequence[int] = (),
        has_interest: Callable[[str], bool] = lambda reply: True,
        new_pin_id: Callable[[], str] = random_id,
    ) -> None:
        # The last-per-subject start sequences (computed by the caller) come first.
        lps = sorted(s for s in last_per_subject_seqs if s < start_seq)
        start_seq = max(start_seq, 1)
        self._cfg = settings
        self.pacer = Pacer(settings)
        self.flow = PushFlow(settings)
        self._new_pin_id = new_pin_id  # pinned_client's ids (random; tests make their own)
        self.ledger = Ledger(settings, delivered_stream_seq=(lps[0] if lps else start_seq) - 1)
        self.delivery = Delivery(
            settings,
            source,
            self.ledger,
            self.pacer,
            self.flow,
            start_seq=start_seq,
            last_per_subject_seqs=lps,
            has_interest=has_interest,
            priority=self._priority_for(settings, None),
        )

    def _priority_for(
        self, settings: ConsumerSettings, current: PriorityGroups | None
    ) -> PriorityGroups | None:
        """The priority part for `settings`: none without a policy; the current one (its
        pin kept, as nats-server keeps it across an update) with the new settings."""
        if settings.priority_policy is PriorityPolicy.NONE:
            return None
        if current is None:
            return PriorityGroups(settings, self._new_pin_id)
        current.cfg = settings
        return current

    @property
    def priority(self) -> PriorityGroups | None:
        return self.delivery.priority

    @property
    def cfg(self) -> ConsumerSettings:
        return self._cfg

    @cfg.setter
    def cfg(self, settings: ConsumerSettings) -> None:
        """Replaced on an update or a pause/resume (then `settings_changed`)."""
        self._cfg = settings
        self.ledger.cfg = self.delivery.cfg = self.pacer.cfg = self.flow.cfg = settings
        self.delivery.priority = self._priority_for(settings, self.delivery.priority)

    # ------------------------------------------------------------------ counters

    @property
    def ack_floor(self) -> tuple[int, int]:
        """(consumer_seq, stream_seq) below which everything is acknowledged."""
        return self.ledger.floor_c, self.ledger.floor_s

    @property
    def delivered_consumer_seq(self) -> int:
        return self.ledger.delivered_consumer_seq

    @property
    def delivered_stream_seq(self) -> int:
        return self.ledger.delivered_stream_seq

    @property
    def last_delivered_ns(self) -> int:
        return self.delivery.last_delivered_ns

    @property
    def last_ack_ns(self) -> int:
        return self.ledger.last_ack_ns

    @property
    def num_ack_pending(self) -> int:
        return len(self.ledger.pending)

    @property
    def num_redelivered(self) -> int:
        return self.ledger.num_redelivered()

    @property
    def push_interest(self) -> bool:
        """A push consumer's deliver subject has a subscriber (`set_push_interest`)."""
        return self.delivery.push_interest

    @property
    def num_waiting(self) -> int:
        return len(self.delivery.waiting)

    def num_pending(self) -> int:
        """Matching messages after the consumer position not yet delivered (redeliveries
        not counted)."""
        return self.delivery.num_pending()

    def pending_seqs(self) -> list[int]:
        return list(self.ledger.pending)

    def delivery_count(self, stream_seq: int) -> int:
        p = self.ledger.pending.get(stream_seq)
        return p.deliveries if p else 0

    @property
    def next_stream_seq(self) -> int:
        """The consumer's position: every matching message from here on is still to come."""
        return self.delivery.next_seq

    def needs(self, seq: int) -> bool:
        """Does this consumer still hold `seq` (to deliver it, for its ack, or as a dead
        letter)? Filters aside: the caller matches the subject (retention.py)."""
        d = self.delivery
        return (
            seq >= d.next_seq
            or seq in self.ledger.pending
            or seq in self.ledger.dead
            or (bool(d.lps) and seq in d.lps)
        )

    def holds(self, seq: int) -> bool:
        """A delivery of `seq` is pending here, or was given up on (a dead letter)."""
        return seq in self.ledger.pending or seq in self.ledger.dead

    def paused(self, now_ns: int) -> bool:
        return self.pacer.paused(now_ns)

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

    def check_invariants(self) -> None:
        self.ledger.check_invariants()

    def _finish(self, out: list[Action]) -> list[Action]:
        self.ledger.check_limit()
        return out

    # ------------------------------------------------------------------ inputs

    def message_stored(self, seq: int, now_ns: int) -> list[Action]:
        """A message was stored in the stream (it may or may not match the filter)."""
        self.delivery.np = None
        return self._finish(self.delivery.dispatch(now_ns))

    def stored_while_idle(self, now_ns: int) -> bool:
        """`message_stored` for a pull consumer with no request waiting, which has nobody
        to deliver to: its cached pending count goes stale and the pause is noted, as
        `dispatch` notes them, and that is all (no action, nothing persisted changes).
        True if so; False (nothing done): `message_stored` it is. A publish reaches every
        matching consumer, and most pull consumers are idle between their fetches."""
        d = self.delivery
        cfg = d.cfg
        if d.waiting or cfg.deliver_subject:  # `is_push`, read without its call: every publish
            return False
        d.np = None
        until = cfg.paused_until_ns  # `Pacer.paused`, likewise
        self.pacer.held_until = until if until is not None and now_ns < until else None
        return True

    def messages_removed(self, seqs: Iterable[int]) -> None:
        """Messages left the stream (limits, purge, delete): never redeliver them."""
        gone = set(seqs)
        self.ledger.forget(gone)
        d = self.delivery
        if gone and d.lps:
            d.lps = deque(s for s in d.lps if s not in gone)
        d.np = None

    def stream_starts_at(self, first_seq: int) -> None:
        """At start: deliveries still pending of messages below the stream's first
        sequence (max_age expired them while the server was down, before the consumer
        was restored) are dropped as nats-server's `checkPending` drops them when a
        consumer starts, without an advisory or an ack time: the floor moves up to the
        highest (consumer, stream) sequences dropped, or to `delivered` once nothing is
        pending."""
        if self.ledger.drop_below(first_seq):
            self.delivery.np = None

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
           * if the in-memory ack floor (pending.py `mem_floor`) is below `start_seq`,
             what is pending below it is dropped, and so is, for a consumer `wider` than
             a filtered purge, what is pending above whose message is gone. Each drop
             acknowledges the delivery in nats-server's consumer store (`UpdateAcks`:
             `move_store_floor`); the in-memory floor becomes (highest consumer
             sequence dropped, `start_seq - 1`);
           * with nothing pending the in-memory floor is `delivered`;
           * the in-memory floor is written to the store, and replaces its floor unless
             that one's stream sequence is higher by then. So the reported floor may end
             above a delivery still pending, which `move_store_floor` then leaves alone;
           * the redelivery queue is emptied (nats-server keeps only its entries at or
             above the position, which none are): a queued message still pending is
             redelivered when its ack wait, counted from its last delivery, runs out;
             one queued by an ack wait that ran out already gets one more ack wait.
           Nothing is dispatched for it (nats-server signals no consumer) and no retention
           action results: the messages dropped are gone from the stream.
        """
        ledger = self.ledger
        self.delivery.np = None
        term: Pending | None = None
        if removed_seq:
            term = ledger.pending.get(removed_seq)
            if term is None and ledger.dead.pop(removed_seq, None) is not None:
                ledger.last_ack_ns = now_ns  # nats-server "acks" it in its store
        elif dead_below and ledger.dead:
            for s in [s for s in ledger.dead if s < dead_below]:
                del ledger.dead[s]
        if start_seq is not None:
            d = self.delivery
            if d.next_seq < start_seq:
                d.next_seq = start_seq
                ledger.delivered_stream_seq = max(ledger.delivered_stream_seq, start_seq - 1)
            gone_from_stream = (lambda s: d.src.load(s) is None) if wider else None
            ledger.purge_floors(start_seq, now_ns, gone_from_stream)
        if term is None:
            return []
        out: list[Action] = []
        ledger.terminate_removed(removed_seq, term, now_ns, out)
        return self._finish(out + self.delivery.dispatch(now_ns))

    def set_push_interest(self, interest: bool, now_ns: int) -> list[Action]:
        """Push consumers deliver only while their deliver subject has a subscriber."""
        self.delivery.push_interest = interest
        self.flow.interest(interest, now_ns)
        return self._finish(self.delivery.dispatch(now_ns) if interest else [])

    def flow_control_response(
        self, subject: str, now_ns: int, last: tuple[int, int] = (0, 0)
    ) -> list[Action]:
        """The client answered a flow-control request: the bytes it covered are confirmed
        and the window doubles (up to its maximum). Answers to older requests are ignored.
        Under the `flow_control` ack policy the answer's `last` (consumer, stream)
        sequences, its `Nats-Last-Consumer`/`Nats-Last-Stream`, are an ack of everything
        up to them (nats-server's `processFlowControl`: a stream sequence of 0 acks
        nothing; the consumer sequence may be 0, an answer to a request with no
        deliveries before it)."""
        if not self.flow.answered(subject):
            return []
        out: list[Action] = []
        last_c, last_s = last
        if self.cfg.ack_policy is AckPolicy.FLOW_CONTROL and last_s > 0:
            last_c = max(last_c, 0)
            last_s = self._catch_up(last_s, last_c, out)
            out += self.ledger.ack(last_s, last_c, now_ns)
        return self._finish(out + self.delivery.dispatch(now_ns))

    def _catch_up(self, last_s: int, last_c: int, out: list[Action]) -> int:
        """A flow-control answer that acknowledges past what this consumer delivered: its
        link stored more of the stream than the consumer's saved state says was delivered
        (the state is saved after deliveries, so a crash can lose its newest; the link
        resumes after what it stored, ADR-60). As nats-server's `processAckMsg` takes such
        an ack from a flow-controlled consumer, the floor goes there; the consumer also
        goes on after it, and the messages it skips are released (a workqueue's go)
        rather than delivered again for the link to drop. The sequence acknowledged up
        to is returned: `last_s`, but never past the last stored message before it, so
        that an answer naming a sequence the stream never had skips nothing to come."""
        d, ledger = self.delivery, self.ledger
        if last_s < d.next_seq:
            return last_s
        release: type[RemoveMessage | Acked] | None = None
        if self.cfg.retention is Retention.WORKQUEUE:
            release = RemoveMessage
        elif self.cfg.retention is Retention.INTEREST:
            release = Acked
        upto = d.next_seq - 1
        after = upto
        while after < last_s:
            batch = d.src.next_batch(after, CATCH_UP_CHUNK)
            for m in batch:
                if m.seq > last_s:
                    break
                if release is not None:
                    out.append(release(m.seq))
                upto = m.seq
            if len(batch) < CATCH_UP_CHUNK or batch[-1].seq >= last_s:
                break
            after = batch[-1].seq
        d.next_seq = upto + 1
        d.ahead.clear()
        d.np = None
        ledger.delivered_stream_seq = max(ledger.delivered_stream_seq, upto)
        ledger.delivered_consumer_seq = max(ledger.delivered_consumer_seq, last_c)
        return upto

    def dispatch(self, now_ns: int, cap: int = 0) -> list[Action]:
        """Deliver what can be delivered now (after inputs given `dispatch=False`); a push
        consumer at most `cap` messages (0: no cap; `Delivery.capped` says if it stopped
        there)."""
        return self._finish(self.delivery.dispatch(now_ns, cap))

    def settings_changed(self, now_ns: int) -> list[Action]:
        """`cfg` was replaced (an update or a pause/resume): deliver what the new settings
        allow now."""
        return self._finish(self.delivery.dispatch(now_ns))

    def source_changed(self, source: MessageSource, now_ns: int) -> list[Action]:
        """The filters changed (an update): read through `source` from the same position
        on, with the pending count taken again; deliver what it allows now."""
        self.delivery.src = source
        self.delivery.np = None
        return self._finish(self.delivery.dispatch(now_ns))

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
        group: PullGroup | None = None,
        dispatch: bool = True,
    ) -> list[Action]:
        """A pull request; with `dispatch=False` it is only queued (or refused), its
        deliveries left to a later `dispatch()`."""
        batch = max(batch, 1)
        err = admission_error(self.cfg, reply, batch, expires_ns, max_bytes, idle_heartbeat_ns)
        if err is None and group is not None:
            err = request_error(self.cfg, reply, group)
            priority = self.delivery.priority
            if err is None and priority is not None:
                err = priority.admit(reply, group, now_ns)
        if err is not None:
            return [err]
        waiting = self.delivery.waiting
        if no_wait:
            # nats-server: 404 only with nothing available and no expiry; 408 when the
            # requests already waiting want more than is available.
            available = self.num_pending() + len(self.ledger.rdq)
            if available == 0 and expires_ns <= 0:
                return [Status(reply, 404, "No Messages")]
            if 0 < available < sum(w.batch_left for w in waiting):
                return [Status(reply, 408, "Requests Pending")]
        if self.cfg.max_waiting > 0 and len(waiting) >= self.cfg.max_waiting:
            return [] if idle_heartbeat_ns > 0 else [Status(reply, 409, "Exceeded MaxWaiting")]
        hb = idle_heartbeat_ns
        w = WaitingRequest(
            reply=reply,
            batch_left=batch,
            expires_at_ns=now_ns + expires_ns if expires_ns > 0 else None,
            no_wait=no_wait,
            max_bytes=max_bytes,
            bytes_left=max_bytes,
            heartbeat_ns=hb,
            next_heartbeat_ns=now_ns + hb if hb > 0 else None,
            group=group,
            pin_id=group.id if group is not None else "",
        )
        priority = self.delivery.priority
        if priority is None:
            waiting.append(w)
        else:
            priority.queue(waiting, w)
        return self._finish(self.delivery.dispatch(now_ns)) if dispatch else []

    def pull(
        self, reply: str, req: PullRequest, now_ns: int, *, dispatch: bool = True
    ) -> list[Action]:
        return self.pull_request(
            reply,
            now_ns,
            batch=req.batch,
            expires_ns=req.expires_ns,
            no_wait=req.no_wait,
            max_bytes=req.max_bytes,
            idle_heartbeat_ns=req.idle_heartbeat_ns,
            group=req.group,
            dispatch=dispatch,
        )

    def unpin(self, group: str, now_ns: int) -> list[Action]:
        """CONSUMER.UNPIN of one of the consumer's groups (checked by the caller): the pin
        is dropped, with an unpinned advisory, and the next request is pinned."""
        priority = self.delivery.priority
        if priority is None:
            return []
        return self._finish(priority.unpin(group, "admin") + self.delivery.dispatch(now_ns))

    def reset(self, seq: int) -> None:
        """CONSUMER.RESET to stream sequence `seq` (validated by the caller), as nats-server's
        `resetLocalStartingSeq`: every message from `seq` on is to come (again), what was
        pending, queued for redelivery or given up on is forgotten with its delivery
        counts, consumer sequences start again at 1, and the ack floor and `delivered` sit
        right below `seq`. Waiting pull requests stay; the owner calls `dispatch()` to
        serve them (after answering the reset, whose answer shows the state it made)."""
        d = self.delivery
        d.lps.clear()
        d.ahead.clear()
        d.next_seq = max(seq, 1)
        d.np = None
        d.last_delivered_ns = 0
        self.ledger.reset(d.next_seq - 1)
        self.pacer.replay_prev = None

    def consumer_deleted(self) -> list[Action]:
        """The consumer is going away: every waiting pull request gets `409 Consumer Deleted`."""
        waiting = self.delivery.waiting
        out: list[Action] = [Status(w.reply, 409, "Consumer Deleted") for w in waiting]
        waiting.clear()
        return out

    def server_shutdown(self) -> list[Action]:
        """The server is stopping: every waiting pull request ends with `409 Server
        Shutdown` and what it still wanted (`Nats-Pending-Messages`/`-Bytes`), so that the
        client asks again once reconnected. As nats-server's `signalPullConsumers`: one
        answer per reply subject, with the last request's counts."""
        waiting = self.delivery.waiting
        last = {w.reply: w for w in waiting}
        waiting.clear()
        return [w.pending_status(409, "Server Shutdown") for w in last.values()]

    def drop_unheard_requests(self) -> None:
        """Drop every waiting request whose reply subject nobody listens to any more (a
        client gave up on a fetch), as nats-server's `processWaiting` does on its timer
        and for consumer info (which counts only live requests). Deliveries check the
        request they go to (`Delivery.next_request`)."""
        has_interest = self.delivery.has_interest
        waiting = self.delivery.waiting
        if not all(has_interest(w.reply) for w in waiting):
            heard = [w for w in waiting if has_interest(w.reply)]
            waiting.clear()
            waiting.extend(heard)

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
        ledger = self.ledger
        out: list[Action] = []
        p = ledger.pending.get(stream_seq) if self.cfg.tracks_acks else None
        if kind in (AckKind.ACK, AckKind.NXT):
            out += ledger.ack(stream_seq, consumer_seq, now_ns)
        elif kind is AckKind.TERM:
            out += ledger.ack(stream_seq, consumer_seq, now_ns)
            extra = {"reason": reason} if reason else {}
            out.append(
                ledger.advisory(MSG_TERMINATED, stream_seq, deliveries, consumer_seq, **extra)
            )
        elif p is None:
            pass
        elif kind is AckKind.NAK:
            if ledger.floor_c < consumer_seq <= ledger.delivered_consumer_seq:
                out.append(ledger.advisory(MSG_NAKED, stream_seq, deliveries, consumer_seq))
                ledger.rdq.pop(stream_seq, None)
                if delay_ns is not None and delay_ns > 0:
                    ledger.arm(stream_seq, p, now_ns + delay_ns)
                else:
                    ledger.queue(stream_seq, p)  # max_deliver is checked when it comes up
        elif kind is AckKind.WPI:
            ledger.rdq.pop(stream_seq, None)
            ledger.arm(stream_seq, p, now_ns + self.cfg.ack_wait_for(p.deliveries))
        if dispatch:
            out += self.delivery.dispatch(now_ns)
        if kind is AckKind.NXT and reply is not None:
            req = next_request or PullRequest()
            out += self.pull(reply, req, now_ns)
        return self._finish(out)

    def ack_explicit_run(self, stream_seqs: list[int], now_ns: int) -> list[Action]:
        """`ack(stream_seq, _, AckKind.ACK, now_ns, dispatch=False)` of each of
        `stream_seqs` in turn under `ack_policy: explicit`: the hot path of plain acks, a
        read chunk's at a time, without the verb dispatch; the owner calls `dispatch()`
        later. (Explicit acks need no consumer sequence: the pending entry has it.)"""
        assert self.cfg.ack_policy is AckPolicy.EXPLICIT
        ledger = self.ledger
        delivered = ledger.delivered_stream_seq
        out: list[Action] = []
        if stream_seqs and max(stream_seqs) > delivered:  # acks of what was not delivered yet
            stream_seqs = [s for s in stream_seqs if s <= delivered]  # are ignored
        ledger.ack_explicit_run(stream_seqs, now_ns, out)
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
        return stream_seq <= self.ledger.delivered_stream_seq

    def tick(self, now_ns: int) -> list[Action]:
        """Time passed: ack deadlines, request expiry, then deliveries and heartbeats."""
        out = self.ledger.due(now_ns)
        if (priority := self.delivery.priority) is not None:
            out += priority.due(now_ns)
        waiting = self.delivery.waiting
        for w in [w for w in waiting if w.expires_at_ns is not None]:
            if w.expires_at_ns is not None and now_ns >= w.expires_at_ns:
                waiting.remove(w)
                out.append(w.pending_status(408, "Request Timeout"))
        self.drop_unheard_requests()  # no heartbeats into the void
        out += self.delivery.dispatch(now_ns)
        delivered = (self.ledger.delivered_consumer_seq, self.ledger.delivered_stream_seq)
        self.flow.heartbeats(now_ns, delivered, waiting, out, len(self.ledger.pending))
        return self._finish(out)

    def next_deadline(self) -> int | None:
        """When `tick` next has something to do, or None."""
        # The minimum of the candidates that are set, without building a list (per input).
        at = self.ledger.deadlines.earliest(self.ledger.pending)
        for w in self.delivery.waiting:
            t = w.expires_at_ns
            if t is not None and (at is None or t < at):
                at = t
            t = w.next_heartbeat_ns
            if t is not None and (at is None or t < at):
                at = t
        t = self.flow.hb_at
        if t is not None and (at is None or t < at):
            at = t
        t = self.pacer.held_until
        if t is not None and (at is None or t < at):
            at = t
        if (priority := self.delivery.priority) is not None:
            t = priority.pin_expires_ns
            if t is not None and (at is None or t < at):
                at = t
        return at

    # ------------------------------------------------------------------ persistence

    def persist_mark(self) -> tuple[int, ...]:
        """Differs whenever `snapshot()` would: every addition to `pending` comes with a
        delivery (a new consumer sequence), every removal shrinks it."""
        ledger = self.ledger
        return (
            ledger.delivered_consumer_seq,
            ledger.delivered_stream_seq,
            len(ledger.pending),
            self.delivery.next_seq,
            len(self.delivery.lps),
            len(ledger.dead),
            ledger.floor_c,
            ledger.floor_s,
        )

    def snapshot(self) -> dict[str, Any]:
        ledger = self.ledger.snapshot()
        return {
            "delivered": ledger["delivered"],
            "ack_floor": ledger["ack_floor"],
            "next_seq": self.delivery.next_seq,
            "last_per_subject": list(self.delivery.lps),
            "pending": ledger["pending"],
            "dead": ledger["dead"],
        }

    def restore(self, data: dict[str, Any], now_ns: int) -> None:
        """Replace the state with a snapshot; every pending message gets a fresh ack
        deadline from `now_ns`. Waiting pull requests are not persisted."""
        d = self.delivery
        d.next_seq = int(data["next_seq"])
        d.lps = deque(int(s) for s in data.get("last_per_subject", []))
        d.waiting.clear()
        d.np = None
        self.ledger.restore(data, now_ns)
        self.check_invariants()
