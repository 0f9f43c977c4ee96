"""What the partition tests share (issue 19): the keep-alive both ends of a partitioned
leaf are configured with, numbered core traffic published at a steady rate across the
link while it is cut and healed, and the check of what arrived.

A partition is seen by each end through its own keep-alive: with `ping_interval: 1s`
and `ping_max: 2` a silent cut closes the connection on both sides within about 3 s,
and the spoke dials again every `reconnect_delay` (100 ms in `spoke_conf`, plus up to as
much jitter after a failed dial). nats-server and Brook are configured alike.

Each test runs its independent scenarios (one per topology, and where sensible per kind
of cut) at once with `concurrently`: a cut is mostly waiting, so overlapping them keeps
the partition tests' wall time to that of the longest scenario (ADR 0037).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TypeVar

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import NoRespondersError

from tests.support.leafnodes import until_flows

# Both ends of a partitioned link, nats-server or Brook: the keep-alive that notices it.
KEEPALIVE = 'ping_interval: "1s"\nping_max: 2\n'
RECOVERY_BOUND_S = 2.0  # issue 19: the link is back within 2 s of the heal
NOTICED_S = 5.0  # a silent cut is noticed after 2-3 PING intervals (1 s): 5 s is ample
# A message the test published just before the heal may still be in its client's buffer
# (nats-py writes from a flusher task) while the heal's commands block the loop; it then
# reaches its server after the heal, and rightly crosses the new link. Only messages
# published earlier than this before the heal began show whether the cut was felt.
IN_FLIGHT_S = 1.0

L = TypeVar("L")
R = TypeVar("R")


async def concurrently(
    links: Mapping[str, AbstractAsyncContextManager[L]],
    scenario: Callable[[str, L], Awaitable[R]],
) -> dict[str, R]:
    """Run `scenario(name, link)` on each named link at once; their results by name.

    The links (servers, proxy or namespaces, clients) are all set up first, one at a
    time, and closed after the last scenario ended: starting or stopping a server blocks
    the loop, which must not happen while another scenario is timing a recovery. Every
    scenario runs to its end; then the failed ones are raised together, in an exception
    group whose message names them and each error noted with its scenario's name."""
    async with contextlib.AsyncExitStack() as stack:
        ready: dict[str, L] = {}
        for name, link in links.items():
            try:
                ready[name] = await stack.enter_async_context(link)
            except Exception as exc:
                exc.add_note(f"while setting up {name}")
                raise
        results = await asyncio.gather(
            *(scenario(name, link) for name, link in ready.items()), return_exceptions=True
        )
    failed: dict[str, BaseException] = {}
    done: dict[str, R] = {}
    for name, result in zip(ready, results, strict=True):
        if isinstance(result, BaseException):
            result.add_note(f"in scenario {name}")
            failed[name] = result
        else:
            done[name] = result
    if failed:
        raise BaseExceptionGroup(f"failed: {', '.join(failed)}", list(failed.values()))
    return done


@dataclass
class Flow:
    """Messages `<subject>.<n>` published at a steady rate by one client and received by
    another: when each was published (loop time) and which arrived, in arrival order."""

    subject: str
    sent_at: list[float] = field(default_factory=list)
    received: list[int] = field(default_factory=list)

    def on_msg(self, msg: Msg) -> None:
        self.received.append(int(msg.data))

    def recovery_s(self, healed_at: float) -> float:
        """Seconds from the heal to the first message of the complete tail: every message
        published from then on arrived. Fails unless what arrived is in order without
        duplicates and the last message published arrived."""
        got = self.received
        assert got == sorted(set(got)), f"{self.subject}: out of order or duplicated"
        assert got, f"{self.subject}: nothing arrived"
        assert got[-1] == len(self.sent_at) - 1, f"{self.subject}: the tail is missing"
        first = len(got) - 1
        while first > 0 and got[first - 1] == got[first] - 1:  # back to the partition's gap
            first -= 1
        return max(0.0, self.sent_at[got[first]] - healed_at)

    def lost(self) -> int:
        return len(self.sent_at) - len(self.received)

    def arrived_between(self, start: float, end: float) -> int:
        """How many of the messages published from `start` to `end` arrived."""
        return sum(start <= self.sent_at[n] < end for n in self.received)


