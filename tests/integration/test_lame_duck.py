"""Lame-duck mode in process (server/lameduck.py), on a manual clock: the listener closes
at once, nats-py clients hear of it (`lame_duck_mode_cb`, from the `ldm` INFO), nobody
is closed during the grace period, then the clients are closed one by one at
nats-server's spacing, and the server shuts down with its stores closed. The process side
(SIGUSR2, `--signal ldm`, SIGTERM ignored) is in test_process_life.py."""

from __future__ import annotations

import asyncio
import socket

import nats
import pytest

import brook
from brook.config.settings import ProcessSettings, WebSocketSettings
from brook.server.lameduck import close_interval_s

pytestmark = pytest.mark.timeout(30)


class ManualClock:
    """`Server.sleep` for tests: each sleep waits until the test releases it."""

    def __init__(self) -> None:
        self.sleeps: asyncio.Queue[tuple[float, asyncio.Future[None]]] = asyncio.Queue()

    async def sleep(self, seconds: float) -> None:
        done = asyncio.get_running_loop().create_future()
        await self.sleeps.put((seconds, done))
        await done

    async def next_sleep(self) -> tuple[float, asyncio.Future[None]]:
        return await asyncio.wait_for(self.sleeps.get(), 5)


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except OSError:
        return True
    return False


async def test_clients_are_told_then_closed_one_by_one_after_the_grace_period(
    tmp_path: object,
) -> None:
    process = ProcessSettings(lame_duck_duration_s=40.0, lame_duck_grace_period_s=10.0)
    clock = ManualClock()
    async with brook.serve(store_dir=str(tmp_path), process=process) as server:
        server.sleep = clock.sleep
        told: list[int] = []
        closed: list[int] = []
        clients = []
        for i in range(3):

            async def on_ldm(i: int = i) -> None:
                told.append(i)

            async def on_closed(i: int = i) -> None:
                closed.append(i)

            clients.append(
                await nats.connect(
                    server.url,
                    allow_reconnect=False,
                    lame_duck_mode_cb=on_ldm,
                    closed_cb=on_closed,
                )
            )
        js = clients[0].jetstream()
        await js.add_stream(name="LDM", subjects=["ldm"])
        await js.publish("ldm", b"kept")

        server.enter_lame_duck_mode()
        assert refused(server.port)
        grace, release = await clock.next_sleep()
        assert grace == 10.0
        for _ in range(100):
            if len(told) == 3:
                break
            await asyncio.sleep(0.01)
        assert sorted(told) == [0, 1, 2]
        assert not closed
        assert all(nc.is_connected for nc in clients)
        # Still serving during the grace period.
        assert (await js.publish("ldm", b"late")).seq == 2

        spacing = close_interval_s(3, 40.0, 10.0)
        assert spacing == 1.0  # (40 - 10) / 3 = 10 s each, capped at a second
        release.set_result(None)
        for n in (1, 2):
            delay, release = await clock.next_sleep()
            assert spacing / 2 <= delay <= spacing
            for _ in range(100):
                if len(closed) == n:
                    break
                await asyncio.sleep(0.01)
            assert len(closed) == n, "one client closed per interval"
            release.set_result(None)
        await asyncio.wait_for(server.wait_stopped(), 10)
        for _ in range(100):
            if len(closed) == 3:
                break
            await asyncio.sleep(0.01)
        assert sorted(closed) == [0, 1, 2]
    # The store was closed cleanly: a new server finds both messages.
    async with brook.serve(store_dir=str(tmp_path)) as again:
        nc = await nats.connect(again.url, allow_reconnect=False)
        assert (await nc.jetstream().stream_info("LDM")).state.messages == 2
        await nc.close()


async def test_websocket_clients_are_told_and_their_listener_closes() -> None:
    """nats-server tells WebSocket clients too."""
    clock = ManualClock()
    ws = WebSocketSettings(host="127.0.0.1", port=-1, no_tls=True)
    async with brook.serve(websocket=ws) as server:
        server.sleep = clock.sleep
        told = asyncio.get_running_loop().create_future()

        async def on_ldm() -> None:
            told.set_result(True)

        url = f"ws://127.0.0.1:{server.websocket.port}"
        nc = await nats.connect(url, allow_reconnect=False, lame_duck_mode_cb=on_ldm)
        server.enter_lame_duck_mode()
        assert await asyncio.wait_for(told, 5)
        assert refused(server.websocket.port)
        await clock.next_sleep()  # the grace period
        await nc.close()


async def test_without_clients_the_server_shuts_down_at_once() -> None:
    async with brook.serve() as server:
        server.enter_lame_duck_mode()
        await asyncio.wait_for(server.wait_stopped(), 5)
        assert refused(server.port)


async def test_a_shutdown_overtakes_lame_duck_mode() -> None:
    clock = ManualClock()
    async with brook.serve() as server:
        server.sleep = clock.sleep
        nc = await nats.connect(server.url, allow_reconnect=False)
        server.enter_lame_duck_mode()
        server.enter_lame_duck_mode()  # once only
        await clock.next_sleep()  # in the grace period
        await asyncio.wait_for(server.shutdown(), 10)
        assert clock.sleeps.empty()
        await nc.close()


@pytest.mark.parametrize(
    ("clients", "duration", "grace", "expected"),
    [
        (10, 120.0, 10.0, 1.0),  # at most a second between two closes
        (1000, 120.0, 10.0, 0.11),
        (4, 5.0, 10.0, 0.25),  # a grace period past the duration: one second to spread
    ],
)
def test_close_spacing_is_nats_servers(
    clients: int, duration: float, grace: float, expected: float
) -> None:
    assert close_interval_s(clients, duration, grace) == pytest.approx(expected)
