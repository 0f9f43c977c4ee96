"""A stream's expiry timer: one event-loop timer at the moment its next expiry may be due
(or its next message schedule, which `Stream.expire` fires too: schedules.py).

The stream decides what expires and when the next expiry may be due (`Stream.expire`,
`StreamExpiry.next_wakeup_ns`: expiry.py) but owns no timer, so that tests drive it with
a manual clock. The engine gives each stream one `ExpiryTimer`: `run` expires what is due
and re-arms at the stream's next moment, or disarms when nothing will expire. A publish
that brings an expiry forward (a short `Nats-TTL`, the first message under `max_age`)
lowers `next_wakeup_ns`, and the engine's ingest callback re-arms earlier (`at`, `arm`):
one comparison per stored message, on the hot path, so it stays inline there. What an
expiry removed or stored reaches the consumers from the stream itself (`on_removed`,
`on_markers`), never from here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from brook.jetstream.stream import Stream


class ExpiryTimer:
    def __init__(
        self,
        stream: Stream,
        loop: asyncio.AbstractEventLoop | None,
        now_ns: Callable[[], int],
    ) -> None:
        self._stream = stream
        self._loop = loop  # None before the engine starts: nothing is armed then
        self._now_ns = now_ns
        self._handle: asyncio.TimerHandle | None = None
        self.at: int | None = None  # when the timer fires, in the engine's clock (ns)

    def run(self) -> None:
        """Expire what is due now and arm the timer for the next expiry, if any."""
        stream = self._stream
        stream.expire()
        wake = stream.expiry.next_wakeup_ns
        if wake is None:
            self.cancel()
        else:
            self.arm(wake)

    def arm(self, at_ns: int) -> None:
        """Fire at `at_ns` (engine clock) instead of whenever it was to fire."""
        self.cancel()
        if self._loop is None:
            return
        delay_s = max(at_ns - self._now_ns(), 0) / 1e9
        self._handle = self._loop.call_later(delay_s, self._fire)
        self.at = at_ns

    def cancel(self) -> None:
        """Fire no more until armed again (the stream is unsubscribed, updated or gone)."""
        if self._handle is not None:
            self._handle.cancel()
        self._handle = None
        self.at = None

    def _fire(self) -> None:
        self._handle = None
        self.at = None
        self.run()
