"""The JetStream engine: the registry of streams, their storage and their subscriptions.

At start every stream found on disk (`definitions.py`) is opened, with its consumers
(`consumer/registry.py`); a damaged definition is reported and that stream skipped,
never deleted. The engine checks that no two streams' subjects overlap, subscribes each
stream to its subjects (and its direct get) through an `InternalClient`, gives it an
expiry timer (`expiry_timer.py`), and owns the worker threads that run group commits. Its
ingest callback, run for every message stored (ADR 0012), tells the consumers a kept
message concerns from what `Stream.ingest` says it did (ADR 0017). The JSON API lives in
`jetstream/api/` and calls the methods here (`consumers` for consumer operations).
Two parts of the engine have modules of their own (ADR 0031): the limits and accounting
(`engine_limits.py`) and the mirrors' and sources' links (`engine_links.py`).

The store's filesystem (`space.py`): one `StoreSpace` admits publishes to every file
stream, and a file store that deletes segments asks for a sync at once (its group commit),
so that a purge, an expiry or acks free the space even while no publish is acknowledged.
What opening a file store found damaged is logged and kept for monitoring (`damage.py`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import shutil
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from brook import limits
from brook.config.settings import JetStreamAccountLimits
from brook.config.settings_auth import GLOBAL_ACCOUNT
from brook.jetstream import models
from brook.jetstream.advisories import CREATE, DELETE, MODIFY, Advisories
from brook.jetstream.backlog import CommitBacklog
from brook.jetstream.batch import BatchLimits
from brook.jetstream.commit import GroupCommitter
from brook.jetstream.consumer.acks import ACK_PREFIX, ACK_ROUTE_TOKENS
from brook.jetstream.consumer.registry import Consumer, ConsumerRegistry
from brook.jetstream.consumer.runner import ConsumerRunner, messages_stored
from brook.jetstream.consumer_index import ConsumerIndex
from brook.jetstream.damage import DamageReports
from brook.jetstream.definitions import (
    DATA_DIR,
    STREAMS_DIR,
    read_definition,
    write_definition,
)
from brook.jetstream.direct import DirectGet
from brook.jetstream.engine_limits import EngineLimits
from brook.jetstream.engine_links import OriginLinks
from brook.jetstream.errors import api_error
from brook.jetstream.expiry_timer import ExpiryTimer
from brook.jetstream.link import OriginLink
from brook.jetstream.models.stream_config import StreamConfig
from brook.jetstream.quota import Quota, ServerLimits, reservation
from brook.jetstream.sources import RECORD_FILE, SourcedStream, SourcePositions
from brook.jetstream.space import StoreSpace
from brook.jetstream.store.base import MessageStore, is_no_space
from brook.jetstream.store.file import FileStore
from brook.jetstream.store.memory import MemoryStore
from brook.jetstream.stream import Stream
from brook.routing.internal import InternalClient
from brook.routing.router import Router
from brook.routing.subject_index import SubjectIndex
from brook.routing.sublist import MessageHandler, Subscription
from brook.routing.subscriber import Message

log = logging.getLogger("brook.jetstream")


@dataclass
class StreamEntry:
    """One stream as the engine holds it, with what the engine runs for it."""

    stream: Stream
    timer: ExpiryTimer  # runs the stream's expiry when due
    # The stream's consumers by filter subject: which of them a stored message concerns.
    consumers: ConsumerIndex[ConsumerRunner]
    # Where each of its sources stands (none unless it has some), written with its
    # group commits (sources.py).
    positions: SourcePositions
    subs: list[Subscription] = field(default_factory=list)
    committer: GroupCommitter | None = None
    sourced: SourcedStream | None = None  # its sources' side, when it has some
    link: OriginLink | None = None  # a mirror's link to its origin (mirror.py)
    # A mirror's direct gets for its origin (`mirror_direct`), once it caught up.
    mirror_subs: list[Subscription] = field(default_factory=list)


class JetStream(EngineLimits, OriginLinks):
    def __init__(
        self,
        router: Router,
        store_dir: str,
        *,
        now_ns: Callable[[], int] = time.time_ns,
        server_limits: ServerLimits | None = None,
        account_limits: JetStreamAccountLimits | None = None,
        limit_tiers: dict[str, JetStreamAccountLimits] | None = None,
        sync_interval_s: float = 0.0,
        consumer_flush_interval_s: float = limits.CONSUMER_FLUSH_INTERVAL_S,
        free_space_reserve_bytes: int = -1,
        index_snapshot_interval_s: float = limits.INDEX_SNAPSHOT_INTERVAL_S,
        index_hot_segments: int = limits.INDEX_HOT_SEGMENTS,
        segment_slots_max: int = limits.SEGMENT_SLOTS,
        write_buffer_bytes: int = limits.STORE_WRITE_BUFFER_BYTES,
        max_acks_awaiting_sync: int = limits.MAX_ACKS_AWAITING_SYNC,
        batch_limits: BatchLimits | None = None,
        commit_backlog: CommitBacklog | None = None,
        space: StoreSpace | None = None,
        executor: Executor | None = None,
        account: str = GLOBAL_ACCOUNT,
        domain: str = "",
        direct_max_bytes: int = limits.MAX_PENDING_BYTES,
    ) -> None:
        """`batch_limits`, `commit_backlog`, `space` and `executor` (the threads that sync
        stores and write consumer state) are server-wide, shared by the engines of
        several accounts (each its own `store_dir`), so that threads do not grow with
        the accounts; by default its own.
        `account`: the name of the account it serves (its advisories name it).
        `domain`: the JetStream domain its PubAcks and infos name ("": none).
        `direct_max_bytes`: where a direct-get batch without `max_bytes` stops (nats-server:
        its `max_pending`, which a reload cannot change)."""
        self.router = router
        self.domain = domain
        self.direct_max_bytes = direct_max_bytes
        self.internal = InternalClient(router, "jetstream")
        # Acks are published about once each, hundreds to a read: routed by prefix, in runs.
        router.sublist.add_exclusive_prefix(ACK_PREFIX.encode(), ACK_ROUTE_TOKENS)
        self.root = Path(store_dir) / STREAMS_DIR  # file streams live on disk, never in memory
        # The server's store limits (shared with other accounts' engines) and this
        # account's (quota.py); each storage type's `Quota`, None where neither limits it.
        self.server_limits = server_limits or ServerLimits()
        self.server_limits.join(self)
        self._entries: dict[str, StreamEntry] = {}
        self._streams: dict[str, Stream] = {}  # the same streams by name (`streams`)
        # Every stream's subjects -> its name: the overlap check of a create or update
        # walks what the new subjects could share, not every stream.
        self._subjects = SubjectIndex[str]()
        # Its lifecycle advisories (streams here, consumers in the registry), sent on the
        # engine's clock only when someone listens.
        self.advisories = Advisories(
            self.internal,
            account=account,
            domain=domain,
            now_ns=lambda: self.consumers.now_ns(),
        )
        self._owns_executor = executor is None
        self._executor = executor or ThreadPoolExecutor(
            limits.SYNC_THREADS, thread_name_prefix="brook-sync"
        )
        # Every stream's consumers: stream name -> consumer name -> runner, and their
        # operations (durables of file streams are persisted).
        self.consumers = ConsumerRegistry(
            self.internal,
            self.root,
            self._executor,
            now_ns=now_ns,
            flush_interval_s=consumer_flush_interval_s,
            advisories=self.advisories,
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        # 0: acknowledge after fsync (group commit); > 0: nats-server's interval mode.
        self.sync_interval_s = sync_interval_s
        self._sync_timer: asyncio.TimerHandle | None = None
        self._sync_running = False
        # Periodic index snapshots of the file streams (ADR 0046), written one after
        # another by a thread of their own, so group commits never wait behind one.
        self.index_snapshot_interval_s = index_snapshot_interval_s
        self.index_hot_segments = index_hot_segments  # each file store's bound (ADR 0054)
        self.segment_slots_max = segment_slots_max  # each file store's segments (ADR 0061)
        self.write_buffer_bytes = write_buffer_bytes  # each file store's appends (ADR 0051)
        self._snapshot_timer: asyncio.TimerHandle | None = None
        self._snapshot_executor: ThreadPoolExecutor | None = None
        self._snapshot_running = False
        # The PubAcks every group commit owes, bounded by pausing their publishers.
        self.commit_backlog = (
            CommitBacklog(max_acks_awaiting_sync) if commit_backlog is None else commit_backlog
        )
        self._free_space_reserve_bytes = free_space_reserve_bytes
        self._shared_space = space
        self.space: StoreSpace | None = None  # set at start when there is a store
        # Atomic batches staged across streams, and their bounds (batch.py).
        self.batch_limits = batch_limits or BatchLimits()
        self._damage = DamageReports()
        self.account_limits = JetStreamAccountLimits()
        self.limit_tiers: dict[str, JetStreamAccountLimits] | None = None
        self._quotas: dict[str, Quota | None] = {}
        self.set_account_limits(account_limits or JetStreamAccountLimits(), limit_tiers)

    @property
    def now_ns(self) -> Callable[[], int]:
        """The engine's clock (ns since the epoch), which the consumers it starts read
        too: a test may replace it with a manual one before it creates any."""
        return self.consumers.now_ns

    @now_ns.setter
    def now_ns(self, clock: Callable[[], int]) -> None:
        self.consumers.now_ns = clock

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.batch_limits.loop = self._loop  # the streams' idle-batch timers (batch.py)
        self.consumers.start(self._loop)
        if self.sync_interval_s > 0:
            self._sync_timer = self._loop.call_later(self.sync_interval_s, self._interval_sync)
        if self.index_snapshot_interval_s > 0:
            self._snapshot_timer = self._loop.call_later(
                self.index_snapshot_interval_s, self._interval_snapshots
            )
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            if not is_no_space(exc):
                raise
            log.error("cannot create %s: %s; no stream can be created here", self.root, exc)
        self.space = self._shared_space
        if self.space is None:
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
        self.consumers.server_shutdown()

    async def drain(self) -> None:
        """Wait for every pending group commit (and so every owed acknowledgement), then
        write every durable consumer with unsaved state."""
        for entry in list(self._entries.values()):
            if entry.committer is not None:
                await entry.committer.drain()
        await self.consumers.files.drain()

    def _interval_sync(self) -> None:
        """Interval mode: fsync every file store in a worker thread, then re-arm."""
        assert self._loop is not None
        self._sync_timer = self._loop.call_later(self.sync_interval_s, self._interval_sync)
        if self._sync_running:
            return  # the previous round is still syncing; skip rather than pile up
        stores = [
            (e.positions, e.stream.store)
            for e in self._entries.values()
            if e.stream.config.storage == "file"
        ]

        def sync_all() -> None:
            for positions, store in stores:
                try:
                    positions.sync(store)
                except Exception:
                    log.exception("interval sync failed")

        self._sync_running = True
        future = self._loop.run_in_executor(self._executor, sync_all)
        future.add_done_callback(lambda _f: setattr(self, "_sync_running", False))

    def _interval_snapshots(self) -> None:
        """Copy the index of every file store that changed (on the loop: a copy of its
        columns), then sync and write the snapshots in the snapshot thread; re-arm."""
        assert self._loop is not None
        self._snapshot_timer = self._loop.call_later(
            self.index_snapshot_interval_s, self._interval_snapshots
        )
        if self._snapshot_running:
            return  # the previous round is still writing
        jobs = [
            job
            for e in self._entries.values()
            if isinstance(e.stream.store, FileStore)
            and (job := e.stream.store.capture_snapshot()) is not None
        ]
        if not jobs:
            return

        def write_all() -> None:
            for job in jobs:
                try:
                    job()
                except Exception:
                    log.exception("index snapshot failed")

        if self._snapshot_executor is None:
            self._snapshot_executor = ThreadPoolExecutor(1, thread_name_prefix="brook-indexsnap")
        self._snapshot_running = True
        future = self._loop.run_in_executor(self._snapshot_executor, write_all)
        future.add_done_callback(lambda _f: setattr(self, "_snapshot_running", False))

    async def stop(self) -> None:
        if self._sync_timer is not None:
            self._sync_timer.cancel()
            self._sync_timer = None
        if self._snapshot_timer is not None:
            self._snapshot_timer.cancel()
            self._snapshot_timer = None
        await self.drain()
        if self._snapshot_executor is not None:
            # A round in progress ends once its stores close (their snapshots then stale).
            self._snapshot_executor.shutdown(wait=False)
            self._snapshot_executor = None
        await self.consumers.files.close()
        for name in list(self._entries):
            self._unregister(name, notify=False).stream.close()
        self.internal.close()
        if self._owns_executor:
            self._executor.shutdown(wait=True)
        self.server_limits.leave(self)

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
        # nats-server checks the limits on the request as sent (no `max_bytes`: no bytes
        # reserved), then the config (10113, 10122), then, for a new stream, the limits
        # again with its defaults applied (no `max_bytes`: 1 byte).
        self._check_limits(config, max(config.max_bytes, 0), count=True)
        self._check_stream_bytes(config)
        existing = self._entries.get(config.name)
        if existing is not None:
            if models.same_config(existing.stream.config, config):
                return existing.stream, False
            raise api_error("STREAM_NAME_EXIST")
        self._check_limits(config, reservation(config.max_bytes), count=False)
        self._check_overlap(config.name, config.subjects)
        if config.storage == "file" and self.space is not None and not self.space.admit(0):
            raise api_error("INSUFFICIENT_RESOURCES")
        created = self.now_ns()
        directory = self.root / config.name
        fresh = not directory.exists()
        try:
            stream = self._build(config, created)
            if self.keeps_files(config):
                write_definition(self.root, config, created, new=True)
        except BaseException:
            if config.name in self._entries:  # built but not persisted: undo it
                self._unregister(config.name, notify=False).stream.close()
            if fresh:
                shutil.rmtree(directory, ignore_errors=True)
            raise
        self.advisories.stream_action(config.name, CREATE)
        return stream, True

    def update(self, config: StreamConfig) -> Stream:
        entry = self._entries.get(config.name)
        if entry is None:
            raise api_error("STREAM_NOT_FOUND")
        self._check_stream_bytes(config)
        models.check_update(entry.stream.config, config)
        # nats-server reserves what a larger `max_bytes` adds; the account already
        # counts the rest of this stream's (the server counts all of its old one).
        added = max(max(config.max_bytes, 0) - max(entry.stream.config.max_bytes, 0), 0)
        held = max(config.max_bytes, 0) - added
        self._check_limits(config, added, count=False, held=held)
        self._check_overlap(config.name, config.subjects)
        old_retention = entry.stream.config.retention
        if config.mirror is None:
            self._unlink(entry, remove=True)  # a promotion: the stream takes publishes now
        self._detach(config.name)
        self._index_subjects(entry.stream.config, add=False)
        entry.stream.reconfigure(config)
        self._configure_sources(entry)
        self._index_subjects(config, add=True)
        self._attach(entry)
        if self.keeps_files(config):
            write_definition(self.root, config, entry.stream.created_ns, new=False)
        entry.stream.enforce_all_limits()
        self.consumers.stream_updated(
            entry.stream, retention_changed=config.retention != old_retention
        )
        entry.timer.run()
        self.advisories.stream_action(config.name, MODIFY)
        return entry.stream

    def delete(self, name: str) -> None:
        entry = self._entries.get(name)
        if entry is None:
            raise api_error("STREAM_NOT_FOUND")
        self._unregister(name, notify=True)  # its consumers' delete advisories first
        self._damage.forget(name)
        entry.stream.close()
        shutil.rmtree(self.root / name, ignore_errors=True)
        self.advisories.stream_action(name, DELETE)

    def check_new(self, config: StreamConfig, *, exists: str) -> None:
        """Raise unless a stream of `config` could be added now: the API error `exists` if
        the name is taken, 10065 if its subjects overlap another stream's."""
        self._check_stream_bytes(config)
        self._check_limits(config, reservation(config.max_bytes), count=True)
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
        positions = SourcePositions(
            self.root / config.name / RECORD_FILE if self.keeps_files(config) else None
        )
        if self.keeps_files(config):
            if store is None:
                # Made by the store: the first sync of a new one makes its directories
                # durable (FileStore).
                directory = self.root / config.name / DATA_DIR
                store = FileStore(
                    directory=directory,
                    first_seq=config.first_seq or 1,
                    index_hot_segments=self.index_hot_segments,
                    segment_slots_max=self.segment_slots_max,
                )
                self._damage.opened(config.name, store.recovery_report)
            if self.sync_interval_s <= 0:
                committer = GroupCommitter(
                    functools.partial(positions.sync, store),
                    self._executor,
                    loop=self._loop,
                    backlog=self.commit_backlog,
                )
                assert isinstance(store, FileStore)  # a restore opens one for a file stream
                store.on_reclaim = _request_sync(committer)
                # PubAcks wait for a sync, which writes the buffered appends first
                if config.persist_mode != "async" and self.write_buffer_bytes:
                    store.buffer_writes(self.write_buffer_bytes)
        elif store is None:
            store = MemoryStore(first_seq=config.first_seq or 1)
        stream = Stream(
            config,
            store,
            now_ns=self.now_ns,
            # A PubAck is a plain publish: no frame between (`Router.publish_plain`).
            send_ack=functools.partial(self.internal.router.publish_plain, self.internal),
            committer=committer,
            created_ns=created_ns,
            space=self.space if config.storage == "file" else None,
            send_message=self._send_message,
            batch_limits=self.batch_limits,
            quota=self._quotas[config.storage],
            domain=self.domain,
        )
        timer = ExpiryTimer(stream, self._loop, self.now_ns)
        entry = StreamEntry(
            stream, timer, self.consumers.add_stream(stream), positions, committer=committer
        )
        self._entries[config.name] = entry
        self._configure_sources(entry)
        self._streams[config.name] = stream
        self._index_subjects(config, add=True)
        self._attach(entry)
        self._link(entry)
        entry.timer.run()
        return stream

    def _attach(self, entry: StreamEntry) -> None:
        """Subscribe the stream to its subjects (and direct get)."""
        stream = entry.stream
        # What a stored message concerns: only the consumers whose filter matches it
        # (`ConsumerIndex`), told by `messages_stored`; the usual publish compiled.
        ingress = stream.ingress(entry.consumers, messages_stored, entry.timer)
        handler: MessageHandler = ingress
        transform = stream.input_transform
        if transform is not None:  # stored under the subject it maps to (ADR 0018)

            def handler(
                subject: bytes, reply: bytes | None, header: bytes | None, data: bytes
            ) -> None:
                ingress(transform.apply(subject), reply, header, data)

        entry.subs = [self.internal.subscribe(s, handler) for s in stream.config.subjects]
        if stream.config.allow_direct:
            entry.subs += self._serve_direct(stream, stream.name)

    def _serve_direct(self, stream: Stream, name: str) -> list[Subscription]:
        """Answer direct gets for the stream `name` from `stream` (itself, or the origin
        of a mirror with `mirror_direct`), in nats-server's queue group: each request is
        answered by one of the streams that serve that name."""
        direct = DirectGet(stream, self._send_message, self._send_run, self.direct_max_bytes)
        prefix = f"$JS.API.DIRECT.GET.{name}"
        skip = len(prefix) + 1

        def serve(subject: bytes, reply: bytes | None, header: bytes | None, data: bytes) -> None:
            rest = subject[skip:].decode("utf-8", "surrogateescape")
            direct.handle(rest.split(".") if rest else [], reply, header, data)

        return [
            self.internal.subscribe(pattern, serve, queue=b"_sys_")
            for pattern in (prefix, prefix + ".>")
        ]

    def _unregister(self, name: str, *, notify: bool) -> StreamEntry:
        """Undo `_build`'s registration: consumers (stopped; `notify` when the stream is
        deleted), subscriptions, timer, indexes; the store stays open."""
        self.consumers.remove_stream(name, notify=notify)
        self._detach(name)
        entry = self._entries.pop(name)
        self._unlink(entry, remove=notify)  # deleted: the origins' consumers too
        if entry.sourced is not None:
            for link in entry.sourced.links.values():
                if notify:
                    link.remove()
                else:
                    link.close()
            entry.sourced.links.clear()
        del self._streams[name]
        self._index_subjects(entry.stream.config, add=False)
        return entry

    def _detach(self, name: str) -> None:
        entry = self._entries[name]
        for sub in entry.subs:
            self.internal.unsubscribe(sub)
        entry.subs = []
        entry.timer.cancel()

    def _send_message(self, reply: bytes, header: bytes, payload: bytes) -> None:
        self.internal.publish(reply, payload, header=header)

    def _send_run(self, reply: bytes, messages: list[Message]) -> None:
        self.internal.router.publish_run(self.internal, reply, messages)

    # ------------------------------------------------------------------ persistence

    def keeps_files(self, config: StreamConfig) -> bool:
        """Whether a stream of this configuration keeps its messages in a file store."""
        return config.storage == "file"  # never memory: there is a store (ADR 0010)

    def _open_existing(self, directory: Path) -> None:
        config, created_ns = read_definition(directory)
        if not self.keeps_files(config):
            # A memory stream does not outlive its server, as on nats-server (whose
            # restarted server answers 10059 for it); its directory is a restored
            # snapshot's or an older Brook's, which kept memory streams' definitions.
            log.info("memory stream %s ended with the server before; removed", config.name)
            shutil.rmtree(directory, ignore_errors=True)
            return
        stream = self._build(config, created_ns)
        log.info("stream %s opened (%s storage)", config.name, config.storage)
        self.consumers.open(stream)

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
        self.advisories.stream_action(config.name, CREATE)  # as nats-server's addStream
        self.consumers.open(stream, volatile)
        if stream.quota is not None:
            stream.quota.forget()  # its messages arrived unadmitted: measured next time
        return stream


def _request_sync(committer: GroupCommitter) -> Callable[[], None]:
    """A file store's `on_reclaim`: a sync soon, which deletes the reclaimed segments."""

    def request() -> None:
        committer.request(_ignore)

    return request


def _ignore(_error: BaseException | None) -> None:
    """No one waits for this sync; a failure is logged by the committer."""
