"""The system account's periodic STATSZ (ADR 0029), on a manual clock: the first after a
quarter second, the delay doubling up to the interval, published only while someone
listens, and the timer gone at shutdown. A request without a reply publishes STATSZ on
the broadcast subject, as nats-server's `statszReq`."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

from brook.config.settings import Settings
from brook.monitor.system import SystemServices
from brook.routing.internal import InternalClient
from brook.server.server import Server


class Handle:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualSchedule:
    """Timers that fire when the test says so."""

    def __init__(self) -> None:
        self.delays: list[float] = []
        self.callbacks: list[Callable[[], None]] = []
        self.handles: list[Handle] = []

    def __call__(self, delay_s: float, callback: Callable[[], None]) -> Handle:
        self.delays.append(delay_s)
        self.callbacks.append(callback)
        self.handles.append(Handle())
        return self.handles[-1]

    def fire(self) -> None:
        assert not self.handles[-1].cancelled
        self.callbacks[-1]()


async def test_statsz_heartbeat_on_a_manual_clock() -> None:
    schedule = ManualSchedule()
    factory = functools.partial(SystemServices, schedule=schedule, statsz_interval_s=2.0)
    server = Server(Settings(host="127.0.0.1", port=0, server_name="hb"), system=factory)
    await server.start()
    try:
        subject = f"$SYS.SERVER.{server.server_id}.STATSZ"
        seen: list[dict[str, Any]] = []
        listener = InternalClient(server.system_router, "test")
        assert schedule.delays == [0.25]
        schedule.fire()  # nobody listens: nothing published
        assert schedule.delays == [0.25, 0.5]

        def on_statsz(subj: bytes, reply: bytes | None, hdr: bytes | None, data: bytes) -> None:
            seen.append(json.loads(data))

        listener.subscribe(subject, on_statsz)
        for _ in range(4):
            schedule.fire()
        assert schedule.delays == [0.25, 0.5, 1.0, 2.0, 2.0, 2.0]
        assert len(seen) == 4
        assert [s["server"]["seq"] for s in seen] == sorted({s["server"]["seq"] for s in seen})
        assert {s["server"]["name"] for s in seen} == {"hb"}
        assert seen[-1]["statsz"]["connections"] == 0
        assert "jetstream" not in seen[-1]["statsz"]
        # A PING without a reply subject: STATSZ on the broadcast subject.
        listener.publish(b"$SYS.REQ.SERVER.PING", b"")
        assert len(seen) == 5
    finally:
        await server.shutdown()
    assert schedule.handles[-1].cancelled
    schedule.callbacks[-1]()  # a late timer does not publish after shutdown
    assert len(seen) == 5
