"""The JetStream engine: the registry of streams, their storage and their subscriptions.

On disk (under `jetstream.store_dir`) each stream is a directory
`streams/<name>/` holding `stream.json` (its configuration and creation time, written
atomically), for file storage `data/` (the file store, docs/storage-format.md), and
`consumers/<name>.json` for each durable consumer of a file stream (below).
Memory streams keep their definition across restarts but not their messages, as with
nats-server. At start every stream found on disk is opened; a damaged definition is
reported and that stream skipped, never deleted.

Durable consumers of file streams are persisted by `consumer/files.py`. Each stream has a
`StreamRetention` (retention.py) that the engine tells when consumers come, change and go,
and when the stream is reopened or changes its retention policy.

The engine subscribes each stream to its subjects through an `InternalClient`, schedules
max-age expiry, and owns the worker threads that run group commits. The JSON API lives in
`jetstream/api/` and calls the methods here.

The store's filesystem (`space.py`): one `StoreSpace` admits publishes to every file
stream, and a file store that deletes segments asks for a sync at once (its group commit),
so that a purge, an expiry or acks free the space even while no publish is acknowledged.
What opening a file store found damaged (`recovery_report`) is logged and kept for
monitoring (`recoveries`). Sequences that a stream's durable consumers saw but its log lost
in a crash are skipped (`MessageStore.skip_to`), so they are never handed out again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from brook import limits
from brook.jetstream import models
from brook.jetstream.backlog import CommitBacklog
from brook.jetstream.commit import GroupCommitter
from brook.jetstream.consumer.acks import ACK_PREFIX, ACK_ROUTE_TOKENS
from brook.jetstream.consumer.files import CONSUMERS_DIR, ConsumerFiles, seen_by
from brook.jetstream.consumer.runner import ConsumerRunner, PurgePoint
from brook.jetstream.consumer_index import ConsumerIndex
from brook.jetstream.direct import DirectGet
from brook.jetstream.errors import api_error
from brook.jetstream.fsutil import fsync_directory, write_atomically
from brook.jetstream.models.consumer_config import ConsumerConfig
from brook.jetstream.models.stream_config import StreamConfig
from brook.jetstream.retention import StreamRetention
from brook.jetstream.space import StoreSpace
from brook.jetstream.store.base import MessageStore, PurgeResult, StoreError, is_no_space
from brook.jetstream.store.file import FileStore
from brook.jetstream.store.file.recovery import RecoveryReport
from brook.jetstream.store.memory import MemoryStore
from brook.jetstream.stream import Stream
from brook.routing.internal import InternalClient
from brook.routing.router import Router
from brook.routing.subject_index import SubjectIndex
from brook.routing.sublist import Subscription

log = logging.getLogger("brook.jetstream")

STREAM_FILE = "stream.json"
# A consumer to start: its configuration, creation time and state snapshot.
Consumer = tuple[ConsumerConfig, int, dict[str, Any]]
DATA_DIR = "data"


def stream_record(config: StreamConfig, created_ns: int) -> bytes:
    """The content of a stream's `stream.json`: its configuration and creation time."""
    record = {"config": models.stream_config_to_json(config), "created_ns": created_ns}
    return json.dumps(record, indent=1).encode()


# Findings of one stream's recovery logged one by one; the rest are counted (`brook store
# check` lists them all).
RECOVERY_LOG_LINES_MAX = 20


@dataclass
class _Entry:
    stream: Stream
    # The stream's consumers by filter subject: which of them a stored message concerns.
    consumers: ConsumerIndex[ConsumerRunner] = field(default_factory=ConsumerIndex)
    subs: list[Subscription] = field(default_factory=list)
    expiry: asyncio.TimerHandle | None = None
    expiry_at: int | None = None  # when `expiry` fires, in the engine's clock (ns)
    committer: GroupCommitter | None = None


