"""The input side of one consumer: its subscriptions, one timer, and its lifecycle.

A `ConsumerRunner` wraps a pure `ConsumerState` (state.py), feeds it what arrives and
hands the actions it gets back to its `ActionExecutor` (executor.py), which carries them
out, reports changes for persistence and settles once per loop turn. What arrives:

* `$JS.API.CONSUMER.MSG.NEXT.<S>.<C>` (pull requests; the reply is the delivery inbox);
* `$JS.ACK.<S>.<C>.>` (acks; a reply on the ack message gets an empty answer); runs of
  plain acks, as the parser reads them, take a short path (`_on_ack_run`);
* `$JS.FC.<S>.<C>.>` (flow-control replies of push consumers that ask for them);
* `message_stored()` and the removals and purges its stream reports through the
  consumer registry (`registry.py`);
* one asyncio timer armed at `ConsumerState.next_deadline()` (ack deadlines, request
  expiry, heartbeats), at the end of a pause and, for ephemerals, at the inactivity
  deadline.

Push consumers (a `deliver_subject`) deliver to that subject while some subscription
matches it (wire reference §6.6): the runner watches the subject with
`Router.watch_interest` and feeds `ConsumerState.set_push_interest` when interest comes or
goes; the first check is deferred to the next loop iteration so that a restored snapshot
is in place and the create response goes out before any delivery. Persistence belongs
to the consumer's files (`files.py`, given by the registry): after every input that
changed the persisted part of the state `on_change(runner, changed, waiter)` is called;
an ack with a reply subject (ack_sync) passes a `waiter` that publishes the empty answer,
called once the snapshot holding that ack is durable (at once for consumers that are not
persisted).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import itertools
import logging
from collections.abc import Callable, Iterable
from typing import Any, cast

from brook.jetstream import versioning
from brook.jetstream.advisories import Advisories
from brook.jetstream.consumer.acks import (
    PLAIN_ACK_BODIES,
    AckKind,
    PullRequestError,
    ack_run_stream_seqs,
    ack_sequences,
    parse_ack_payload,
    parse_pull_request,
)
from brook.jetstream.consumer.actions import Action, Status, pause_advisory
from brook.jetstream.consumer.config import (
    AckPolicy,
    ConsumerSettings,
    PriorityPolicy,
    Retention,
)
from brook.jetstream.consumer.executor import ActionExecutor, Waiter
from brook.jetstream.consumer.source import DeliverPolicy, StoreSource, resolve_start_seq
from brook.jetstream.consumer.state import ConsumerState
from brook.jetstream.models.consumer_config import ConsumerConfig
from brook.jetstream.models.consumer_json import SequenceInfo, consumer_info_to_json
from brook.jetstream.stream import Stream
from brook.limits import MAX_PAYLOAD_BYTES
from brook.protocol.headers import raw_value
from brook.routing.internal import InternalClient
from brook.routing.sublist import Subscription
from brook.subjects import subset_match

log = logging.getLogger("brook.consumer")


def settings_for(config: ConsumerConfig, stream: Stream) -> ConsumerSettings:
    return ConsumerSettings(
        stream=stream.name,
        name=config.name,
        ack_policy=AckPolicy(config.ack_policy),
        ack_wait_ns=config.ack_wait,
        backoff_ns=tuple(config.backoff),
        max_deliver=config.max_deliver,
        max_ack_pending=config.max_ack_pending,
        max_waiting=config.max_waiting,
        max_batch=config.max_batch,
        max_expires_ns=config.max_expires,
        max_bytes=config.max_bytes,
        deliver_subject=config.deliver_subject or None,
        idle_heartbeat_ns=config.idle_heartbeat,
        retention=Retention(stream.config.retention),
        flow_control=config.flow_control,
        headers_only=config.headers_only,
        replay_original=config.replay_policy == "original",
        rate_limit_bps=config.rate_limit_bps,
        rate_burst_bytes=max_msg_size
        if (max_msg_size := stream.config.max_msg_size) > 0
        else MAX_PAYLOAD_BYTES,
        sample_percent=_sample_percent(config.sample_freq),
        paused_until_ns=config.pause_until,
        priority_policy=PriorityPolicy(config.priority_policy),
        priority_groups=tuple(config.priority_groups),
        pinned_ttl_ns=config.priority_timeout,
    )


def _sample_percent(sample_freq: str) -> int:
    """`sample_freq` ("30%" or "30", validated at create) as a percentage, 0 when unset."""
    text = sample_freq.removesuffix("%")
    return min(int(text), 100) if text else 0


@dataclasses.dataclass(frozen=True, slots=True)
class PurgePoint:
    """The stream after a purge, as each consumer's move needs it (`stream_purged`): its
    first and last sequence, the first sequence left on the purged subject (0: none); and
    how nats-server's store reported the removal: the one message removed on its own, or
    else whether a batch was removed (`registry.py`, `purged`)."""

    first: int
    last: int
    first_matching: int = 0
    removed: int = 0
    batch: bool = False


class ConsumerRunner:
    """One consumer's input side and lifecycle (the module docstring); `executor` is its
    output side."""

    def __init__(
        self,
        stream: Stream,
        config: ConsumerConfig,
        *,
        internal: InternalClient,
        now_ns: Callable[[], int],
        loop: asyncio.AbstractEventLoop | None,
        created_ns: int,
        on_inactive: Callable[[ConsumerRunner], None] | None = None,
        on_change: Callable[[ConsumerRunner, bool, Waiter | None], None] | None = None,
        advisories: Advisories | None = None,
    ) -> None:
        self.stream = stream
        self.config = config
        self.name = config.name
        self.created_ns = created_ns
        self._internal = internal
        self._now_ns = now_ns
        self._loop = loop
        self._on_inactive = on_inactive
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: int | None = None
        self._last_activity_ns = created_ns
        self.state = self._new_state()
        self.executor = ActionExecutor(
            self.state,
            stream,
            internal,
            now_ns=now_ns,
            loop=loop,
            rearm=self._rearm,
            on_change=None if on_change is None else functools.partial(on_change, self),
            sourcing=config.direct or config.sourcing,
            advisories=advisories,
        )
        # Bound once: every input ends in one of these.
        self._run = self.executor.run
        self._execute = self.executor.execute
        self._changed = self.executor.changed
        self._settle_later = self.executor.settle_later
        self._ack_memo = self.executor.ack_memo  # changed in place, never rebound
        prefix = f"{stream.name}.{self.name}"
        self._subs: list[Subscription] = [
            internal.subscribe(f"$JS.API.CONSUMER.MSG.NEXT.{prefix}", self._on_next),
            # Every ack subject is unique (it carries the sequences): not worth caching.
            internal.subscribe(
                f"$JS.ACK.{prefix}.>",
                self._on_ack,
                cache_results=False,
                each_handler=self._on_ack_run,
            ),
        ]
        if config.flow_control:
            self._subs.append(internal.subscribe(f"$JS.FC.{prefix}.>", self._on_flow_control))
        self._was_paused = self.paused
        self._push_watch: bytes | None = None
        self._push_check: asyncio.Handle | None = None
        self._watch_push()
        self._rearm()

    # ------------------------------------------------------------------ push interest

    def _watch_push(self) -> None:
        subject = self.config.deliver_subject
        if not subject:
            return
        self._push_watch = subject.encode()
        self._internal.router.watch_interest(self._push_watch, self._interest_changed)
        if self._loop is not None:
            self._push_check = self._loop.call_soon(self._first_interest_check)
        else:
            self._interest_changed()

    def _unwatch_push(self) -> None:
        if self._push_check is not None:
            self._push_check.cancel()
            self._push_check = None
        if self._push_watch is not None:
            self._internal.router.unwatch_interest(self._push_watch, self._interest_changed)
            self._push_watch = None

    def _first_interest_check(self) -> None:
        self._push_check = None
        self._interest_changed()

    def _interest_changed(self) -> None:
        if self._push_watch is None or self._push_check is not None or not self._subs:
            return
        interest = self._internal.router.has_interest(self._push_watch)
        if interest != self.push_bound:
            self._last_activity_ns = self._now_ns()
            self._run(self.state.set_push_interest(interest, self._now_ns()))

    @property
    def push_bound(self) -> bool:
        """A push consumer whose deliver subject currently has a subscriber. Until the
        first check (deferred to the next loop turn) the router is asked: nats-server's
        create reply already says `push_bound` when the subscriber came first (as a
        mirror's or source's does, ADR 0020)."""
        if self._push_check is not None and self._push_watch is not None:
            return self._internal.router.has_interest(self._push_watch)
        return self.state.push_interest

    def _new_state(self) -> ConsumerState:
        c = self.config
        store = self.stream.store
        source = StoreSource(store, c.filters)
        st = store.state()
        policy = DeliverPolicy(c.deliver_policy)
        start = resolve_start_seq(
            policy,
            source,
            stream_first_seq=st.first_seq,
            stream_last_seq=st.last_seq,
            opt_start_seq=c.opt_start_seq,
            opt_start_time_ns=c.opt_start_time or 0,
        )
        lps: list[int] = []
        if policy is DeliverPolicy.LAST_PER_SUBJECT:
            for f in c.filters or [">"]:
                lps.extend(store.last_seqs(f))
        router = self._internal.router
        return ConsumerState(
            settings_for(c, self.stream),
            source,
            start_seq=start,
            last_per_subject_seqs=sorted(set(lps)),
            has_interest=lambda reply: router.has_interest(reply.encode()),
        )

    # ------------------------------------------------------------------ lifecycle

    def update(self, config: ConsumerConfig) -> None:
        """An in-place update (the fields that may change): new limits apply from now, new
        filters from the consumer's position on (as nats-server: what it passed stays
        passed, and its pending count is counted again through the new filters)."""
        old = self.config
        self.config = config
        self.state.cfg = settings = settings_for(config, self.stream)
        self.executor.configure(settings)
        if config.deliver_subject != old.deliver_subject:
            self._unwatch_push()
            if self.push_bound:
                self.state.set_push_interest(False, self._now_ns())
            self._watch_push()
        now = self._now_ns()
        if config.filters != old.filters:
            source = StoreSource(self.stream.store, config.filters)
            self._run(self.state.source_changed(source, now))
        else:
            self._run(self.state.settings_changed(now))

    def pause(self, until_ns: int | None) -> None:
        """CONSUMER.PAUSE: no deliveries before `until_ns` (None resumes now); announced by a
        `CONSUMER.PAUSE` advisory, as is the automatic resume when the time comes."""
        self.update(dataclasses.replace(self.config, pause_until=until_ns))
        self._was_paused = self.paused
        self._pause_advisory()

    @property
    def paused(self) -> bool:
        return self.state.paused(self._now_ns())

    def _pause_advisory(self) -> None:
        until = self.config.pause_until
        self._execute(
            [pause_advisory(self.stream.name, self.name, paused=self.paused, until_ns=until)]
        )

    def unpin(self, group: str) -> None:
        """CONSUMER.UNPIN of `group`, one of the consumer's (`ConsumerState.unpin`)."""
        now = self._last_activity_ns = self._now_ns()
        self._run(self.state.unpin(group, now))

    def reset(self, seq: int) -> None:
        """CONSUMER.RESET to stream sequence `seq` (`ConsumerState.reset`). Deliveries from
        there (to waiting pull requests, or a push consumer's subscriber) follow at the end
        of this loop turn, after the answer that shows the consumer as reset."""
        self._ack_memo.clear()  # a memo of subjects delivered before: no longer of use
        self._last_activity_ns = self._now_ns()
        self.state.reset(seq)
        self._changed()
        self._settle_later(dispatch=True)

    def restore(self, snapshot: dict[str, Any]) -> None:
        """Replace the state with a persisted snapshot (at start, before any input)."""
        self.state.restore(snapshot, self._now_ns())
        self.executor.restored()
        self._rearm()

    def server_shutdown(self) -> None:
        """The server is stopping (before clients are closed): answer the waiting pull
        requests (`ConsumerState.server_shutdown`)."""
        self._execute(self.state.server_shutdown())

    def stop(self, *, notify: bool = True) -> None:
        """Unsubscribe and cancel the timer; waiting requests get `409 Consumer Deleted`."""
        self._unwatch_push()
        for sub in self._subs:
            self._internal.unsubscribe(sub)
        self._subs = []
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.executor.stop()
        deleted = self.state.consumer_deleted()
        if notify:
            self._execute(deleted)

    # ------------------------------------------------------------------ inputs

    def message_stored(self, seq: int) -> None:
        now = self._now_ns()
        pacer = self.state.pacer
        held = pacer.held_until
        if self.state.stored_while_idle(now):
            # Of the timer's inputs only the pause may have moved (a pause that ended):
            # then it is re-armed at the end of the turn, as after `_run`.
            if pacer.held_until != held:
                self._settle_later()
            return
        self._run(self.state.message_stored(seq, now))

    def messages_changed(self, removed: Iterable[int] = ()) -> None:
        """Messages left the stream without a report (`stream_removed`, `stream_purged`
        are the reported removals): forget cached counts. `removed` names those the
        consumer may hold as pending, never redelivered (lost in a crash, at start)."""
        self.state.messages_removed(removed)
        self._changed()

    def stream_starts_at(self, first_seq: int) -> None:
        """At start, after `restore`: the stream's first message is `first_seq`
        (`ConsumerState.stream_starts_at`)."""
        self.state.stream_starts_at(first_seq)
        self._changed()

    def stream_removed(self, seqs: list[int]) -> None:
        """The stream removed `seqs` on their own, in this order
        (`ConsumerState.message_removed`): counts are refreshed, and each one this
        consumer holds (pending, or given up on) is terminated or forgotten."""
        state = self.state
        now = self._now_ns()
        held = False
        actions: list[Action] = []
        for seq in seqs:
            held = held or state.holds(seq)
            actions += state.message_removed(seq, now)
        if held:
            self._run(actions)

    def stream_purged(self, subject: str, point: PurgePoint) -> None:
        """The stream was purged of `subject`'s messages (all when empty). Which consumers
        move and from where, as nats-server 2.15 decides (observed: with several filters it
        differs from its `purgeLocked` source): all filters within `subject` (or no
        subject): from the first message left on `subject` (none: past the last); else a
        filter within `subject`, `subject` within a filter, or no filters: from the
        stream's first message, the pending ones checked one by one ("wider"); else the
        consumer stays (`ConsumerState.stream_purged`)."""
        filters = [f.encode() for f in self.config.filters]
        purged = subject.encode()
        start: int | None = None
        wider = False
        if not subject:
            start = point.first
        elif filters and all(subset_match(purged, f) for f in filters):
            start = point.first_matching or point.last + 1
        elif not filters or any(
            subset_match(purged, f) or subset_match(f, purged) for f in filters
        ):
            start, wider = point.first, True
        actions = self.state.stream_purged(
            start,
            self._now_ns(),
            wider=wider,
            removed_seq=point.removed,
            dead_below=point.first if point.batch else 0,
        )
        self._run(actions)

    def _on_next(
        self, subject: bytes, reply: bytes | None, header: bytes | None, payload: bytes
    ) -> bool | None:
        if reply is None:
            return None
        now = self._now_ns()
        self._last_activity_ns = now
        inbox = reply.decode("utf-8", "surrogateescape")
        if self.state.cfg.is_push:  # whatever the payload says, as nats-server
            self._run([Status(inbox, 409, "Consumer is push based")])
            return None
        if versioning.refuses(header):
            self._run([Status(inbox, *versioning.REQUIRED_API_LEVEL_STATUS)])
            return None
        try:
            req = parse_pull_request(payload)
        except PullRequestError as err:
            self._run([Status(inbox, 400, str(err))])
            return None
        if self.state.cfg.priority_policy is PriorityPolicy.PRIORITIZED:
            # As nats-server, whose delivery loop runs after the requests that came
            # together are queued: the lowest priority among them is served first.
            self._run(self.state.pull(inbox, req, now, dispatch=False))
            self._settle_later(dispatch=True)
        else:
            self._run(self.state.pull(inbox, req, now))
        return None

    def _on_ack_run(self, subjects: list[bytes], payload: bytes) -> None:
        """`_on_ack(subject, None, None, payload)` for each of a run of no-reply acks as
        the parser read them. Plain ones (the common case) are kept short: the deliveries
        they allow, the timer and persistence are seen to once per loop turn, for all the
        acks of a read chunk (`ActionExecutor.settle`)."""
        seqs: list[int] | None = None
        if payload in PLAIN_ACK_BODIES and self.executor.plain_acks:
            memo = self._ack_memo
            known = list(map(memo.pop, subjects, itertools.repeat(None)))
            seqs = ack_run_stream_seqs(subjects) if None in known else cast(list[int], known)
        if seqs is None:  # another ack, a subject of another form, or no run to make
            for subject in subjects:
                self._on_ack(subject, None, None, payload)
            return
        self._apply_plain_acks(seqs)

    def _apply_plain_acks(self, seqs: list[int]) -> None:
        """Stream sequences of plain explicit acks; the rest is left to the settle."""
        now = self._last_activity_ns = self._now_ns()
        actions = self.state.ack_explicit_run(seqs, now)
        if actions:
            self._execute(actions)
        self._settle_later(dispatch=True)

    def _on_ack(
        self, subject: bytes, reply: bytes | None, header: bytes | None, payload: bytes
    ) -> bool | None:
        if reply is None and payload in PLAIN_ACK_BODIES and self.executor.plain_acks:
            seq = self._ack_memo.pop(subject, None)
            if seq is None:
                seqs = ack_sequences(subject)
                seq = None if seqs is None else seqs[1]
            if seq is not None:
                self._apply_plain_acks([seq])
                return None
        seqs = ack_sequences(subject)
        ack = parse_ack_payload(payload)
        now = self._now_ns()
        self._last_activity_ns = now
        if seqs is not None and ack is not None:
            delivered, stream_seq, consumer_seq = seqs
            inbox = reply.decode("utf-8", "surrogateescape") if reply is not None else None
            if not self.state.acceptable(stream_seq):
                return None  # not delivered yet: ignored, and an ack_sync gets no answer
            # A consumer at max_ack_pending delivers one message per ack: the acks of one
            # read chunk are applied one by one, their deliveries made together once.
            batch = ack.kind is AckKind.ACK and self._loop is not None
            actions = self.state.ack_payload(
                stream_seq, consumer_seq, ack, now, inbox, delivered, dispatch=not batch
            )
            if batch:
                self._settle_later(dispatch=True)
            if ack.kind is AckKind.NXT:
                self._run(actions)
                return None
        else:
            actions = []
        if reply is None:
            self._run(actions)
            return None

        def answer() -> None:
            self._internal.publish(reply, b"")  # ack_sync: an empty answer

        self._run(actions, waiter=answer)
        return None

    def _on_flow_control(
        self, subject: bytes, reply: bytes | None, header: bytes | None, payload: bytes
    ) -> bool | None:
        now = self._now_ns()
        self._last_activity_ns = now
        text = subject.decode("utf-8", "surrogateescape")
        last = (0, 0)
        if header and self.state.cfg.ack_policy is AckPolicy.FLOW_CONTROL:
            last = (
                _header_int(header, b"Nats-Last-Consumer"),
                _header_int(header, b"Nats-Last-Stream"),
            )
        self._run(self.state.flow_control_response(text, now, last))
        return None

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = None
        now = self._now_ns()
        if self._inactive(now) and self._on_inactive is not None:
            self._on_inactive(self)
            return
        self._run(self.state.tick(now))
        if self._was_paused and not self.paused:
            self._was_paused = False
            self._pause_advisory()

    # ------------------------------------------------------------------ timer and inactivity

    def _gc_deadline(self) -> int | None:
        """Ephemerals go after `inactive_threshold` with nothing waiting or unacked."""
        c = self.config
        if c.durable_name and not c.inactive_threshold:
            return None
        if c.inactive_threshold <= 0 or self._on_inactive is None:
            return None
        if self.state.num_waiting or self.state.num_ack_pending or self.push_bound:
            return None
        return self._last_activity_ns + c.inactive_threshold

    def _inactive(self, now: int) -> bool:
        at = self._gc_deadline()
        return at is not None and now >= at

    def _rearm(self) -> None:
        """The one timer at the earliest of the state's next deadline, the inactivity
        deadline and the end of a pause (after every settle, `ActionExecutor.settle`)."""
        if self._loop is None or not self._subs:
            return
        at = self.state.next_deadline() or None  # as before: an unset or 0 time is no time
        gc = self._gc_deadline()
        if gc and (at is None or gc < at):
            at = gc
        resume = self.config.pause_until if self._was_paused else None
        if resume and (at is None or resume < at):
            at = resume
        if at == self._timer_at:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = at
        if at is not None:
            delay_s = max(at - self._now_ns(), 0) / 1e9
            self._timer = self._loop.call_later(delay_s, self._on_timer)

    # ------------------------------------------------------------------ info

    def pause_remaining_ns(self) -> int:
        until = self.config.pause_until
        return max(until - self._now_ns(), 0) if until is not None else 0

    def info(self, *, server_version: str | None, api_level: int | None) -> dict[str, Any]:
        self.state.drop_unheard_requests()
        s = self.state
        floor_c, floor_s = s.ack_floor
        return consumer_info_to_json(
            stream_name=self.stream.name,
            name=self.name,
            created_ns=self.created_ns,
            config=self.config,
            delivered=SequenceInfo(
                s.delivered_consumer_seq, s.delivered_stream_seq, s.last_delivered_ns
            ),
            ack_floor=SequenceInfo(floor_c, floor_s, s.last_ack_ns),
            num_ack_pending=s.num_ack_pending,
            num_redelivered=s.num_redelivered,
            num_waiting=s.num_waiting,
            num_pending=s.num_pending(),
            push_bound=self.push_bound,
            pause_remaining_ns=self.pause_remaining_ns(),
            priority_groups=s.priority.info() if s.priority is not None else None,
            ts_ns=self._now_ns(),
            server_version=server_version,
            api_level=api_level,
        )


def messages_stored(runners: Iterable[ConsumerRunner], seq: int) -> None:
    """`message_stored(seq)` for each of `runners` (those a stored message concerns). A
    pull consumer with no request waiting, neither paused nor holding a delivery back,
    only learns that its cached pending count is stale (`ConsumerState.stored_while_idle`
    does no more for it): done here without its calls, so that a publish costs little per
    idle consumer (most pull consumers are idle between their fetches, and a publish
    reaches every consumer whose filter matches it)."""
    for runner in runners:
        state = runner.state
        d = state.delivery
        cfg = d.cfg
        if (
            d.waiting
            or cfg.deliver_subject
            or cfg.paused_until_ns is not None
            or state.pacer.held_until is not None
        ):
            runner.message_stored(seq)
        else:
            d.np = None


def _header_int(header: bytes, name: bytes) -> int:
    """A header's value as nats-server's `parseInt64` reads it: -1 unless all digits."""
    value = raw_value(header, name)
    return int(value) if value is not None and value.isdigit() else -1
