"""The output side of one consumer: carrying out its state machine's actions, reporting its
changes for persistence, and the work deferred to the end of a loop turn.

The runner (runner.py) turns what arrives (pull requests, acks, flow-control replies,
stored and removed messages, its timer) into inputs of `ConsumerState` and hands the
actions it gets back to an `ActionExecutor`, which carries them out (actions.py):

* `Deliver`/`DeliverRun` go to routing as MSG/HMSG with the stored subject and the ack
  subject as reply; consecutive ones to the same reply go as one run
  (`Router.publish_run`), which a subscriber on a TCP connection frames in one loop; a
  mirror's or source's consumer hands each `DeliverRun` as it is to a link in this
  process when that alone listens on its deliver subject (`Router.deliver_object`), which
  reads the deliveries' numbers from it instead of parsing their ack subjects;
* `Status` is an inline-status HMSG, `Advisory` a JSON publish with the `id`,
  `timestamp` and `domain` nats-server adds (advisories.py), when someone listens;
* `RemoveMessage`/`Acked` go to the stream's retention, which decides by its current
  policy (retention.py).

A mirror's or source's consumer hands over only what is durable in its stream: the
actions of an input that delivers wait, in order, for the stream's group commit
(`Stream.when_durable`), and so does everything after them until they went. The copy
may be stored and synced at once (the link syncs its own stream before it answers flow
control); were it handed over before the origin's sync, a crash could take the message
back from the origin, its sequence would be given to the next message published, and the
copy would stand for that one: the source resumes after it, and the new message, perhaps
acknowledged to its publisher, would never be copied (nor, on a workqueue origin, kept).
A client's consumer delivers at once, as nats-server's does.

After each input the runner calls `run`, which also reports whether the persisted part
of the state changed (`on_change(changed, waiter)`: the engine saves durable consumers)
and leaves the rest to `settle`, once per loop turn: a read chunk holds hundreds of acks,
and dispatching, saving and re-arming the timer after each one was a large part of an
ack's cost. The executor is apart from the runner so that each has one job: the runner
knows subjects, interest and timers, the executor knows how actions leave.

The executor also remembers the stream sequence of each ack subject it sent (the ack
memo) while the consumer's plain acks come in runs (`plain_acks`): the runner's ack path
then finds an ack's sequence by a dict lookup instead of reading its subject.
"""

from __future__ import annotations

import asyncio
import logging
import operator
from collections import deque
from collections.abc import Callable

from brook.jetstream.advisories import Advisories
from brook.jetstream.consumer.actions import (
    Acked,
    Action,
    Advisory,
    Deliver,
    DeliverRun,
    RemoveMessage,
    Status,
)
from brook.jetstream.consumer.config import AckPolicy, ConsumerSettings
from brook.jetstream.consumer.state import ConsumerState
from brook.jetstream.stream import Stream
from brook.routing.internal import InternalClient
from brook.routing.subscriber import Message

# The ack memo's bound: at least this many subjects, or this many when max_ack_pending
# is unlimited (`ActionExecutor.configure`).
ACK_MEMO_MIN = 1024
ACK_MEMO_UNLIMITED = 65536
_SEQ = operator.attrgetter("seq")
_DELIVERIES = (Deliver, DeliverRun)
# The most messages a push consumer delivers in one settle (ADR 0064): the rest go in the
# next loop turns, each after the acks that arrived meanwhile are read, so that its client
# acks one slice while the next is framed instead of both taking turns on whole windows.
PUSH_SLICE = 256

log = logging.getLogger("brook.consumer")

Waiter = Callable[[], None]
"""Called once the change it came with is durable (an ack_sync's empty answer)."""


