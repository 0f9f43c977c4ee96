"""Sending a snapshot: nats-server's chunk flow, step for step (`streamSnapshot`).

After the API response, the archive (archive.py) goes to the request's `deliver_subject`:

* if nobody listens there yet, wait up to `snapshot_interest_wait_s` (2 s) for a subscriber,
  then send regardless;
* "listens" means what nats-server's sublist notifications mean: a plain (not queue)
  subscription whose subject is exactly the deliver subject. Wildcard subscribers receive
  the chunks but neither start nor keep a snapshot; once the chunks flow, any change of
  that interest (the last such subscriber leaving, or the first arriving when there was
  none) ends the snapshot with `408 No Interest`;
* chunks of exactly `chunk_size` bytes, each with the reply subject
  `$JS.SNAPSHOT.ACK.<stream>.<token>.<chunk bytes>.<index>` (index from 1); at most
  `window_size / chunk_size` chunks are unacknowledged, any message to an ack subject
  frees one slot;
* the last, shorter chunk (if any) has no reply subject;
* then an empty message: `NATS/1.0 204` once a full chunk went out (nothing but the empty
  message when the whole snapshot fit in one chunk, as nats-server sends it), or
  `408 No Flow Response` when no ack came for `snapshot_ack_timeout_s` (5 s) while the window
  was full, `408 No Interest` when the interest changed, `500 <error>` when reading failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from brook import limits
from brook.jetstream.snapshot.archive import CompressedReader, StreamImage, tar_pieces
from brook.jetstream.snapshot.transfers import Transfers
from brook.nuid import random_id
from brook.protocol import headers

log = logging.getLogger("brook.jetstream.snapshot")

ACK_PREFIX = "$JS.SNAPSHOT.ACK"


def clamp_sizes(chunk_size: int, window_size: int) -> tuple[int, int]:
    """nats-server's defaults and bounds for a request's chunk and window sizes."""
    chunk = chunk_size or limits.SNAPSHOT_CHUNK_BYTES_DEFAULT
    window = window_size or limits.SNAPSHOT_WINDOW_BYTES_DEFAULT
    chunk = min(max(limits.SNAPSHOT_CHUNK_BYTES_MIN, chunk), limits.SNAPSHOT_CHUNK_BYTES_MAX)
    window = min(max(limits.SNAPSHOT_WINDOW_BYTES_MIN, window), limits.SNAPSHOT_WINDOW_BYTES_MAX)
    return chunk, max(window, chunk)


def _status(code: int, description: str = "") -> bytes:
    return headers.encode(status=code, description=" ".join(description.split()))


class SnapshotSender:
    """One snapshot on its way to `deliver` (see the module docstring)."""

    def __init__(
        self,
        transfers: Transfers,
        image: StreamImage,
        deliver: str,
        *,
        chunk_size: int,
        window_size: int,
        on_start: Callable[[], None] | None = None,
        on_end: Callable[[str], None] | None = None,
    ) -> None:
        """`on_start` is called as the chunks start, `on_end` with why they ended early
        ("" when all went): nats-server's snapshot advisories."""
        self._on_start = on_start
        self._on_end = on_end
        self._transfers = transfers
        self._image = image
        self._deliver = deliver.encode()
        self._chunk, window = clamp_sizes(chunk_size, window_size)
        self._max_inflight = window // self._chunk
        self._slots = self._max_inflight
        self._ack_prefix = f"{ACK_PREFIX}.{image.manifest['stream']}.{random_id()}"
        self._wake = asyncio.Event()
        self._listened = False  # a plain subscription on exactly the deliver subject exists
        self._changed = False  # that interest changed since the chunks started
        self._reading: asyncio.Future[bytes] | None = None  # the chunk being read, if any

    def _on_ack(
        self, subject: bytes, reply: bytes | None, header: bytes | None, data: bytes
    ) -> None:
        self._slots = min(self._slots + 1, self._max_inflight)
        self._wake.set()

    def _listening(self) -> bool:
        match = self._transfers.js.router.sublist.match(self._deliver)
        return any(sub.subject == self._deliver for sub in match.plain)

    def _on_interest(self) -> None:
        listened = self._listening()
        if listened != self._listened:
            self._listened = listened
            self._changed = True
            self._wake.set()

    async def run(self) -> None:
        t = self._transfers
        internal = t.js.internal
        router = internal.router
        loop = asyncio.get_running_loop()
        ack_sub = internal.subscribe(self._ack_prefix + ".>", self._on_ack)
        router.watch_interest(self._deliver, self._on_interest)
        t.snapshots += 1
        status: bytes | None = None
        error = ""  # nats-server's words for a snapshot cut short
        if self._on_start is not None:
            self._on_start()
        try:
            self._listened = self._listening()
            if not self._listened:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), t.snapshot_interest_wait_s)
                self._changed = False  # nats-server goes on without a subscriber too
            reader = CompressedReader(tar_pieces(self._image))
            ack_deadline = loop.time() + t.snapshot_ack_timeout_s
            index = 1
            while True:
                self._wake.clear()
                while self._slots == 0 and not self._changed:
                    left = ack_deadline - loop.time()
                    if left <= 0:
                        break
                    try:
                        await asyncio.wait_for(self._wake.wait(), left)
                    except TimeoutError:
                        break
                    self._wake.clear()
                if self._changed:
                    status = _status(408, "No Interest")
                    error = "no interest"
                    break
                if self._slots == 0:
                    status = _status(408, "No Flow Response")
                    error = "no flow response"
                    break
                self._reading = loop.run_in_executor(t.executor, reader.read, self._chunk)
                try:
                    chunk = await asyncio.shield(self._reading)
                except Exception as exc:
                    log.warning(
                        "snapshot of stream %s failed: %s", self._image.manifest["stream"], exc
                    )
                    status = _status(500, str(exc))
                    error = str(exc)
                    break
                if len(chunk) < self._chunk:
                    if chunk:
                        internal.publish(self._deliver, chunk)
                    break
                self._slots -= 1
                reply = f"{self._ack_prefix}.{len(chunk)}.{index}".encode()
                internal.publish(self._deliver, chunk, reply=reply)
                ack_deadline = loop.time() + t.snapshot_ack_timeout_s
                index += 1
                if status is None:
                    status = _status(204)
            internal.publish(self._deliver, b"", header=status)
            log.info(
                "snapshot of stream %s: %d bytes sent",
                self._image.manifest["stream"],
                reader.total,
            )
        finally:
            if self._on_end is not None:
                self._on_end(error)
            t.snapshots -= 1
            internal.unsubscribe(ack_sub)
            router.unwatch_interest(self._deliver, self._on_interest)
            if self._reading is not None and not self._reading.done():
                # Cancelled mid-read: the descriptors are released once the thread is done.
                self._reading.add_done_callback(lambda _f: self._image.close())
            else:
                self._image.close()
