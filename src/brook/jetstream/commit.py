"""Group commit: many appends, one fsync, then all their acknowledgements.

A stream appends each message to its store on the event loop (a write to the OS, cheap)
and asks the committer to run `on_durable` once the message is on stable storage. The
committer runs `store.sync()` in a worker thread; every request that arrived before that
sync started is satisfied by it, and requests arriving during it wait for the next one.
So under load one fsync covers a whole batch of publishes, which is how Brook acknowledges
only durable messages and stays fast (docs/adr/0004-group-commit.md).

If a sync fails, the waiting callbacks receive the error instead: a PubAck is never sent
for a message that may not be durable. Every committer of a server counts what it owes in
one `CommitBacklog` (backlog.py), which bounds it by pausing the publishers.

Compiled (mypyc, ADR 0045's group; ADR 0068): `request_ack` runs for every publish and
`_done`'s loop sends every PubAck. A batch goes to the server's bounded sync executor as
one work item whose thread runs the sync and hands the outcome back to the loop with one
`call_soon_threadsafe`: not `run_in_executor`'s future chained to an asyncio future with a
callback per batch. The executor is shut down only after every committer drained, with
its queued work run (`shutdown(wait=True)`); a batch it refuses (shut down already) is
answered as a failed sync, so no PubAck is sent for it and `drain` still ends.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from concurrent.futures import Executor

from brook.jetstream.backlog import CommitBacklog

log = logging.getLogger("brook.commit")

DurableCallback = Callable[[BaseException | None], None]
AckSender = Callable[[bytes, bytes], object]
"""(reply subject, PubAck) -> anything (ignored): how a committer's PubAcks leave"""


class GroupCommitter:
    """One file stream's group commit: what waits for the next sync, and the batch that
    waits for the sync under way (at most one per committer)."""

    def __init__(
        self,
        sync: Callable[[], None],
        executor: Executor | None,
        *,
        loop: asyncio.AbstractEventLoop | None = None,
        backlog: CommitBacklog | None = None,
    ) -> None:
        self._sync = sync
        self._backlog = backlog if backlog is not None else CommitBacklog(0)
        self._executor = executor
        self._loop = loop or asyncio.get_running_loop()
        # In request order: callbacks, and PubAcks as (reply, ack) (`request_ack`).
        self._waiting: list[DurableCallback | tuple[bytes, bytes]] = []
        self._send_ack: AckSender = _no_ack_sender
        self._failed_ack: Callable[[BaseException], bytes] | None = None
        self._in_flight = False
        self.syncs = 0  # statistics: fsync batches run
        self.committed = 0  # statistics: callbacks satisfied

    @property
    def pending(self) -> int:
        return len(self._waiting)

    def request(self, on_durable: DurableCallback) -> None:
        """Call `on_durable(None)` once everything stored so far is durable."""
        self._waiting.append(on_durable)
        backlog = self._backlog  # counted inline: this runs for every publish
        backlog.owed += 1
        backlog.contributed = True
        if not self._in_flight:
            self._start()

    def acks_by(self, send: AckSender, failed: Callable[[BaseException], bytes]) -> None:
        """How `request_ack`'s PubAcks are sent: `send(reply, ack)`, or after a failed
        sync `send(reply, failed(error))` (the stream that owns this committer)."""
        self._send_ack = send
        self._failed_ack = failed

    def request_ack(self, reply: bytes, ack: bytes) -> None:
        """Send `ack` to `reply` once everything stored so far is durable (`acks_by`):
        `request` with no callback made per publish; the PubAcks a sync satisfies are
        sent in one loop, in order with the callbacks."""
        self._waiting.append((reply, ack))
        backlog = self._backlog  # counted inline: this runs for every publish
        backlog.owed += 1
        backlog.contributed = True
        if not self._in_flight:
            self._start()

    def _start(self) -> None:
        batch = self._waiting
        self._waiting = []
        self._in_flight = True
        executor = self._executor
        try:
            if executor is None:  # the loop's default executor (tests)
                self._loop.run_in_executor(None, self._run, batch)
            else:
                executor.submit(self._run, batch)
        except RuntimeError as exc:  # the executor is shut down: the sync cannot run
            self._loop.call_soon(self._done, batch, exc)

    def _run(self, batch: list[DurableCallback | tuple[bytes, bytes]]) -> None:
        """In a worker thread: the sync, then `_done` back on the loop with its outcome,
        one `call_soon_threadsafe` (no future per batch, nor one chained to it)."""
        error: BaseException | None = None
        try:
            self._sync()
        except BaseException as exc:  # what run_in_executor's future would have held
            error = exc
        self._loop.call_soon_threadsafe(self._done, batch, error)

    def _done(
        self, batch: list[DurableCallback | tuple[bytes, bytes]], error: BaseException | None
    ) -> None:
        self._in_flight = False
        self.syncs += 1
        failed_ack = None
        if error is not None:
            log.error("sync failed; %d acknowledgements withheld: %s", len(batch), error)
            if self._failed_ack is not None:
                failed_ack = self._failed_ack(error)
        send = self._send_ack
        for entry in batch:
            try:
                if isinstance(entry, tuple):
                    send(entry[0], entry[1] if failed_ack is None else failed_ack)
                else:
                    entry(error)
            except Exception:
                log.exception("durable callback failed")
        self.committed += len(batch)
        self._backlog.satisfied(len(batch))
        if self._waiting:
            self._start()

    async def drain(self) -> None:
        """Wait until nothing is waiting or in flight (shutdown)."""
        while self._in_flight or self._waiting:
            done: asyncio.Future[None] = self._loop.create_future()
            self.request(functools.partial(_wake, done))
            await done


def _wake(done: asyncio.Future[None], _error: BaseException | None) -> None:
    if not done.done():
        done.set_result(None)


def _no_ack_sender(reply: bytes, ack: bytes) -> None:
    raise RuntimeError("GroupCommitter.request_ack before acks_by")
