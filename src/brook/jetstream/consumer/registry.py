"""Every stream's consumers: how they start, change and stop, and what they hear from
their stream.

The engine keeps the streams; this keeps their consumers, by stream and by name (what the
API and monitoring look up: the registry reads as a mapping of stream name to its
consumers) and by filter subject (`ConsumerIndex`: which of them a stored message
concerns, asked on every publish by the engine's ingest callback and by interest
retention). A consumer's coming, change and going is told to its stream's retention
(retention.py) and, for a durable consumer of a file stream, written by `ConsumerFiles`
before the API answers.

At start a stream's persisted consumers are restored after the stream is moved past every
sequence they saw (`_skip_seen`: a crash can lose stored messages a consumer was already
given), and the stream's retention is recovered only once all of them run.

What a stream does on its own reaches its consumers here: messages it removed
(`removed`, ADR 0014), a purge (`purged`, ADR 0011) and the subject delete markers an
expiry stored (`markers_stored`). A publish's stored message goes to the consumers from
the engine's ingest callback, which reads this index directly (ADR 0012, ADR 0017).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

from brook.jetstream.advisories import CREATE, DELETE, Advisories
from brook.jetstream.consumer.files import CONSUMERS_DIR, ConsumerFiles, seen_by
from brook.jetstream.consumer.runner import ConsumerRunner, PurgePoint
from brook.jetstream.consumer_index import ConsumerIndex
from brook.jetstream.errors import api_error
from brook.jetstream.models.consumer_config import ConsumerConfig
from brook.jetstream.retention import StreamRetention
from brook.jetstream.store.base import PurgeResult, StoreError
from brook.jetstream.stream import Stream
from brook.routing.internal import InternalClient

log = logging.getLogger("brook.jetstream")

# A consumer to start: its configuration, creation time and state snapshot.
Consumer = tuple[ConsumerConfig, int, dict[str, Any]]


class ConsumerRegistry(Mapping[str, Mapping[str, ConsumerRunner]]):
    def __init__(
        self,
        internal: InternalClient,
        root: Path,
        executor: Executor,
        *,
        now_ns: Callable[[], int],
        flush_interval_s: float,
        advisories: Advisories | None = None,
    ) -> None:
        """`advisories` announces each consumer created and deleted (nats-server's
        `consumer_action`); None: not announced."""
        self._internal = internal
        self._advisories = advisories
        self.now_ns = now_ns  # the engine's clock (`JetStream.now_ns`)
        self._loop: asyncio.AbstractEventLoop | None = None
        self.files = ConsumerFiles(root, executor, flush_interval_s=flush_interval_s)
        # stream name -> consumer name -> runner, for every registered stream
        self._runners: dict[str, dict[str, ConsumerRunner]] = {}
        # stream name -> the same runners by filter subject
        self._indexes: dict[str, ConsumerIndex[ConsumerRunner]] = {}

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.files.start(loop)

    # ------------------------------------------------------------------ lookups

    def __getitem__(self, stream_name: str) -> Mapping[str, ConsumerRunner]:
        return self._runners[stream_name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._runners)

    def __len__(self) -> int:
        return len(self._runners)

    def public(self, stream_name: str) -> dict[str, ConsumerRunner]:
        """A stream's consumers but the direct ones (nats-server's `getPublicConsumers`):
        those mirrors and sources create on their origin (ADR 0020) are not listed, not
        counted in `consumer_count` and not part of snapshots, as they have no store."""
        runners = self._runners.get(stream_name, {})
        return {name: r for name, r in runners.items() if not r.config.direct}

    # ------------------------------------------------------------------ streams

    def add_stream(self, stream: Stream) -> ConsumerIndex[ConsumerRunner]:
        """A stream is registered (before its consumers are opened): its retention is set
        up over its consumers, and their index by filter subject returned (the engine's
        ingest callback asks it which consumers a stored message concerns)."""
        runners: dict[str, ConsumerRunner] = {}
        index = ConsumerIndex[ConsumerRunner]()
        self._runners[stream.name] = runners
        self._indexes[stream.name] = index
        stream.retention = StreamRetention(stream, runners.values, index)
        stream.on_removed = lambda seqs: self.removed(stream.name, seqs)
        stream.on_purge = lambda result, subject, keep: self.purged(stream, result, subject, keep)
        stream.on_markers = lambda markers: self.markers_stored(stream.name, markers)
        return index

    def remove_stream(self, stream_name: str, *, notify: bool) -> None:
        """Stop a stream's consumers: `notify` when the stream is deleted (their files go
        with its directory), not at shutdown (their files stay as written)."""
        self._indexes.pop(stream_name, None)
        for runner in self._runners.pop(stream_name, {}).values():
            runner.stop(notify=notify)
            if notify:
                self.files.forget(runner, unlink=False)  # the stream dir goes too
                if self._advisories is not None:
                    self._advisories.consumer_action(stream_name, runner.name, DELETE)
            else:
                self.files.release(runner)

    def stream_updated(self, stream: Stream, *, retention_changed: bool) -> None:
        """The stream's configuration changed. With its retention policy (limits <->
        interest; workqueue is fixed) every consumer takes the new policy on (their
        settings carry it) and retention starts over; otherwise retention classifies the
        consumers again, as the subjects may differ."""
        if retention_changed:
            for runner in list(self._runners[stream.name].values()):
                runner.update(runner.config)
            _retention(stream).retention_changed()
        else:
            _retention(stream).consumers_changed()

    def server_shutdown(self) -> None:
        """Every consumer answers its waiting pull requests with `409 Server Shutdown`."""
        for runners in self._runners.values():
            for runner in runners.values():
                runner.server_shutdown()

    # ------------------------------------------------------------------ consumers

    def add(
        self,
        stream: Stream,
        config: ConsumerConfig,
        *,
        created_ns: int | None = None,
        snapshot: dict[str, Any] | None = None,
        announce: bool = True,
    ) -> ConsumerRunner:
        """Start a (pull or push) consumer on `stream`; the caller has validated `config`.

        A durable consumer of a file stream is persisted (its file written before this
        returns); `snapshot` restores a persisted state (at start). A new one is announced
        (`announce`); nats-server does not announce those it recovers (at start, or those
        of a restored stream)."""
        files = self.files
        path = files.path_for(stream, config)
        runner = ConsumerRunner(
            stream,
            config,
            internal=self._internal,
            now_ns=self.now_ns,
            loop=self._loop,
            created_ns=self.now_ns() if created_ns is None else created_ns,
            on_inactive=self._inactive,
            on_change=files.changed if path is not None else None,
            advisories=self._advisories,
        )
        if snapshot is not None:
            runner.restore(snapshot)
        if path is not None:
            try:
                files.track(runner, path, write_now=snapshot is None)
            except BaseException:  # its file could not be written (a full disk)
                runner.stop(notify=False)
                files.release(runner)
                raise
        runners = self._runners[stream.name]
        runners[config.name] = runner
        if not config.direct:
            stream.consumer_count += 1
        self._indexes[stream.name].add(runner, config.filters)
        _retention(stream).consumer_added(runner)
        if announce and self._advisories is not None:
            self._advisories.consumer_action(stream.name, config.name, CREATE)
        return runner

    def update(self, runner: ConsumerRunner, config: ConsumerConfig) -> None:
        """Update a consumer in place; a persisted one has its new config written. New
        filters apply at once (the runner reads through them from its position on)."""
        old_filters = set(runner.config.filters)
        runner.update(config)
        self.files.updated(runner)
        if set(runner.config.filters) != old_filters:
            self._indexes[runner.stream.name].update(runner, runner.config.filters)
            _retention(runner.stream).filters_changed(runner)

    def reset(self, runner: ConsumerRunner, seq: int) -> None:
        """CONSUMER.RESET: the consumer starts again at `seq`; its file is written before
        the answer goes, and on an interest stream what it no longer holds goes."""
        runner.reset(seq)
        self.files.updated(runner)
        _retention(runner.stream).consumer_reset()

    def pause(self, runner: ConsumerRunner, until_ns: int | None) -> None:
        """CONSUMER.PAUSE: the new `pause_until` is part of the (persisted) config."""
        runner.pause(until_ns)
        self.files.updated(runner)

    def delete(self, stream_name: str, name: str) -> None:
        runners = self._runners.get(stream_name, {})
        runner = runners.pop(name, None)
        if runner is None:
            raise api_error("CONSUMER_NOT_FOUND")
        runner.stop(notify=True)
        if not runner.config.direct:
            runner.stream.consumer_count -= 1
        self.files.forget(runner, unlink=True)
        self._indexes[stream_name].remove(runner)
        _retention(runner.stream).consumer_deleted(runner)
        if self._advisories is not None:
            self._advisories.consumer_action(stream_name, name, DELETE)

    def _inactive(self, runner: ConsumerRunner) -> None:
        if self._runners.get(runner.stream.name, {}).get(runner.name) is runner:
            log.debug("consumer %s > %s inactive; deleted", runner.stream.name, runner.name)
            self.delete(runner.stream.name, runner.name)

    # ------------------------------------------------------------------ at start

    def open(self, stream: Stream, volatile: Sequence[Consumer] = ()) -> None:
        """Start a stream's persisted consumers, then `volatile` ones (a restore's consumers
        that live in memory only); retention is recovered only if every one of them runs
        (one that failed may hold messages)."""
        self._open_consumers(stream, volatile)
        on_disk = (self.files.root / stream.name / CONSUMERS_DIR).glob("*.json")
        persisted = len(volatile) + len(list(on_disk))
        if len(self._runners[stream.name]) >= persisted:
            try:
                _retention(stream).recovered()
            except StoreError as exc:  # a full disk: the sweep is done at the next start
                stream.write_failed("remove the messages no consumer holds", exc)
        else:  # damaged metadata never deletes messages: not even those only it held
            log.warning(
                "stream %s: not every consumer could be restored; retention left as found",
                stream.name,
            )

    def _open_consumers(self, stream: Stream, volatile: Sequence[Consumer]) -> None:
        """Start the stream's persisted and `volatile` consumers, after moving the stream
        past what any of them saw."""
        loaded = list(self.files.load(stream))
        loaded += [
            (config, created, state, seen_by(config, state)) for config, created, state in volatile
        ]
        _skip_seen(stream, max((seen for *_, seen in loaded), default=0))
        state = stream.store.state()
        lost = state.lost
        first = state.first_seq or state.last_seq + 1
        for config, created_ns, snapshot, _seen in loaded:
            try:
                runner = self.add(
                    stream, config, created_ns=created_ns, snapshot=snapshot, announce=False
                )
                if lost is not None:  # pending messages that are gone are not redelivered
                    runner.messages_changed(lost.msgs)
                runner.stream_starts_at(first)  # what expired while it was not running
            except Exception as exc:
                log.error(
                    "consumer %s > %s could not be restored: %s", stream.name, config.name, exc
                )
                continue
            log.info("consumer %s > %s restored", stream.name, config.name)

    # ------------------------------------------------------------------ what streams did

    def removed(self, stream_name: str, seqs: list[int]) -> None:
        """The stream removed `seqs` on their own (`Stream.on_removed`: a delete, limits,
        an expiry): every consumer refreshes its counts and terminates each one it has
        pending, as nats-server's consumers do when their store reports the removal
        (`ConsumerRunner.stream_removed`)."""
        for runner in list(self._runners.get(stream_name, {}).values()):
            runner.stream_removed(seqs)

    def markers_stored(self, stream_name: str, markers: list[tuple[str, int]]) -> None:
        """An expiry stored subject delete markers (`Stream.on_markers`): each consumer
        whose filter matches one of their subjects has something new, once."""
        index = self._indexes.get(stream_name)
        if index is None:
            return
        concerned: dict[ConsumerRunner, None] = {}
        for subject, _seq in markers:
            concerned.update(dict.fromkeys(index.matching(subject.encode())))
        last = markers[-1][1]
        for runner in concerned:
            runner.message_stored(last)

    def purged(self, stream: Stream, result: PurgeResult, subject: str, keep: int) -> None:
        """A purge (STREAM.PURGE, or a rollup) removed `result`'s messages, of `subject`
        (all when empty), keeping the last `keep`: each consumer's position, ack floor and
        pending deliveries move up to the purge point as nats-server's `purgeLocked`
        moves them (`ConsumerRunner.stream_purged`). nats-server's store takes a filtered or
        `keep` purge message by message, and when that removes exactly one it reports the
        message on its own, which terminates it where it was pending (`PurgePoint.removed`)."""
        runners = self._runners.get(stream.name)
        if not runners:
            return
        state = stream.store.state()
        first = state.first_seq or state.last_seq + 1
        left = stream.store.load_next(subject, first) if subject else None
        alone = result.purged == 1 and (subject not in ("", ">") or keep > 0)
        point = PurgePoint(
            first,
            state.last_seq,
            left.seq if left is not None else 0,
            removed=result.removed_seqs[0] if alone else 0,
            batch=result.purged > 0 and not alone,
        )
        for runner in list(runners.values()):
            runner.stream_purged(subject, point)


def _retention(stream: Stream) -> StreamRetention:
    assert stream.retention is not None  # set by `add_stream`
    return stream.retention


def _skip_seen(stream: Stream, seen_seq: int) -> None:
    """Durable consumers delivered up to `seen_seq` but the stream's log ends before it: a
    crash (a power loss) took messages that were stored and delivered but not yet durable.
    The stream goes on after them, as nats-server does, so no consumer (or its client)
    sees a sequence twice with two messages."""
    last = stream.store.state().last_seq
    if seen_seq <= last:
        return
    log.warning(
        "stream %s: its consumers saw sequences up to %d but its log ends at %d: "
        "sequences %d..%d were lost in a crash; the stream goes on after %d",
        stream.name,
        seen_seq,
        last,
        last + 1,
        seen_seq,
        seen_seq,
    )
    try:
        stream.store.skip_to(seen_seq)
    except StoreError as exc:
        stream.write_failed("skip lost sequences", exc)
