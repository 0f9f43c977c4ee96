"""Retention by consumers: interest and workqueue streams drop what their consumers are done with.

One `StreamRetention` per stream, owned by the engine and reached by the stream (publish) and
by the consumer runners (`Acked` / `RemoveMessage` actions). It reads the stream's *current*
policy on every call, so a stream update between limits and interest takes effect at once.
Behaviour is nats-server 2.15.1's, observed side by side
(tests/conformance/test_retention_conformance.py):

* **limits**: consumers never remove anything.
* **workqueue**: a message goes when its consumer acknowledges or terminates it (consumer
  filters partition the stream: `models/consumer_rules.check_workqueue`). A message given up
  on after `max_deliver` stays until a late ack; deleting a consumer removes nothing.
* **interest**: a message stays while some consumer *holds* it: the consumer's filter matches
  its subject and the consumer has not delivered it yet (seq at or after its position), waits
  for its ack, or gave up on it after `max_deliver` (kept for inspection until acked or the
  consumer goes). `ConsumerState.needs` answers the position half; the filter half is here.
  - publish: a message no consumer's filter matches is not kept (nats-server's `SkipMsg`:
    it gets its sequence and its PubAck, a rollup it carries still applies); with no
    consumers at all nothing is kept. `wanted()`, called by `Stream._ingest`.
  - ack (and `ack_policy` none at delivery, `all` for every pending at or below the acked
    sequence, a late ack of a dead letter): removed when no consumer holds it. `released()`.
  - consumer deleted, its filters changed or its position reset: every stored message
    nobody holds goes; the last consumer going purges the stream (nats-server's
    `cleanupNoInterestMessages`).
  - stream switched from limits to interest: a message goes when some consumer has passed
    it (matching, not held) and nobody holds it; a message no consumer ever matched stays.
    Without consumers the stream is purged.
  - restart: after the durable consumers are restored, what nobody holds goes (without
    consumers: a purge). Ephemeral consumers are not restored by Brook, so messages only
    they held go at start; nats-server restores them and purges when they are reaped.

Restarts. A removal reaches the store (the operating system) before the ack that caused it
reaches the consumer's file (consumer/files.py flushes later), so a SIGKILL never leaves a
recorded ack whose message survived: at worst a consumer restarts with acks it lost, finds
those messages gone and skips them. Only a power loss can leave the store behind the
consumer files; the sweeps at start repair that: interest as above, workqueue by removing
what a consumer matching it has passed and does not hold (nats-server's
`checkStateForInterestStream`). Dead letters are part of the persisted consumer state, so
no sweep drops them; and when some consumer file of the stream could not be restored the
engine skips the sweep (damaged metadata never deletes messages).

Known differences: sweeps start at the stream's first sequence where nats-server starts at
the deleted consumer's ack floor (only messages nobody holds below it differ), and the
start-up sweep is immediate where nats-server's periodic check and ephemeral reaping take
seconds.

Algorithm and cost. Nothing scans consumers x messages per ack:

* `released(seq)` asks each consumer `needs(seq)`: a comparison with its position and set
  lookups in its pending map, dead letters and last-per-subject queue, O(1) each, so O(C)
  for C consumers. The message is loaded (for its subject) only when a filtered consumer's
  position says it may hold it, at most once per ack. With one consumer (the common case)
  nothing is loaded and the removal is immediate.
* `wanted(subject)` is O(1) while some consumer is unfiltered, else a walk of the
  engine's `ConsumerIndex` (consumer_index.py): the filters the subject could match.
* A consumer coming, going or changing its filters updates the holders in O(1) (and
  sweeps, below); only a change of the stream's subjects classifies every consumer again.
* Sweeps (consumer deleted or filtered differently, retention switched, restart) walk only
  stored messages (`load_next` jumps over gaps) from the stream's first sequence up to the
  lowest position of an unfiltered consumer, above which everything is held (and, for the
  switch, up to the highest position, above which nobody has passed anything). A removable
  run at the head of the stream is removed with one `purge(up_to_seq)` (one tombstone);
  later ones message by message. In steady state the walk covers only messages some
  consumer still holds between its ack floor and the unfiltered position: at most its
  pending ones.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from brook.jetstream.consumer_index import ConsumerIndex
from brook.jetstream.store.base import StoredMessage, StoreError
from brook.jetstream.store.filters import SubjectFilter, compile_filter

if TYPE_CHECKING:
    from brook.jetstream.stream import Stream

__all__ = ["ConsumerView", "StreamRetention"]


class _Position(Protocol):
    @property
    def next_stream_seq(self) -> int: ...

    def needs(self, seq: int) -> bool: ...


class _Filters(Protocol):
    @property
    def filters(self) -> list[str]: ...


class ConsumerView(Hashable, Protocol):
    """What retention reads of a consumer (a `ConsumerRunner`): filters and position."""

    @property
    def config(self) -> _Filters: ...

    @property
    def state(self) -> _Position: ...


# A consumer with its compiled filters, None when it takes every subject.
_Holder = tuple["ConsumerView", tuple[SubjectFilter, ...] | None]


class StreamRetention:
    def __init__(
        self,
        stream: Stream,
        consumers: Callable[[], Collection[ConsumerView]],
        index: ConsumerIndex[Any],
    ) -> None:
        self._stream = stream
        self._consumers = consumers
        self._index = index  # the registry's index of the same consumers (wanted())
        # The holders: consumers taking every subject (first: no loads for them), and the
        # filtered ones with their compiled filters. The consumer, not its state: the
        # state is read at each check.
        self._whole: dict[ConsumerView, None] = {}
        self._filtered: dict[ConsumerView, tuple[SubjectFilter, ...]] = {}

    @property
    def policy(self) -> str:
        return str(self._stream.config.retention)

    # ------------------------------------------------------------------ consumer set

    def consumers_changed(self) -> None:
        """The stream's subjects changed (or its consumers were replaced): classify every
        consumer again. O(consumers); a consumer coming or going costs O(1) instead
        (`consumer_added`, `consumer_deleted`)."""
        self._whole.clear()
        self._filtered.clear()
        for consumer in self._consumers():
            self.consumer_added(consumer)

    def consumer_added(self, consumer: ConsumerView) -> None:
        """Filters naming every subject of the stream (nats-py's `pull_subscribe("s.>")` on
        a stream of `s.>`) take everything, as in nats-server's `isFiltered`, and so cost
        no message loads."""
        filters = consumer.config.filters
        compiled = tuple(compile_filter(f) for f in filters)
        subjects = self._stream.config.subjects
        if (
            not compiled
            or any(f.match_all for f in compiled)
            or (bool(subjects) and set(subjects) <= set(filters))
        ):
            self._whole[consumer] = None
        else:
            self._filtered[consumer] = compiled

    def _forget(self, consumer: ConsumerView) -> None:
        self._whole.pop(consumer, None)
        self._filtered.pop(consumer, None)

    def _holders(self) -> Iterator[_Holder]:
        for consumer in self._whole:
            yield consumer, None
        yield from self._filtered.items()

    # ------------------------------------------------------------------ hot paths

    def wanted(self, subject: str) -> bool:
        """Interest streams: does some consumer's filter match a message on `subject`?"""
        return bool(self._whole) or self._index.concerns(subject.encode())

    def released(self, seq: int) -> None:
        """A consumer is done with `seq` (acked, terminated, delivered without acks). If
        the removal cannot be written (a full disk), the message stays until the sweep at
        the next start: the ack itself is kept by the consumer."""
        policy = self.policy
        try:
            if policy == "workqueue" or (policy == "interest" and not self._held(seq)):
                self._stream.store.remove(seq)
        except StoreError as exc:
            self._stream.write_failed(f"remove acknowledged message {seq}", exc)

    def _held(self, seq: int, subject: str | None = None) -> bool:
        """Does some consumer hold `seq`? (True too when the message is gone already.)"""
        for consumer, filters in self._holders():
            if not consumer.state.needs(seq):
                continue
            if filters is None:
                return True
            if subject is None:
                msg = self._stream.store.load(seq)
                if msg is None:
                    return True  # removed some other way: nothing left to do
                subject = msg.subject
            if any(f.matches(subject) for f in filters):
                return True
        return False

    # ------------------------------------------------------------------ sweeps

    def consumer_deleted(self, consumer: ConsumerView) -> None:
        """A consumer went (deleted, or reaped for inactivity): release what only it held."""
        self._forget(consumer)
        if self.policy == "interest":
            self._sweep_unheld()

    def filters_changed(self, consumer: ConsumerView) -> None:
        """A consumer's filters were updated: messages only its old filters held go."""
        self._forget(consumer)
        self.consumer_added(consumer)
        if self.policy == "interest":
            self._sweep_unheld()

    def consumer_reset(self) -> None:
        """A consumer was reset to another position (CONSUMER.RESET): on an interest stream
        what it no longer holds goes, as after nats-server's reset."""
        if self.policy == "interest":
            self._sweep_unheld()

    def recovered(self) -> None:
        """At start, once the stream's durable consumers are restored (module docstring)."""
        self.consumers_changed()
        if self.policy == "interest":
            self._sweep_unheld()
        elif self.policy == "workqueue" and self._has_holders():
            self._sweep_passed()

    def retention_changed(self) -> None:
        """The stream was updated to another policy; the runners already follow it."""
        self.consumers_changed()
        if self.policy != "interest":
            return
        if not self._has_holders():
            self._purge()
        else:
            self._sweep_passed()

    def _has_holders(self) -> bool:
        return bool(self._whole or self._filtered)

    def _sweep_unheld(self) -> None:
        if not self._has_holders():
            self._purge()
        else:
            self._sweep(lambda m: not self._held(m.seq, m.subject), self._unfiltered_floor())

    def _sweep_passed(self) -> None:
        highest = max(consumer.state.next_stream_seq for consumer, _ in self._holders()) - 1
        self._sweep(self._passed_and_unheld, min(self._unfiltered_floor(), highest))

    def _passed_and_unheld(self, msg: StoredMessage) -> bool:
        """Some consumer matching the message is past it, and nobody holds it."""
        if self._held(msg.seq, msg.subject):
            return False
        return any(
            msg.seq < consumer.state.next_stream_seq
            and (filters is None or any(f.matches(msg.subject) for f in filters))
            for consumer, filters in self._holders()
        )

    def _unfiltered_floor(self) -> int:
        """The highest sequence worth looking at: an unfiltered consumer holds every message
        from its position on."""
        positions = [c.state.next_stream_seq for c in self._whole]
        return min(positions) - 1 if positions else self._stream.store.state().last_seq

    def _purge(self) -> None:
        store = self._stream.store
        if store.state().messages:
            store.purge()

    def _sweep(self, removable: Callable[[StoredMessage], bool], high_seq: int) -> None:
        """Remove the stored messages up to `high_seq` that `removable` picks (see the
        module docstring for the cost)."""
        store = self._stream.store
        state = store.state()
        if not state.messages or high_seq < state.first_seq:
            return
        head_end = 0  # the removable run at the head of the stream ends here
        at_head = True
        rest: list[int] = []
        msg = store.load_next("", state.first_seq)
        while msg is not None and msg.seq <= high_seq:
            if removable(msg):
                if at_head:
                    head_end = msg.seq
                else:
                    rest.append(msg.seq)
            else:
                at_head = False
            msg = store.load_next("", msg.seq + 1)
        if head_end:
            store.purge(up_to_seq=head_end + 1)
        for seq in rest:
            store.remove(seq)
