"""Durable consumers on disk: `streams/<stream>/consumers/<name>.json`, kept current.

Durable consumers of file streams (not `mem_storage` ones, not ephemerals) are persisted as
`{"config", "created_ns", "state": ConsumerState.snapshot()}`, written atomically. The
config is written synchronously on create and update; a state change marks the consumer
dirty and a flush runs on the sync executor, at most one per consumer in flight and, while
only plain acks and deliveries wait for it, at most one per `flush_interval_s` (as
nats-server's consumer store, which writes about ten times a second: a snapshot of a
thousand pending messages costs a millisecond to encode, every time), changes made
meanwhile coalescing into the next one. An ack with a reply subject (ack_sync) is
answered only once a snapshot holding it is durable, and its flush does not wait.
`drain()` and `close()` write every dirty consumer at shutdown. A damaged file is
reported and skipped, never deleted. A consumer delivers a message as soon as it is
stored, before its group commit, so after a power loss its file can be ahead of its
stream: `load` says how far each consumer got (`seen_up_to`) and the engine moves the
stream past it rather than the consumer back (sequences are never reused).

A write that fails (a full disk) is logged once, not at every attempt, and retried every
`CONSUMER_WRITE_RETRY_S` until it succeeds; acks waiting for it (ack_sync) are answered
then, the consumer's state in memory stays as it is meanwhile.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from brook import limits
from brook.jetstream.consumer.executor import Waiter
from brook.jetstream.consumer.runner import ConsumerRunner
from brook.jetstream.fsutil import write_atomically
from brook.jetstream.models.consumer_config import ConsumerConfig
from brook.jetstream.models.consumer_json import consumer_config_to_json
from brook.jetstream.models.consumer_rules import parse_consumer_create
from brook.jetstream.stream import Stream

log = logging.getLogger("brook.jetstream.consumers")

CONSUMERS_DIR = "consumers"


@dataclass(eq=False)
class _File:
    """Persistence bookkeeping of one durable consumer."""

    runner: ConsumerRunner
    path: Path
    dirty: bool = False
    deleted: bool = False
    flushing: asyncio.Future[None] | None = None
    next_flush_at: float = 0.0  # loop time before which no flush starts unless awaited
    delayed: asyncio.TimerHandle | None = None  # the flush put off until next_flush_at
    failing: bool = False  # the last write failed: retried on a timer, not at every change
    waiters: list[Waiter] = field(default_factory=list)  # for the next flush
    in_flight: list[Waiter] = field(default_factory=list)  # for the running one


def consumer_record(runner: ConsumerRunner) -> bytes:
    """The content of a durable consumer's file (and of a stream snapshot's consumers)."""
    record = {
        "config": consumer_config_to_json(runner.config),
        "created_ns": runner.created_ns,
        "state": runner.state.snapshot(),
    }
    return json.dumps(record, separators=(",", ":")).encode()


def is_persisted(storage: str, config: ConsumerConfig) -> bool:
    """Whether a consumer is kept on disk (given a store directory): a durable of a file
    stream, unless it asked for `mem_storage`."""
    return storage == "file" and bool(config.durable_name) and not config.mem_storage


class ConsumerFiles:
    def __init__(
        self,
        root: Path,
        executor: Executor,
        *,
        flush_interval_s: float = limits.CONSUMER_FLUSH_INTERVAL_S,
    ) -> None:
        self.root = root  # the `streams` directory
        self._executor = executor
        self._flush_interval_s = flush_interval_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._files: dict[Path, _File] = {}
        # The same records keyed by their runner (identity), always {cf.runner: cf for cf in
        # _files.values()}: `changed` runs on every ack and delivery, and rebuilding the
        # runner's Path (and hashing it) there cost more than the rest of the hook.
        self._by_runner: dict[ConsumerRunner, _File] = {}
        self._closed = False  # no background flushes any more (shutdown)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def path_for(self, stream: Stream, config: ConsumerConfig) -> Path | None:
        """Where a consumer is persisted, or None when it is not (ephemeral, memory)."""
        if not is_persisted(stream.config.storage, config):
            return None
        return self.root / stream.name / CONSUMERS_DIR / f"{config.name}.json"

    def _file(self, runner: ConsumerRunner) -> _File | None:
        path = self.path_for(runner.stream, runner.config)
        return self._files.get(path) if path is not None else None

    # ------------------------------------------------------------------ lifecycle of one

    def _drop(self, path: Path | None) -> _File | None:
        """Remove and return the record kept for `path`, from both indexes."""
        cf = self._files.pop(path, None) if path is not None else None
        if cf is not None:
            self._cancel_delayed(cf)
            if self._by_runner.get(cf.runner) is cf:
                del self._by_runner[cf.runner]
        return cf

    def track(self, runner: ConsumerRunner, path: Path, *, write_now: bool) -> None:
        """Start persisting `runner`; a new consumer's file is written before this returns."""
        self._drop(path)
        self._files[path] = self._by_runner[runner] = _File(runner, path)
        if write_now:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(path, consumer_record(runner))

    def updated(self, runner: ConsumerRunner) -> None:
        """The consumer's config changed: write it now, or with the flush under way."""
        cf = self._file(runner)
        if cf is None:
            return
        if cf.flushing is None:
            write_atomically(cf.path, consumer_record(runner))
        else:
            cf.dirty = True

    def forget(self, runner: ConsumerRunner, *, unlink: bool) -> None:
        """The consumer (or its stream) is deleted; `unlink` removes its file too."""
        cf = self._drop(self.path_for(runner.stream, runner.config))
        if cf is None:
            return
        cf.deleted = True
        cf.dirty = False
        cf.waiters.clear()
        cf.in_flight.clear()
        if unlink:
            cf.path.unlink(missing_ok=True)

    def release(self, runner: ConsumerRunner) -> None:
        """Shutdown: stop tracking without touching the (already written) file."""
        self._drop(self.path_for(runner.stream, runner.config))

    # ------------------------------------------------------------------ state changes

    def changed(self, runner: ConsumerRunner, changed: bool, waiter: Waiter | None) -> None:
        """The runner's `on_change` hook: schedule a flush; answer `waiter` once durable."""
        cf = self._by_runner.get(runner)  # the record `_file(runner)` finds, if it is runner's
        if cf is None:
            if waiter is not None:
                waiter()
            return
        if changed:
            cf.dirty = True
        if waiter is not None:
            if cf.dirty:
                cf.waiters.append(waiter)
            elif cf.flushing is not None:
                cf.in_flight.append(waiter)  # the running flush already holds this state
            else:
                waiter()  # nothing unsaved: the state it acknowledges is durable
        if cf.dirty and cf.flushing is None:
            self._flush_soon(cf)

    def _flush_soon(self, cf: _File) -> None:
        """`_flush` now if an ack waits for it or the interval has passed, else once it
        has (one timer per consumer)."""
        if self._loop is None or self._closed:
            return
        wait = cf.next_flush_at - self._loop.time()
        if (cf.waiters and not cf.failing) or wait <= 0:
            self._flush(cf)
        elif cf.delayed is None:
            cf.delayed = self._loop.call_later(wait, self._delayed_flush, cf)

    def _delayed_flush(self, cf: _File) -> None:
        cf.delayed = None
        if cf.dirty and cf.flushing is None and not cf.deleted:
            self._flush(cf)

    @staticmethod
    def _cancel_delayed(cf: _File) -> None:
        if cf.delayed is not None:
            cf.delayed.cancel()
            cf.delayed = None

    def _flush(self, cf: _File) -> None:
        """Snapshot now (on the loop) and write it on the sync executor."""
        if self._loop is None or self._closed:
            return
        self._cancel_delayed(cf)
        cf.next_flush_at = self._loop.time() + self._flush_interval_s
        cf.dirty = False
        cf.in_flight, cf.waiters = cf.waiters, []
        future = self._loop.run_in_executor(
            self._executor, write_atomically, cf.path, consumer_record(cf.runner)
        )
        cf.flushing = future
        future.add_done_callback(lambda f: self._flushed(cf, f))

    def _flushed(self, cf: _File, future: asyncio.Future[None]) -> None:
        cf.flushing = None
        waiters, cf.in_flight = cf.in_flight, []
        if cf.deleted:  # the write raced the consumer's deletion: undo it
            successor = self._files.get(cf.path)
            if successor is None:
                cf.path.unlink(missing_ok=True)
            else:  # a consumer of the same name was created meanwhile: rewrite its file
                successor.dirty = True
                if successor.flushing is None:
                    self._flush(successor)
            return
        exc = future.exception()
        if exc is not None:
            # The acks it held are not durable: they wait for a write that succeeds.
            if not cf.failing:
                log.error(
                    "consumer file %s could not be written: %s; retrying every %gs, "
                    "ack confirmations (ack_sync) wait until it is",
                    cf.path,
                    exc,
                    limits.CONSUMER_WRITE_RETRY_S,
                )
            cf.failing = True
            cf.dirty = True
            cf.waiters[:0] = waiters
            assert self._loop is not None
            cf.next_flush_at = self._loop.time() + limits.CONSUMER_WRITE_RETRY_S
            self._flush_soon(cf)
            return
        if cf.failing:
            cf.failing = False
            log.warning("consumer file %s written again", cf.path)
        for waiter in waiters:
            waiter()
        if cf.dirty:
            self._flush_soon(cf)

    # ------------------------------------------------------------------ shutdown

    async def drain(self) -> None:
        """Wait for running flushes and flush what is dirty, a few rounds."""
        for _ in range(3):  # changes made during a flush need another
            running = [cf.flushing for cf in self._files.values() if cf.flushing]
            if running:
                await asyncio.gather(*running, return_exceptions=True)
            for cf in list(self._files.values()):
                if cf.dirty and cf.flushing is None:
                    self._flush(cf)
            if not any(cf.flushing for cf in self._files.values()):
                break

    async def close(self) -> None:
        """No more background flushes: wait for running ones, write what is left here."""
        self._closed = True
        for cf in self._files.values():
            self._cancel_delayed(cf)
        running = [cf.flushing for cf in self._files.values() if cf.flushing]
        if running:
            await asyncio.gather(*running, return_exceptions=True)
        for cf in list(self._files.values()):
            if not cf.dirty:
                continue
            cf.dirty = False
            try:
                write_atomically(cf.path, consumer_record(cf.runner))
            except OSError as exc:
                log.error("consumer file %s could not be written: %s", cf.path, exc)
                continue
            waiters, cf.waiters = cf.waiters, []
            for waiter in waiters:
                waiter()

    # ------------------------------------------------------------------ start

    def load(self, stream: Stream) -> Iterator[tuple[ConsumerConfig, int, dict[str, Any], int]]:
        """(config, created_ns, state snapshot, `seen_up_to`) of each persisted consumer
        of `stream`."""
        if stream.config.storage != "file":
            return
        directory = self.root / stream.name / CONSUMERS_DIR
        if not directory.is_dir():
            return
        for path in sorted(directory.glob("*.json")):
            try:
                record = json.loads(path.read_text())
                config = parse_consumer_create(
                    {"stream_name": stream.name, "config": record["config"]},
                    stream=stream.config,
                    subject_stream=stream.name,
                    subject_consumer=path.name[: -len(".json")],
                    durable_subject=True,
                )
                state = dict(record["state"])
                loaded = (config, int(record["created_ns"]), state, seen_by(config, state))
            except Exception as exc:
                log.error("consumer file %s is damaged (%s); skipped, left untouched", path, exc)
                continue
            yield loaded


def seen_by(config: ConsumerConfig, state: dict[str, Any]) -> int:
    """`seen_up_to` of the state of a consumer of `config`."""
    start = config.opt_start_seq if config.deliver_policy == "by_start_sequence" else 0
    return seen_up_to(state, start)


def seen_up_to(state: dict[str, Any], start_seq: int = 0) -> int:
    """The highest stream sequence a persisted consumer state proves the stream had
    assigned: the last it delivered, or the last it looked at (a filtered consumer passes
    messages it does not want; a `new` one starts after the last). A consumer waiting at a
    future `start_seq` (by_start_sequence) has seen nothing there."""
    delivered = state["delivered"]
    seen = int(delivered["stream_seq"]) if int(delivered["consumer_seq"]) > 0 else 0
    next_seq = int(state["next_seq"])
    if next_seq > max(start_seq, 1):
        seen = max(seen, next_seq - 1)
    return seen
