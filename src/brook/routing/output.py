"""A connection's output policy, shared by client and leaf connections.

Frames are queued and written together once per event-loop turn, or at once when they
make `OUTPUT_FLUSH_EAGER_BYTES` (one large read can route more than max_pending to a
healthy peer before the loop turns: handed to the socket now, the slow-consumer check
measures what the peer has really not taken). After each write, a socket buffer over the
connection's limit makes the peer a slow consumer. The per-message paths (`deliver`)
inline `_queued` for the calls they save.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from brook import limits


class QueuedOutput:
    """The output half of a connection protocol: a part its class inherits (ADR 0031),
    its state set by `_init_output` in the class's `__init__`."""

    if TYPE_CHECKING:
        loop: asyncio.AbstractEventLoop
        transport: asyncio.Transport | None

        def _output_limit(self) -> int:
            """The socket buffer, in bytes, past which the peer is a slow consumer."""

        def _output_over_limit(self) -> None:
            """The peer is a slow consumer: count, log and close it."""

    def _init_output(self) -> None:
        self._out: list[bytes] = []
        self._out_bytes = 0
        self._flush_scheduled = False

    @property
    def pending_bytes(self) -> int:
        """Bytes not yet taken by the peer: this turn's frames and the socket's buffer."""
        buffered = self.transport.get_write_buffer_size() if self.transport is not None else 0
        return self._out_bytes + buffered

    def _send(self, data: bytes) -> None:
        self._out.append(data)
        self._out_bytes += len(data)
        # `_queued`, inlined: a leaf connection sends each message through here
        if self._out_bytes >= limits.OUTPUT_FLUSH_EAGER_BYTES:
            self._flush()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._flush)

    def _queued(self) -> None:
        """Output was queued: written at the end of this loop turn, or at once past
        `OUTPUT_FLUSH_EAGER_BYTES`."""
        if self._out_bytes >= limits.OUTPUT_FLUSH_EAGER_BYTES:
            self._flush()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        out = self._out
        transport = self.transport
        self._out_bytes = 0
        if not out or transport is None:
            out.clear()
            return
        data = out[0] if len(out) == 1 else b"".join(out)
        out.clear()
        self._write(transport, data)
        if transport.get_write_buffer_size() > self._output_limit():
            self._output_over_limit()

    def _write(self, transport: asyncio.Transport, data: bytes) -> None:
        transport.write(data)
