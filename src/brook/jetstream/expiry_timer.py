"""A stream's expiry timer: one event-loop timer at the moment its next expiry may be due
(or its next message schedule, which `Stream.expire` fires too: schedules.py).

The stream decides what expires and when the next expiry may be due (`Stream.expire`,
`StreamExpiry.next_wakeup_ns`: expiry.py) but owns no timer, so that tests drive it with
a manual clock. The engine gives each stream one `ExpiryTimer` (a `DeadlineTimer`,
timer.py): `run` expires what is due and re-arms at the stream's next moment, or disarms
when nothing will expire. A publish that brings an expiry forward (a short `Nats-TTL`,
the first message under `max_age`) lowers `next_wakeup_ns`, and the engine's ingest
callback re-arms earlier (`at`, `arm`): one comparison per stored message, on the hot
path, so it stays inline there. What an expiry removed or stored reaches the consumers
from the stream itself (`on_removed`, `on_markers`), never from here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from brook.jetstream.stream import Stream
from brook.jetstream.timer import DeadlineTimer


class ExpiryTimer(DeadlineTimer):
    def __init__(
        self,
        stream: Stream,
        loop: asyncio.AbstractEventLoop | None,
        now_ns: Callable[[], int],
    ) -> None:
        def due() -> int | None:
            stream.expire()
            return stream.expiry.next_wakeup_ns

        super().__init__(due, loop, now_ns)
