"""A TCP proxy the test controls, put on a leafnode link to partition it (issue 19's
partition tests where network namespaces are not allowed).

`LinkProxy` listens on a loopback port and forwards each connection to its target. The
test cuts the link in one of two ways and heals it again:

* `cut("reset")`: what a crashed middlebox or a refused route does. Every connection
  through the proxy is reset (RST, `SO_LINGER` 0) and the listener closed, so a dial
  during the cut gets `ECONNREFUSED`; the port stays bound (not listening), so no other
  socket takes it meanwhile (an outgoing connection's ephemeral port, as happened with
  partition tests running at once), and `heal()` listens on it again.
* `cut("silent")`: packets just stop. Nothing is read from, nor written to, either side
  of a connection, so what a peer writes waits in the kernel's buffers as TCP's
  retransmissions would, and an end (FIN or RST) is not passed on either: the peers
  notice only through their own keep-alive. A dial during the cut gets no answer to its
  SYN: the port is held by a listener whose accept queue is full, which the kernel
  answers by dropping SYNs, so the dialler waits on TCP's SYN retries. `heal()` lets
  the held bytes and ends through and listens again, so a retransmitted SYN connects.

It runs on the test's event loop (asyncio streams), so it needs no thread and no
privileges; `tests/support/netns.py` cuts a real link where namespaces are allowed.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import AsyncIterator
from typing import Literal

CutMode = Literal["reset", "silent"]
_CHUNK = 64 * 1024


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with RST rather than FIN, as a peer cut off by a reset sees it."""
    sock = writer.get_extra_info("socket")
    if sock is not None:  # ValueError: uvloop's socket of a transport already closed
        with contextlib.suppress(OSError, ValueError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class _Pair:
    """One connection through the proxy: the dialler's side and the target's."""

    def __init__(self, proxy: LinkProxy, down: tuple[asyncio.StreamReader, asyncio.StreamWriter]):
        self.proxy = proxy
        self.down = down
        self.up: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self.tasks: list[asyncio.Task[None]] = []

    async def run(self) -> None:
        try:
            self.up = await asyncio.open_connection(*self.proxy.target)
        except OSError:
            _reset(self.down[1])
            return
        self.tasks = [
            asyncio.ensure_future(self._pump(self.down[0], self.up[1])),
            asyncio.ensure_future(self._pump(self.up[0], self.down[1])),
        ]
        await asyncio.gather(*self.tasks, return_exceptions=True)
        self.down[1].close()
        self.up[1].close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        gate = self.proxy.gate
        try:
            while True:
                await gate.wait()
                try:
                    data = await reader.read(_CHUNK)
                except OSError:  # the reading side was reset: reset the other one
                    await gate.wait()
                    _reset(writer)
                    return
                await gate.wait()  # read just before a silent cut: held until the heal
                if not data:
                    with contextlib.suppress(OSError):
                        writer.write_eof()
                    return
                writer.write(data)
                await writer.drain()
        except OSError:  # the writing side was reset: its own pump resets the other
            pass

    def reset(self) -> None:
        for task in self.tasks:
            task.cancel()
        _reset(self.down[1])
        if self.up is not None:
            _reset(self.up[1])


class LinkProxy:
    """Forwards 127.0.0.1:`port` to `target`; `cut()` and `heal()` the link."""

    def __init__(self, target: tuple[str, int], port: int = 0) -> None:
        self.target = target
        self.port = port
        self.gate = asyncio.Event()
        self.gate.set()
        self.cut_mode: CutMode | None = None
        self.accepted = 0  # connections accepted, to tell a reconnect from a kept link
        self._server: asyncio.Server | None = None
        self._pairs: set[_Pair] = set()
        self._held: list[socket.socket] = []  # a silent cut's listener and its dials

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._accept, "127.0.0.1", self.port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        pair = _Pair(self, (reader, writer))
        self._pairs.add(pair)
        try:
            await pair.run()
        finally:
            self._pairs.discard(pair)

    @property
    def connections(self) -> int:
        return len(self._pairs)

    async def cut(self, mode: CutMode) -> None:
        if self.cut_mode is not None:
            raise RuntimeError(f"the link is already cut ({self.cut_mode})")
        self.cut_mode = mode
        assert self._server is not None
        self._server.close()
        self._server = None
        if mode == "silent":
            self.gate.clear()
            await self._hold_port()
            return
        self._held = [self._bound()]
        for pair in list(self._pairs):
            pair.reset()
        await asyncio.sleep(0)

    def _bound(self) -> socket.socket:
        """A socket bound to the proxy's port (`SO_REUSEADDR`, as the listener's)."""
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        return sock

    async def _hold_port(self) -> None:
        """Listen on the port with a backlog of 0 and fill the accept queue with our own
        dials, until one is not answered: from then on the kernel drops SYNs to it."""
        sock = self._bound()
        sock.listen(0)
        self._held = [sock]
        loop = asyncio.get_running_loop()
        for _ in range(8):
            filler = socket.socket()
            filler.setblocking(False)
            self._held.append(filler)
            try:
                await asyncio.wait_for(loop.sock_connect(filler, ("127.0.0.1", self.port)), 0.2)
            except TimeoutError:
                return
        raise RuntimeError("the kernel kept answering SYNs to a full accept queue")

    async def heal(self) -> None:
        mode, self.cut_mode = self.cut_mode, None
        if mode == "silent":  # a listener holds the port: it must go first
            self._release()
        if mode is not None:
            await self.start()  # beside a reset cut's bound socket, which is not listening
        self._release()
        self.gate.set()

    def _release(self) -> None:
        for sock in self._held:
            sock.close()
        self._held = []

    async def close(self) -> None:
        self._release()
        if self._server is not None:
            self._server.close()
            self._server = None
        self.gate.set()
        for pair in list(self._pairs):
            pair.reset()
        await asyncio.sleep(0)


@contextlib.asynccontextmanager
async def link_proxy(target_port: int, port: int = 0) -> AsyncIterator[LinkProxy]:
    """A started `LinkProxy` to 127.0.0.1:`target_port`, closed on exit."""
    proxy = LinkProxy(("127.0.0.1", target_port), port)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.close()