class JetStream:
    def __init__(
        self,
        router: Router,
        store_dir: str,
        *,
        now_ns: Callable[[], int] = time.time_ns,
        max_memory_bytes: int = -1,
        max_file_bytes: int = -1,
        sync_interval_s: float = 0.0,
        consumer_flush_interval_s: float = limits.CONSUMER_FLUSH_INTERVAL_S,
        free_space_reserve_bytes: int = -1,
        max_acks_awaiting_sync: int = limits.MAX_ACKS_AWAITING_SYNC,
    ) -> None:
        self.router = router
        self.internal = InternalClient(router, "jetstream")
        # Acks are published about once each, hundreds to a read: routed by prefix, in runs.
        router.sublist.add_exclusive_prefix(ACK_PREFIX.encode(), ACK_ROUTE_TOKENS)
        self.root = Path(store_dir) / "streams"  # file streams live on disk, never in memory
        self.now_ns = now_ns
        self.max_memory_bytes = max_memory_bytes
        self.max_file_bytes = max_file_bytes
        self._entries: dict[str, _Entry] = {}
        self._streams: dict[str, Stream] = {}  # the same streams by name (`streams`)
        # Every stream's subjects -> its name: the overlap check of a create or update
        # walks what the new subjects could share, not every stream.
        self._subjects = SubjectIndex[str]()
        # stream name -> consumer name -> runner (durables of file streams are persisted)
        self.consumers: dict[str, dict[str, ConsumerRunner]] = {}
        self._executor = ThreadPoolExecutor(limits.SYNC_THREADS, thread_name_prefix="brook-sync")
        self._loop: asyncio.AbstractEventLoop | None = None
        # 0: acknowledge after fsync (group commit); > 0: nats-server's interval mode.
        self.sync_interval_s = sync_interval_s
        self._sync_timer: asyncio.TimerHandle | None = None
        self._sync_running = False
        # The PubAcks every group commit owes, bounded by pausing their publishers.
        self.commit_backlog = CommitBacklog(max_acks_awaiting_sync)
        self.consumer_files = ConsumerFiles(
            self.root, self._executor, flush_interval_s=consumer_flush_interval_s
        )
        self._free_space_reserve_bytes = free_space_reserve_bytes
        self.space: StoreSpace | None = None  # set at start when there is a store
        # stream name -> what opening its file store found damaged (monitoring)
        self.recoveries: dict[str, RecoveryReport] = {}

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.consumer_files.start(self._loop)
        if self.sync_interval_s > 0:
            self._sync_timer = self._loop.call_later(self.sync_interval_s, self._interval_sync)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            if not is_no_space(exc):
                raise
            log.error("cannot create %s: %s; no stream can be created here", self.root, exc)
        self.space = StoreSpace(self.root.parent, self._free_space_reserve_bytes)
        if not self.root.is_dir():
            return
        for directory in sorted(p for p in self.root.iterdir() if p.is_dir()):
            try:
                self._open_existing(directory)
            except Exception:
                log.exception("stream in %s could not be opened; left untouched", directory)

    def signal_shutdown(self) -> None:
        """The server is stopping: every consumer answers its waiting pull requests with
        `409 Server Shutdown` (nats-server's first step of a shutdown), while their clients
        are still connected to receive it."""
        for runners in self.consumers.values():
            for runner in runners.values():
                runner.server_shutdown()

    async def drain(self) -> None:
        """Wait for every pending group commit (and so every owed acknowledgement), then
        write every durable consumer with unsaved state."""
        for entry in list(self._entries.values()):
            if entry.committer is not None:
                await entry.committer.drain()
        await self.consumer_files.drain()

    def _interval_sync(self) -> None:
        """Interval mode: fsync every file store in a worker thread, then re-arm."""
        assert self._loop is not None
        self._sync_timer = self._loop.call_later(self.sync_interval_s, self._interval_sync)
        if self._sync_running:
            return  # the previous round is still syncing; skip rather than pile up
        stores = [
            e.stream.store for e in self._entries.values() if e.stream.config.storage == "file"
        ]

        def sync_all() -> None:
            for store in stores:
                try:
                    store.sync()
                except Exception:
                    log.exception("interval sync failed")

        self._sync_running = True
        future = self._loop.run_in_executor(self._executor, sync_all)
        future.add_done_callback(lambda _f: setattr(self, "_sync_running", False))

    async def stop(self) -> None:
        if self._sync_timer is not None:
            self._sync_timer.cancel()
            self._sync_timer = None
        await self.drain()
        await self.consumer_files.close()
        for name in list(self._entries):
            self._stop_consumers(name, notify=False)
            self._unregister(name).stream.close()
        self.internal.close()
        self._executor.shutdown(wait=True)

    # ------------------------------------------------------------------ registry

    @property
    def streams(self) -> Mapping[str, Stream]:
        """Every stream by name: a read-only view, so a lookup costs one lookup."""
        return MappingProxyType(self._streams)

    def get(self, name: str) -> Stream:
        entry = self._entries.get(name)
        if entry is None:
            raise api_error("STREAM_NOT_FOUND")
        return entry.stream

    def create(self, config: StreamConfig) -> tuple[Stream, bool]:
        """Create a stream; an identical existing one is returned as is (idempotent)."""
        existing = self._entries.get(config.name)
        if existing is not None:
            if models.same_config(existing.stream.config, config):
                return existing.stream, False
            raise api_error("STREAM_NAME_EXIST")
        self._check_overlap(config.name, config.subjects)
        if config.storage == "file" and self.space is not None and not self.space.admit(0):
            raise api_error("INSUFFICIENT_RESOURCES")
        created = self.now_ns()
        directory = self.root / config.name
        fresh = not directory.exists()
        try:
            stream = self._build(config, created)
            self._persist(stream, new=True)
        except BaseException:
            if config.name in self._entries:  # built but not persisted: undo it
                self._unregister(config.name).stream.close()
            if fresh:
                shutil.rmtree(directory, ignore_errors=True)
            raise
        return stream, True

    def update(self, config: StreamConfig) -> Stream:
        entry = self._entries.get(config.name)
        if entry is None:
            raise api_error("STREAM_NOT_FOUND")
        models.check_update(entry.stream.config, config)
        self._check_overlap(config.name, config.subjects)
        old_retention = entry.stream.config.retention
        self._detach(config.name)
        self._index_subjects(entry.stream.config, add=False)
        entry.stream.reconfigure(config)
        self._index_subjects(config, add=True)
        self._attach(entry)
        self._persist(entry.stream)
        entry.stream.enforce_all_limits()
        if config.retention != old_retention:  # limits <-> interest (workqueue is fixed)
            for runner in list(self.consumers.get(config.name, {}).values()):
                runner.update(runner.config)  # consumer settings carry the policy
            self._retention(entry.stream).retention_changed()
        else:
            self._retention(entry.stream).consumers_changed()  # the subjects may differ
        self._schedule_expiry(entry)
        return entry.stream

    def delete(self, name: str) -> None:
        entry = self._entries.get(name)
        if entry is None:
            raise api_error("STREAM_NOT_FOUND")
        self._stop_consumers(name, notify=True)
        self._unregister(name)
        self.recoveries.pop(name, None)
        entry.stream.close()
        shutil.rmtree(self.root / name, ignore_errors=True)

    # ------------------------------------------------------------------ consumers

    def add_consumer(
        self,
        stream: Stream,
        config: ConsumerConfig,
        *,
        created_ns: int | None = None,
        snapshot: dict[str, Any] | None = None,
    ) -> ConsumerRunner:
        """Start a (pull or push) consumer on `stream`; the caller has validated `config`.

        A durable consumer of a file stream is persisted (its file written before this
        returns); `snapshot` restores a persisted state (at start)."""
        files = self.consumer_files
        path = files.path_for(stream, config)
        runner = ConsumerRunner(
            stream,
            config,
            internal=self.internal,
            now_ns=self.now_ns,
            loop=self._loop,
            created_ns=self.now_ns() if created_ns is None else created_ns,
            on_inactive=self._consumer_inactive,
            on_change=files.changed if path is not None else None,
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
        self.consumers.setdefault(stream.name, {})[config.name] = runner
        stream.consumer_count = len(self.consumers[stream.name])
        self._entries[stream.name].consumers.add(runner, config.filters)
        self._retention(stream).consumer_added(runner)
        return runner

    def update_consumer(self, runner: ConsumerRunner, config: ConsumerConfig) -> None:
        """Update a consumer in place; a persisted one has its new config written. New
        filters apply at once (the runner reads through them from its position on)."""
        old_filters = set(runner.config.filters)
        runner.update(config)
        self.consumer_files.updated(runner)
        if set(runner.config.filters) != old_filters:
            self._entries[runner.stream.name].consumers.update(runner, runner.config.filters)
            self._retention(runner.stream).filters_changed(runner)

    def reset_consumer(self, runner: ConsumerRunner, seq: int) -> None:
        """CONSUMER.RESET: the consumer starts again at `seq`; its file is written before
        the answer goes, and on an interest stream what it no longer holds goes."""
        runner.reset(seq)
        self.consumer_files.updated(runner)
        self._retention(runner.stream).consumer_reset()

    def pause_consumer(self, runner: ConsumerRunner, until_ns: int | None) -> None:
        """CONSUMER.PAUSE: the new `pause_until` is part of the (persisted) config."""
        runner.pause(until_ns)
        self.consumer_files.updated(runner)

    def delete_consumer(self, stream_name: str, name: str) -> None:
        runners = self.consumers.get(stream_name, {})
        runner = runners.pop(name, None)
        if runner is None:
            raise api_error("CONSUMER_NOT_FOUND")
        runner.stop(notify=True)
        runner.stream.consumer_count = len(runners)
        self.consumer_files.forget(runner, unlink=True)
        self._entries[stream_name].consumers.remove(runner)
        self._retention(runner.stream).consumer_deleted(runner)

    def _retention(self, stream: Stream) -> StreamRetention:
        assert stream.retention is not None  # set by _build
        return stream.retention

    def _consumer_inactive(self, runner: ConsumerRunner) -> None:
        runners = self.consumers.get(runner.stream.name, {})
        if runners.get(runner.name) is runner:
            log.debug("consumer %s > %s inactive; deleted", runner.stream.name, runner.name)
            self.delete_consumer(runner.stream.name, runner.name)

    def _stop_consumers(self, stream_name: str, *, notify: bool) -> None:
        """Stop a stream's consumers: `notify` when the stream is deleted, not at shutdown."""
        for runner in self.consumers.pop(stream_name, {}).values():
            runner.stop(notify=notify)
            if notify:
                self.consumer_files.forget(runner, unlink=False)  # the stream dir goes too
            else:
                self.consumer_files.release(runner)

    def _open_consumers(self, stream: Stream, volatile: Sequence[Consumer] = ()) -> None:
        """Start the stream's persisted consumers and `volatile` ones (a restore's consumers
        that live in memory only), after moving the stream past what any of them saw."""
        loaded = list(self.consumer_files.load(stream))
        loaded += [
            (config, created, state, seen_by(config, state)) for config, created, state in volatile
        ]
        self._skip_seen(stream, max((seen for *_, seen in loaded), default=0))
        state = stream.store.state()
        lost = state.lost
        first = state.first_seq or state.last_seq + 1
        for config, created_ns, snapshot, _seen in loaded:
            try:
                runner = self.add_consumer(stream, config, created_ns=created_ns, snapshot=snapshot)
                if lost is not None:  # pending messages that are gone are not redelivered
                    runner.messages_changed(lost.msgs)
                runner.stream_starts_at(first)  # what expired while it was not running
            except Exception as exc:
                log.error(
                    "consumer %s > %s could not be restored: %s", stream.name, config.name, exc
                )
                continue
            log.info("consumer %s > %s restored", stream.name, config.name)

    def _skip_seen(self, stream: Stream, seen_seq: int) -> None:
        """Durable consumers delivered up to `seen_seq` but the stream's log ends before
        it: a crash (a power loss) took messages that were stored and delivered but not yet
        durable. The stream goes on after them, as nats-server does, so no consumer (or
        its client) sees a sequence twice with two messages."""
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

    def stream_removed(self, stream: Stream, seqs: list[int]) -> None:
        """The stream removed `seqs` on their own (`Stream.on_removed`: a delete, limits,
        an expiry): every consumer refreshes its counts and terminates each one it has
        pending, as nats-server's consumers do when their store reports the removal
        (`ConsumerRunner.stream_removed`)."""
        for runner in list(self.consumers.get(stream.name, {}).values()):
            runner.stream_removed(seqs)

    def stream_purged(
        self, stream: Stream, result: PurgeResult, subject: str = "", keep: int = 0
    ) -> None:
        """A purge (STREAM.PURGE, or a rollup) removed `result`'s messages, of `subject`
        (all when empty), keeping the last `keep`: each consumer's position, ack floor and
        pending deliveries move up to the purge point as nats-server's `purgeLocked`
        moves them (`ConsumerRunner.stream_purged`). nats-server's store takes a filtered or
        `keep` purge message by message, and when that removes exactly one it reports the
        message on its own, which terminates it where it was pending (`PurgePoint.removed`)."""
        runners = self.consumers.get(stream.name)
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

    def check_new(self, config: StreamConfig, *, exists: str) -> None:
        """Raise unless a stream of `config` could be added now: the API error `exists` if
        the name is taken, 10065 if its subjects overlap another stream's."""
        if config.name in self._entries:
            raise api_error(exists)
        self._check_overlap(config.name, config.subjects)

    def _check_overlap(self, name: str, subjects: list[str]) -> None:
        for subject in subjects:
            if any(other != name for other in self._subjects.intersecting(subject.encode())):
                raise api_error("STREAM_SUBJECT_OVERLAP")

    def _index_subjects(self, config: StreamConfig, *, add: bool) -> None:
        for subject in config.subjects:
            if add:
                self._subjects.add(subject.encode(), config.name)
            else:
                self._subjects.remove(subject.encode(), config.name)

    # ------------------------------------------------------------------ wiring

    def _build(
        self, config: StreamConfig, created_ns: int, store: MessageStore | None = None
    ) -> Stream:
        """Register and subscribe a stream; its store is opened here unless `store` is one
        opened already (a restore)."""
        committer: GroupCommitter | None = None
        if self.keeps_files(config):
            if store is None:
                # Made by the store: the first sync of a new one makes its directories
                # durable (FileStore).
                directory = self.root / config.name / DATA_DIR
                store = FileStore(directory=directory, first_seq=config.first_seq or 1)
                self._report_recovery(config.name, store.recovery_report)
            if self.sync_interval_s <= 0:
                committer = GroupCommitter(
                    store.sync, self._executor, loop=self._loop, backlog=self.commit_backlog
                )
                assert isinstance(store, FileStore)  # a restore opens one for a file stream
                store.on_reclaim = _request_sync(committer)
        elif store is None:
            store = MemoryStore(first_seq=config.first_seq or 1)
        stream = Stream(
            config,
            store,
            now_ns=self.now_ns,
            send_ack=self._send_ack,
            committer=committer,
            created_ns=created_ns,
            space=self.space if config.storage == "file" else None,
            send_message=self._send_message,
        )
        name = stream.name
        stream.on_purge = lambda result, subject, keep: self.stream_purged(
            stream, result, subject, keep
        )
        stream.on_removed = lambda seqs: self.stream_removed(stream, seqs)
        entry = _Entry(stream, committer=committer)
        stream.retention = StreamRetention(
            stream, lambda: self.consumers.get(name, {}).values(), entry.consumers
        )
        self._entries[config.name] = entry
        self._streams[config.name] = stream
        self._index_subjects(config, add=True)
        self._attach(entry)
        self._schedule_expiry(entry)
        return stream

    def _report_recovery(self, name: str, report: RecoveryReport) -> None:
        """Log what opening a stream's file store found damaged (stream, file, offsets,
        lost sequences) and keep it for monitoring."""
        self.recoveries.pop(name, None)
        if report.clean:
            return
        self.recoveries[name] = report
        lines = [str(f) for f in report.findings] + [str(lost) for lost in report.lost]
        log.warning(
            "stream %s: opening its store found %d problem(s) (%s); %d sequence(s) lost",
            name,
            len(report.findings),
            "repaired" if report.repaired else "nothing changed",
            len(report.lost_seqs()),
        )
        for line in lines[:RECOVERY_LOG_LINES_MAX]:
            log.warning("stream %s: %s", name, line)
        if len(lines) > RECOVERY_LOG_LINES_MAX:
            log.warning(
                "stream %s: %d more (brook store check lists them all)",
                name,
                len(lines) - RECOVERY_LOG_LINES_MAX,
            )

    def _attach(self, entry: _Entry) -> None:
        stream = entry.stream
        index = entry.consumers

        def ingest(subject: bytes, reply: bytes | None, header: bytes | None, data: bytes) -> None:
            """Ingest, then tell the consumers what was stored: a kept message concerns
            only those whose filter matches it (`ConsumerIndex`). (What the publish
            removed, by discard-old limits or a rollup, reached every consumer already:
            the stream's `on_removed` and `on_purge`.) It runs for every message stored
            (ADR 0012)."""
            result = stream.ingest(subject, reply, header, data)
            if result.kept:
                for runner in index.matching(subject):
                    runner.message_stored(result.seq)
            wake = stream.next_wakeup_ns
            if wake is not None and (entry.expiry_at is None or wake < entry.expiry_at):
                self._arm_expiry(entry, wake)  # a publish brought an expiry forward

        handler = ingest
        transform = stream.input_transform
        if transform is not None:  # stored under the subject it maps to (ADR 0018)

            def handler(
                subject: bytes, reply: bytes | None, header: bytes | None, data: bytes
            ) -> None:
                ingest(transform.apply(subject), reply, header, data)

        entry.subs = [self.internal.subscribe(s, handler) for s in stream.config.subjects]
        if stream.config.allow_direct:
            direct = DirectGet(stream, self._send_message)
            prefix = f"$JS.API.DIRECT.GET.{stream.name}"
            skip = len(prefix) + 1

            def serve(
                subject: bytes, reply: bytes | None, header: bytes | None, data: bytes
            ) -> None:
                rest = subject[skip:].decode("utf-8", "surrogateescape")
                direct.handle(rest.split(".") if rest else [], reply, data)

            for pattern in (prefix, prefix + ".>"):
                entry.subs.append(self.internal.subscribe(pattern, serve, queue=b"_sys_"))

    def _unregister(self, name: str) -> _Entry:
        """Undo `_build`'s registration: subscriptions, timer, indexes; the store stays open."""
        self._detach(name)
        entry = self._entries.pop(name)
        del self._streams[name]
        self._index_subjects(entry.stream.config, add=False)
        return entry

    def _detach(self, name: str) -> None:
        entry = self._entries[name]
        for sub in entry.subs:
            self.internal.unsubscribe(sub)
        entry.subs = []
        self._disarm_expiry(entry)

    def _schedule_expiry(self, entry: _Entry) -> None:
        """Expire what is due now and arm the timer for the next expiry, if any. (The
        consumers hear of what expired from the stream: `stream_removed`.)"""
        before_last = entry.stream.store.state().last_seq
        entry.stream.expire()
        after_last = entry.stream.store.state().last_seq
        if after_last != before_last:  # subject delete markers were stored
            for runner in list(self.consumers.get(entry.stream.name, {}).values()):
                runner.message_stored(after_last)
        wake = entry.stream.next_wakeup_ns
        if wake is None:
            self._disarm_expiry(entry)
        else:
            self._arm_expiry(entry, wake)

    def _arm_expiry(self, entry: _Entry, at_ns: int) -> None:
        self._disarm_expiry(entry)
        if self._loop is None:
            return
        delay_s = max(at_ns - self.now_ns(), 0) / 1e9
        entry.expiry = self._loop.call_later(delay_s, self._expire, entry)
        entry.expiry_at = at_ns

    def _disarm_expiry(self, entry: _Entry) -> None:
        if entry.expiry is not None:
            entry.expiry.cancel()
        entry.expiry = None
        entry.expiry_at = None

    def _expire(self, entry: _Entry) -> None:
        entry.expiry = None
        entry.expiry_at = None
        if self._entries.get(entry.stream.name) is entry:
            self._schedule_expiry(entry)

    def _send_ack(self, reply: bytes, ack: bytes) -> None:
        self.internal.publish(reply, ack)

    def _send_message(self, reply: bytes, header: bytes, payload: bytes) -> None:
        self.internal.publish(reply, payload, header=header)

    # ------------------------------------------------------------------ persistence

    def keeps_files(self, config: StreamConfig) -> bool:
        """Whether a stream of this configuration keeps its messages in a file store."""
        return config.storage == "file"  # never memory: there is a store (ADR 0010)

    def _persist(self, stream: Stream, *, new: bool = False) -> None:
        """Write the stream's definition durably: a created one (`new`) survives a power
        loss (its empty store's files become durable with its first message, FileStore)."""
        directory = self.root / stream.name
        directory.mkdir(parents=True, exist_ok=True)
        write_atomically(directory / STREAM_FILE, stream_record(stream.config, stream.created_ns))
        if new:
            fsync_directory(self.root)  # the entry of the stream's directory

    def _open_existing(self, directory: Path) -> None:
        path = directory / STREAM_FILE
        record = json.loads(path.read_text())
        config = models.parse_stream_config(record["config"])
        if config.name != directory.name:
            raise ValueError(f"{path}: name {config.name!r} does not match its directory")
        stream = self._build(config, int(record["created_ns"]))
        log.info("stream %s opened (%s storage)", config.name, config.storage)
        self._open_stream_consumers(stream)

    def adopt(
        self,
        config: StreamConfig,
        created_ns: int,
        store: MessageStore,
        volatile: list[Consumer],
    ) -> Stream:
        """Serve a restored stream (jetstream/snapshot/): its directory, if it keeps one, is
        in place with its durable consumers' files, `store` is open on it, and `volatile`
        holds the (config, created_ns, state) of the consumers that live in memory only."""
        stream = self._build(config, created_ns, store=store)
        self._open_stream_consumers(stream, volatile)
        return stream

    def _open_stream_consumers(self, stream: Stream, volatile: Sequence[Consumer] = ()) -> None:
        """Start a stream's persisted consumers, then `volatile` ones; retention is
        recovered only if every one of them runs (one that failed may hold messages)."""
        self._open_consumers(stream, volatile)
        on_disk = (self.root / stream.name / CONSUMERS_DIR).glob("*.json")
        persisted = len(volatile) + len(list(on_disk))
        if len(self.consumers.get(stream.name, {})) >= persisted:
            try:
                self._retention(stream).recovered()
            except StoreError as exc:  # a full disk: the sweep is done at the next start
                stream.write_failed("remove the messages no consumer holds", exc)
        else:  # damaged metadata never deletes messages: not even those only it held
            log.warning(
                "stream %s: not every consumer could be restored; retention left as found",
                stream.name,
            )

    # ------------------------------------------------------------------ accounting

    def store_statistics(self) -> dict[str, Any]:
        """Monitoring (`/varz` jetstream.brook_store): the store filesystem's free space
        and reserve, and what opening each stream's file store found damaged."""
        out: dict[str, Any] = self.space.statistics() if self.space is not None else {}
        out["damaged_streams"] = {
            name: {
                "repaired": report.repaired,
                "num_findings": len(report.findings),
                "findings": [asdict(f) for f in report.findings[:RECOVERY_LOG_LINES_MAX]],
                "lost": [asdict(lost) for lost in report.lost[:RECOVERY_LOG_LINES_MAX]],
            }
            for name, report in sorted(self.recoveries.items())
        }
        return out

    def usage(self) -> tuple[int, int]:
        """(memory bytes, file bytes) stored across all streams."""
        memory = file = 0
        for entry in self._entries.values():
            size = entry.stream.store.state().bytes
            if entry.stream.config.storage == "memory":
                memory += size
            else:
                file += size
        return memory, file


def _request_sync(committer: GroupCommitter) -> Callable[[], None]:
    """A file store's `on_reclaim`: a sync soon, which deletes the reclaimed segments."""

    def request() -> None:
        committer.request(_ignore)

    return request


def _ignore(_error: BaseException | None) -> None:
    """No one waits for this sync; a failure is logged by the committer."""