@contextlib.asynccontextmanager
async def publishing(
    pub: Client, sub: Client, subject: str, interval_s: float = 0.01
) -> AsyncIterator[Flow]:
    """A `Flow` from `pub` to `sub` on `subject.<n>` for the body of the `async with`;
    waits on exit for stragglers (the tail must have arrived by then)."""
    flow = Flow(subject)

    async def cb(msg: Msg) -> None:
        flow.on_msg(msg)

    subscription = await sub.subscribe(f"{subject}.*", cb=cb)
    await sub.flush()
    loop = asyncio.get_running_loop()

    async def publish() -> None:
        while True:
            n = len(flow.sent_at)
            flow.sent_at.append(loop.time())
            await pub.publish(f"{subject}.{n}", b"%d" % n)
            await asyncio.sleep(interval_s)

    task = asyncio.ensure_future(publish())
    try:
        yield flow
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await pub.flush()
        deadline = loop.time() + 5
        while flow.received[-1:] != [len(flow.sent_at) - 1] and loop.time() < deadline:
            await asyncio.sleep(0.05)
        await subscription.unsubscribe()


async def crosses(hub: Client, spoke: Client) -> None:
    """Interest has crossed the leaf both ways."""
    up = await hub.subscribe("ready.up")
    down = await spoke.subscribe("ready.down")
    await asyncio.gather(hub.flush(), spoke.flush())
    await until_flows(spoke, up, "ready.up")
    await until_flows(hub, down, "ready.down")
    await up.unsubscribe()
    await down.unsubscribe()


async def cut_while_publishing(
    hub: Client,
    spoke: Client,
    cut: Callable[[], Awaitable[None]],
    heal: Callable[[], Awaitable[None]],
    seconds: float,
    label: str,
) -> dict[str, float]:
    """Core traffic both ways (a client of the hub, a client of the spoke) while the link
    is cut for `seconds` and healed: checks that each way is back within
    `RECOVERY_BOUND_S` (in order, no duplicates) and that the cut was felt (messages
    published during it did not cross); the seconds each way took to come back."""
    assert seconds > NOTICED_S + IN_FLIGHT_S, "too short a cut to show that it was felt"
    await crosses(hub, spoke)
    loop = asyncio.get_running_loop()
    async with publishing(spoke, hub, "up") as up, publishing(hub, spoke, "down") as down:
        await asyncio.sleep(1)
        await cut()
        cut_at = loop.time()
        await asyncio.sleep(seconds)
        heal_began = loop.time()
        await heal()
        healed_at = loop.time()
        await asyncio.sleep(RECOVERY_BOUND_S + 2)
    recovered = {flow.subject: flow.recovery_s(healed_at) for flow in (up, down)}
    lost = {flow.subject: flow.lost() for flow in (up, down)}
    print(f"\n{label} {seconds}s: back after {recovered} s, lost {lost} (of ~{seconds * 100})")
    assert max(recovered.values()) <= RECOVERY_BOUND_S, recovered
    # the cut was felt: once both ends' keep-alive had noticed it, nothing crossed
    noticed, settled = cut_at + NOTICED_S, heal_began - IN_FLIGHT_S
    assert [flow.arrived_between(noticed, settled) for flow in (up, down)] == [0, 0]
    return recovered


async def acked_publish(nc: Client, subject: str, n: int, timeout: float = 30.0) -> None:
    """Publish message `n` as JetStream publishers do (a request for the PubAck, its
    `Nats-Msg-Id` so a retry is not stored twice) until it is acknowledged."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            reply = await nc.request(subject, b"%d" % n, timeout=1, headers={"Nats-Msg-Id": str(n)})
            if b'"error"' not in reply.data:
                return
        except (TimeoutError, NoRespondersError):
            pass
        assert loop.time() < deadline, f"message {n} never acknowledged"
        await asyncio.sleep(0.05)
