"""One event-loop timer at a moment of an injected clock.

Brook's timed work (a stream's expiry, `expiry_timer.py`; idle atomic batches,
`batch.py`) decides what is due by the engine's clock, which tests replace with a manual
one; only this timer turns a moment of that clock into an event-loop delay. `run` does
what is due (the `due` callable) and re-arms at the moment it returns, or disarms on None.
Without an event loop (the engine not started, unit tests) nothing is ever armed, and the
owner's tests call `run` themselves.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class DeadlineTimer:
    def __init__(
        self,
        due: Callable[[], int | None],
        loop: asyncio.AbstractEventLoop | None,
        now_ns: Callable[[], int],
    ) -> None:
        self._due = due
        self._loop = loop
        self._now_ns = now_ns
        self._handle: asyncio.TimerHandle | None = None
        self.at: int | None = None  # when the timer fires, in the clock's ns

    def run(self) -> None:
        """Do what is due now and arm the timer for the next moment, if any."""
        wake = self._due()
        if wake is None:
            self.cancel()
        else:
            self.arm(wake)

    def arm(self, at_ns: int) -> None:
        """Fire at `at_ns` instead of whenever it was to fire."""
        self.cancel()
        if self._loop is None:
            return
        delay_s = max(at_ns - self._now_ns(), 0) / 1e9
        self._handle = self._loop.call_later(delay_s, self._fire)
        self.at = at_ns

    def cancel(self) -> None:
        """Fire no more until armed again."""
        if self._handle is not None:
            self._handle.cancel()
        self._handle = None
        self.at = None

    def _fire(self) -> None:
        self._handle = None
        self.at = None
        self.run()
