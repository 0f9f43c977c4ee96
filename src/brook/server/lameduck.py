"""Lame-duck mode (`LameDuck`, a part of `Server`: ADR 0031, 0041), as nats-server's
`lameDuckMode`: stop accepting clients (the client and WebSocket listeners close; leafnode
and monitoring ports stay), tell the connected clients (an INFO with `"ldm":true`, which
clients such as nats-py hand to a callback so that they can move elsewhere), wait
`lame_duck_grace_period`, then close the clients still connected one by one, spread over
what is left of `lame_duck_duration` (so that they do not all reconnect at once
elsewhere), then shut down as on SIGINT, closing the stores cleanly.

Differences from nats-server: JetStream keeps serving until the final shutdown (nats-server
stops it on entering, to hand Raft leaderships over; Brook has no cluster). Entering it
publishes `$SYS.SERVER.<id>.LAMEDUCK`, as nats-server. `sleep` is the clock tests replace.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from brook import limits

if TYPE_CHECKING:
    from brook.config.settings import Settings
    from brook.server.connection import ClientConnection
    from brook.server.statistics import SystemServices

log = logging.getLogger("brook.server")


def close_interval_s(clients: int, duration_s: float, grace_s: float) -> float:
    """nats-server's spacing of the closes: what is left of the duration after the grace
    period (at least a second), shared among the clients, at most a second each."""
    spread = duration_s - grace_s
    if spread <= 0:
        spread = 1.0
    return min(spread / max(clients, 1), limits.LAME_DUCK_CLOSE_INTERVAL_MAX_S)


class LameDuck:
    """`Server`'s lame-duck part (a mixin, ADR 0031)."""

    if TYPE_CHECKING:  # what it uses of `Server`, which sets all of it
        settings: Settings
        clients: dict[int, ClientConnection]
        system: SystemServices | None

        @property
        def shutting_down(self) -> bool: ...

        def request_shutdown(self) -> None: ...

        def stop_accepting(self) -> None: ...

    lame_duck = False
    _lame_duck_task: asyncio.Task[None] | None = None
    # The clock: tests give one they advance by hand.
    sleep: Callable[[float], Awaitable[None]] = staticmethod(asyncio.sleep)

    def enter_lame_duck_mode(self) -> None:
        """Begin lame-duck mode (SIGUSR2, `brook --signal ldm`); once only, and never
        during a shutdown."""
        if self.lame_duck or self.shutting_down:
            return
        self.lame_duck = True
        log.info("Entering lame duck mode, stop accepting new clients")
        if self.system is not None:
            self.system.server_event("LAMEDUCK")
        self.stop_accepting()
        self._lame_duck_task = asyncio.ensure_future(self._lame_duck())

    def lame_duck_client(self, cid: int) -> None:
        """`$SYS.REQ.SERVER.<id>.LDM`: lame-duck mode's INFO to one client (nats-server's
        `LDMClientByID`), which may then move elsewhere before the server goes."""
        client = self.clients.get(cid)
        if client is None:
            raise LookupError("no such client id")
        if not client.send_lame_duck_info():
            raise LookupError(
                "client does not support Lame Duck Mode or is not ready to receive the notification"
            )

    def cancel_lame_duck(self) -> None:
        """A shutdown overtakes lame-duck mode: its own closing of clients stops."""
        task = self._lame_duck_task
        if task is not None and not task.done() and task is not asyncio.current_task():
            task.cancel()

    async def _lame_duck(self) -> None:
        clients = list(self.clients.values())
        if not clients:
            self.request_shutdown()
            return
        process = self.settings.process
        for client in clients:
            client.send_lame_duck_info()
        await self.sleep(process.lame_duck_grace_period_s)
        log.info("Closing existing clients")
        interval = close_interval_s(
            len(clients), process.lame_duck_duration_s, process.lame_duck_grace_period_s
        )
        for i, client in enumerate(clients):
            client.close("server shutdown")
            if i < len(clients) - 1:
                await self.sleep(random.uniform(interval / 2, interval))
        self.request_shutdown()