class ActionExecutor:
    """Carries out one consumer's actions through `internal` (its in-process client on the
    router) and reports its state's changes to `on_change` (None: nothing is persisted,
    waiters are called at once). `rearm` re-arms the runner's timer after a settle."""

    def __init__(
        self,
        state: ConsumerState,
        stream: Stream,
        internal: InternalClient,
        *,
        now_ns: Callable[[], int],
        loop: asyncio.AbstractEventLoop | None,
        rearm: Callable[[], None],
        on_change: Callable[[bool, Waiter | None], None] | None,
        sourcing: bool = False,
        advisories: Advisories | None = None,
    ) -> None:
        """`advisories`: how its advisories go (the engine's, with its domain)."""
        self._state = state
        self._stream = stream
        self._internal = internal
        self._publish = internal.publish
        self._publish_run = internal.router.publish_run
        # A mirror's or source's consumer (`direct` or `sourcing`): its runs go as they are
        # to a link in this process that alone listens on the deliver subject.
        self._deliver_object = internal.router.deliver_object if sourcing else None
        # Its inputs' actions waiting for the stream's sync, oldest first (the module
        # docstring): None for a client's consumer, which delivers at once.
        self._held: deque[list[Action]] | None = deque() if sourcing else None
        self._now_ns = now_ns
        self._advisories = advisories or Advisories(internal, now_ns=now_ns)
        self._loop = loop
        self._rearm = rearm
        self._on_change = on_change
        self._mark = state.persist_mark()  # the persisted part as last reported
        self._settle_soon: asyncio.Handle | None = None  # `settle_later`'s pending call
        self._settle_dispatch = False  # `settle` is to dispatch (deferred by acks)
        self._stopped = False
        # The stream sequence of each ack subject sent (explicit acks), until its plain
        # ack comes back. Only a memo of what the subject says (`ack_run_stream_seqs`
        # reads the same), so it is emptied whenever it outgrows `ack_memo_cap`, and then
        # acks are read. Changed in place, never rebound: the runner holds it too.
        self.ack_memo: dict[bytes, int] = {}
        self.plain_acks = False
        self.ack_memo_cap = ACK_MEMO_MIN
        self.configure(state.cfg)

    def configure(self, settings: ConsumerSettings) -> None:
        """The settings the state machine runs with (at start, and when they are replaced):
        `plain_acks`, explicit acks with a loop to settle on, so that plain ones need their
        stream sequence only (`ConsumerState.ack_explicit_run`; ack all, usually one ack
        for many messages, and ack none take the general path); and the memo's bound,
        twice what may be pending (subjects whose ack never comes back plain stay until
        the memo is emptied)."""
        self.plain_acks = self._loop is not None and settings.ack_policy is AckPolicy.EXPLICIT
        limit = settings.max_ack_pending
        self.ack_memo_cap = max(2 * limit, ACK_MEMO_MIN) if limit > 0 else ACK_MEMO_UNLIMITED

    def stop(self) -> None:
        """The consumer stopped: nothing is left to settle (its final actions may still be
        executed)."""
        self._stopped = True
        if self._settle_soon is not None:
            self._settle_soon.cancel()
            self._settle_soon = None

    # ------------------------------------------------------------------ after an input

    def run(self, actions: list[Action], *, waiter: Waiter | None = None) -> None:
        """What follows every input: its actions now, a settle at the end of the loop turn,
        and its change reported (with `waiter`, if any)."""
        self.execute(actions)
        self.settle_later()
        self.changed(waiter)

    def restored(self) -> None:
        """The state was replaced by its persisted snapshot: nothing to report."""
        self._mark = self._state.persist_mark()

    def changed(self, waiter: Waiter | None = None) -> None:
        """Report whether the persisted part of the state changed since the last report;
        `waiter` waits for it to be durable (at once when nothing is persisted)."""
        mark = self._state.persist_mark()
        changed = mark != self._mark
        self._mark = mark
        if self._on_change is None:
            if waiter is not None:
                waiter()
        elif changed or waiter is not None:
            self._on_change(changed, waiter)

    def settle_later(self, *, dispatch: bool = False) -> None:
        """`settle` once, at the end of this loop iteration, for all the inputs handled in
        it: a read chunk of acks is hundreds of inputs, each of which moves the lowest
        pending message's ack deadline and may allow one more delivery. The timer ends up
        where re-arming after the last input would put it; if it fires first, the runner
        works from the current state as it always does. `dispatch`: the inputs left their
        deliveries to `settle` (`ConsumerState.dispatch`)."""
        if dispatch:
            self._settle_dispatch = True
        if self._settle_soon is None and self._loop is not None and not self._stopped:
            self._settle_soon = self._loop.call_soon(self.settle)

    def settle(self) -> None:
        """Once per loop turn (`settle_later`): the deliveries the inputs allowed (a push
        consumer's a slice at a time, `PUSH_SLICE`, another settle following while more
        may go), the change reported and the timer re-armed."""
        self._settle_soon = None
        if self._stopped:
            return
        if self._settle_dispatch:
            self._settle_dispatch = False
            state = self._state
            self.execute(state.dispatch(self._now_ns(), PUSH_SLICE))
            if state.delivery.capped:
                self.settle_later(dispatch=True)
        self.changed()  # persistence of plain acks, which skip `run`
        self._rearm()

    # ------------------------------------------------------------------ actions

    def execute(self, actions: list[Action]) -> None:
        """Carry out `actions` in order (the module docstring says how each goes); a
        mirror's or source's consumer's once what they deliver is durable."""
        held = self._held
        if held is not None and actions and (held or any(type(a) in _DELIVERIES for a in actions)):
            held.append(actions)
            self._stream.when_durable(self._release)
            return
        self._execute(actions)

    def _release(self, error: BaseException | None) -> None:
        """The stream's sync that the oldest held actions waited for is done: they go.
        After a failed sync they do not (the deliveries may not be durable): the link
        finds deliveries missing at the next heartbeat and asks for them again."""
        assert self._held is not None
        actions = self._held.popleft()
        if error is None:
            self._execute(actions)
        else:
            log.warning("%s: deliveries held back, its stream's sync failed: %s",
                        self._state.cfg.name, error)  # fmt: skip

    def _execute(self, actions: list[Action]) -> None:
        # Deliveries are routed by their reply (the pull request's inbox or the deliver
        # subject), showing the stored subject; consecutive ones to the same reply go
        # as one run (a push consumer's replies are all the same string).
        run_to: str | None = None
        run: list[Message] = []
        memo = self.ack_memo if self.plain_acks else None
        deliver_object = self._deliver_object
        for a in actions:
            if type(a) is DeliverRun and deliver_object is not None:
                if run:
                    self._deliver_run(run_to, run)
                    run, run_to = [], None
                if deliver_object(a.reply.encode(), a):
                    continue
            if type(a) is DeliverRun or type(a) is Deliver:
                if a.reply is not run_to and a.reply != run_to:
                    if run:
                        self._deliver_run(run_to, run)
                        run = []
                    run_to = a.reply
                if memo is not None:
                    if len(memo) > self.ack_memo_cap:
                        memo.clear()
                    if type(a) is DeliverRun:
                        memo.update(zip(a.ack_subjects(), map(_SEQ, a.msgs), strict=True))
                    elif type(a) is Deliver:
                        memo[a.ack_subject] = a.stream_seq
                if type(a) is DeliverRun:
                    # A run's messages mostly share a subject, one string object read from
                    # the store's subject table: encoded once for as long as it repeats.
                    add = run.append
                    subject: str | None = None
                    raw = b""
                    for m, ack in zip(a.msgs, a.ack_subjects(), strict=True):
                        if m.subject is not subject:
                            subject = m.subject
                            raw = subject.encode("utf-8", "surrogateescape")
                        add((raw, ack, m.header or None, m.data))
                elif type(a) is Deliver:
                    m = a.msg
                    run.append(
                        (
                            m.subject.encode("utf-8", "surrogateescape"),
                            a.ack_subject,
                            m.header or None,
                            m.data,
                        )
                    )
                continue
            if run:
                self._deliver_run(run_to, run)
                run = []
            if isinstance(a, Status):
                respond_to = a.respond_to.encode() if a.respond_to is not None else None
                self._publish(a.reply.encode(), b"", a.header_block(), respond_to)
            elif isinstance(a, Advisory):
                self._advisories.event(a.subject, a.payload)
            elif isinstance(a, RemoveMessage | Acked):
                # The stream's retention decides, by its current policy (retention.py).
                retention = self._stream.retention
                if retention is not None:
                    retention.released(a.seq)
        if run:
            self._deliver_run(run_to, run)

    def _deliver_run(self, reply: str | None, run: list[Message]) -> None:
        assert reply is not None
        self._publish_run(self._internal, reply.encode(), run)
