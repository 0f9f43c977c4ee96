"""A write task's rows as one ADR-50 fast batch: one flow ack per up to 500 rows, not a PubAck
each (ADR 0063).

A stream with `allow_batched` takes publishes whose reply subject is
`<inbox>.<batch id>.<flow>.fail.<batch seq>.<op>.$FI` (op 0 starts the batch, 1 appends, 3
ends it with a marker that stores nothing). Each message goes through the stream's checks as
a plain publish does, `Nats-Msg-Id` dedup included: a duplicate is skipped silently and the
batch goes on (nats-server 2.15.1 and Brook alike, `tests/spark/test_fast_batch.py`). The
server answers on the latest reply subject: `{"type":"ack","seq":S,"msgs":N}` when the rows
up to batch sequence S are stored (on stable storage, as a PubAck means), and at the end
`{"stream":..,"seq":<last stored>,"batch":..,"count":C}`. So the connector keeps a window
of frames, drops them as flow acks cover them, and reads one small JSON per 500 rows.

What the server does not say is which rows were duplicates: a fast batch's report counts
the rows acknowledged (`batched`), not `published` and `duplicates` apart.

Anything else, from the first reply on, ends the fast batch for this task and hands every
row not yet covered by a flow ack to `Publisher`, the per-message path, with the same ids:
a stream without `allow_batched` (error 10205 to the first row, nothing stored), a refused
row (the per-message path then reports the error as it always did), a gap, an unknown
batch (expired, or rows spread over several streams) or no reply within the timeout. Rows
the server did store are dropped as duplicates, so a fallback never publishes a row twice.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable

from brook_spark.publish import Publisher, PublishReport
from brook_spark.wire import RawClient

FLOW_MAX = 500  # nats-server acks at most every 500 messages, shared among a stream's batches
_FLOW_ACK = re.compile(rb'\{"type":"ack","seq":(\d+),"msgs":\d+\}')
_BATCH_ACK = re.compile(
    rb'\{"stream":"[^"\\]*",(?:"domain":"[^"\\]*",)?"seq":(\d+),"batch":"([^"\\]*)",'
    rb'"count":(\d+)\}\s*'
)


class FastBatchPublisher:
    """Runs on the runtime loop, as `Publisher` (the fallback it owns) does: `send` the frames
    of consecutive rows (built by `frames_for` with `reply_prefix`, `reply_suffix` and
    `reply_base`, which switch to the per-message path's after a fallback), then `finish`."""

    def __init__(self, nc: RawClient, max_pending: int, timeout_s: float) -> None:
        self.nc = nc
        self.plain = Publisher(nc, max_pending, timeout_s)
        self.max_pending = max_pending
        self.timeout_s = timeout_s
        # The server acks every `flow` rows at most; half the window keeps rows flowing.
        self.flow = max(1, min(FLOW_MAX, max_pending // 2))
        self.batch_id = os.urandom(12).hex()
        self.fast = True  # until the first reply that is not a flow ack
        self._started = False  # the first row's flow ack came
        self._frames: dict[int, bytes] = {}  # batch sequence (row + 1) -> frame, not yet acked
        self._sent = 0  # the highest batch sequence sent
        self._acked = 0  # the highest batch sequence a flow ack covers
        self._last_subject = b""
        self._end: tuple[int, int] | None = None  # the batch PubAck's (seq, count)
        self._progress = asyncio.Event()
        self._prefix = b""

    @property
    def reply_prefix(self) -> bytes:
        return self._prefix if self.fast else self.plain.reply_prefix

    @property
    def reply_suffix(self) -> bytes:
        return b".1.$FI" if self.fast else b""

    @property
    def reply_base(self) -> int:
        return 1 if self.fast else 0

    @property
    def report(self) -> PublishReport:
        return self.plain.report

    async def open(self) -> None:
        await self.plain.open()
        inbox = self.nc.new_inbox()
        self._prefix = f"{inbox}.{self.batch_id}.{self.flow}.fail.".encode()
        self._sub = await self.nc.raw_subscribe(inbox + ".>", self._on_reply)

    async def close(self) -> None:
        await self.nc.raw_unsubscribe(self._sub)
        await self.plain.close()

    async def send(self, first_row: int, frames: list[bytes]) -> None:
        at = 0
        while self.fast and at < len(frames):
            if not self._started:
                # The first row alone: its reply says whether the stream takes fast batches.
                self._queue(first_row + at, [_with_op(frames[at], b"0")])
                at += 1
                await self.nc.flush_frames()
                await self._wait(lambda: self._started)
                continue
            room = self.max_pending - (self._sent - self._acked)
            if room <= 0:
                await self.nc.flush_frames()
                await self._wait(lambda: self._sent - self._acked <= self.max_pending // 2)
                continue
            part = frames[at : at + room]
            self._queue(first_row + at, part)
            at += len(part)
        if self.fast:
            await self.nc.flush_frames()
            return
        await self._fall_back()
        rest = frames[at:]
        if rest and not rest[0].split(b" ", 3)[2].startswith(self.plain.reply_prefix):
            rest = [self._plain_frame(first_row + at + i, f) for i, f in enumerate(rest)]
        await self.plain.send(first_row + at, rest)

    async def finish(self) -> PublishReport:
        if self.fast and self._started:
            # The end marker: commits the batch, stores nothing.
            eob = self._prefix + b"%d.3.$FI" % (self._sent + 1)
            self.nc.raw_publish_many([b"PUB %b %b 0\r\n\r\n" % (self._last_subject, eob)])
            await self.nc.flush_frames()
            await self._wait(lambda: self._end is not None)
        if self.fast and self._end is not None:
            seq, count = self._end
            if count == self._sent:
                report = self.plain.report
                report.batched += count
                if seq > report.last_seq:
                    report.last_seq = seq
                self._frames.clear()
            else:
                self.fast = False
        await self._fall_back()
        return await self.plain.finish()

    # ------------------------------------------------------------------ internals

    def _queue(self, first_row: int, frames: list[bytes]) -> None:
        seqs = range(first_row + 1, first_row + 1 + len(frames))
        self._frames.update(zip(seqs, frames, strict=True))
        self._sent = first_row + len(frames)
        self._last_subject = frames[-1].split(b" ", 2)[1]
        self.nc.raw_publish_many(frames)

    async def _wait(self, ready: Callable[[], bool]) -> None:
        """Until `ready` or the fast batch fails; no reply within the timeout fails it too."""
        while self.fast and not ready():
            self._progress.clear()
            try:
                await asyncio.wait_for(self._progress.wait(), self.timeout_s)
            except TimeoutError:
                self.fast = False

    async def _fall_back(self) -> None:
        """Rows no flow ack covers go through the per-message path, same ids (at most once)."""
        if self.fast or not self._frames:
            return
        pending = sorted(self._frames.items())
        self._frames.clear()
        frames = [self._plain_frame(seq - 1, f) for seq, f in pending]
        first = pending[0][0] - 1
        # Consecutive by construction: every row after the last flow-acked one.
        await self.plain.send(first, frames)

    def _plain_frame(self, row: int, frame: bytes) -> bytes:
        verb, subject, _reply, rest = frame.split(b" ", 3)
        return b"%b %b %b%d %b" % (verb, subject, self.plain.reply_prefix, row, rest)

    def _on_reply(self, subject: bytes, reply: bytes, data: bytes, header: bytes | None) -> None:
        if not self.fast:
            return  # the rest of a failed batch's replies (errors for unknown batch)
        self._progress.set()
        flow = _FLOW_ACK.fullmatch(data) if header is None else None
        if flow is not None:
            self._started = True
            acked = int(flow.group(1))
            for seq in range(self._acked + 1, acked + 1):
                self._frames.pop(seq, None)
            self._acked = max(self._acked, acked)
            return
        end = _BATCH_ACK.fullmatch(data) if header is None else None
        if end is not None and self._started and end.group(2) == self.batch_id.encode():
            self._end = (int(end.group(1)), int(end.group(3)))
            return
        self.fast = False  # an error, a gap, a refusal: the per-message path takes over


def _with_op(frame: bytes, op: bytes) -> bytes:
    """The frame with its reply subject's operation replaced (`....<seq>.1.$FI`)."""
    verb, subject, reply, rest = frame.split(b" ", 3)
    return b"%b %b %b.%b.$FI %b" % (verb, subject, reply[: -len(b".1.$FI")], op, rest)
