"""Cost per operation must not grow with streams, consumers and subscriptions that are not
concerned (issue 14): a SUB, an acked publish, a stream create, a consumer create and a
fetch from a filtered consumer cost about the same on a Brook holding one stream as on
one holding a thousand streams, a thousand filtered and push consumers on the publishing
stream and thousands of subscriptions.

Two real Brooks run in this process, a small and a large setup, each driven by nats-py.
What is compared is a ratio measured in one run, never an absolute time: the CPU time of
this process (server and client; waits for fsync do not count, CPU time taken by other
processes on the machine neither) per operation, in batches that alternate between the
two servers, the garbage collector held off during each batch, the median batch of each
side taken. The client's share is the same on both sides. A cost that grows with what
the large setup holds (a scan of every consumer per publish, of every cached subject per
SUB, of every stream per create) shows as a ratio of ten and more; `bench/scale.py`
measures the same against nats-server and larger sizes.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
import pytest

import brook

pytestmark = pytest.mark.timeout(240)

GROWTH_MAX = 3.0
ROUNDS = 7  # batches per operation and side, alternating
BATCH = 12  # operations per batch


@dataclass
class Size:
    streams: int  # more streams, three subjects each
    filtered: int  # durable pull consumers on the publishing stream, one filter each
    push: int  # push consumers on it, their deliver subjects unheard (interest watches)
    subs: int  # subscriptions of another client, a tenth of them wildcards


SMALL = Size(streams=0, filtered=0, push=0, subs=0)
LARGE = Size(streams=1000, filtered=1000, push=500, subs=3000)


class Side:
    """One Brook, a client, and the probes: each `op(i)` is one operation."""

    def __init__(self, nc: Any, name: str) -> None:
        self.nc = nc
        self.js = nc.jetstream()
        self.name = name
        self.serial = 0
        self.cleanup: list[Callable[[], Awaitable[Any]]] = []

    async def build(self, size: Size, holder: Any) -> None:
        js = self.js
        await js.add_stream(name="SCALE", subjects=["scale.>"], storage="memory")
        await js.add_consumer("SCALE", durable_name="BASE", ack_policy="explicit")
        await js.add_consumer(
            "SCALE", durable_name="FETCH", filter_subject="scale.f", ack_policy="explicit"
        )
        for i in range(size.subs):
            await holder.subscribe(f"hold.{i}.*" if i % 10 == 9 else f"hold.{i}")
        await holder.flush()
        for i in range(size.streams):
            subjects = [f"g{i}.a.>", f"g{i}.b", f"g{i}.c.*"]
            await js.add_stream(name=f"G{i}", subjects=subjects, storage="memory")
        for i in range(size.filtered):
            await js.add_consumer(
                "SCALE", durable_name=f"C{i}", filter_subject=f"scale.c.{i}", ack_policy="explicit"
            )
        for i in range(size.push):
            await js.add_consumer(
                "SCALE",
                durable_name=f"D{i}",
                deliver_subject=f"deliver.{i}",
                filter_subject=f"scale.d.{i}",
                ack_policy="explicit",
            )
        self.fetcher = await js.pull_subscribe_bind("FETCH", stream="SCALE")

    def _next(self) -> int:
        self.serial += 1
        return self.serial

    async def sub(self) -> None:
        n = self._next()
        sub = await self.nc.subscribe(f"probe.{n}.*" if n % 2 else f"probe.{n}")
        self.cleanup.append(sub.unsubscribe)  # the batch's flush waits for the server

    async def publish(self) -> None:
        await self.js.publish("scale.hot", b"x")

    async def stream_create(self) -> None:
        n = self._next()
        await self.js.add_stream(name=f"P{n}", subjects=[f"p{n}.>"], storage="memory")
        self.cleanup.append(lambda: self.js.delete_stream(f"P{n}"))

    async def consumer_create(self) -> None:
        n = self._next()
        await self.js.add_consumer(
            "SCALE", durable_name=f"Q{n}", filter_subject=f"scale.q.{n}", ack_policy="explicit"
        )
        self.cleanup.append(lambda: self.js.delete_consumer("SCALE", f"Q{n}"))

    async def prepare_fetches(self) -> None:
        for _ in range(BATCH):
            await self.js.publish("scale.f", b"x")

    async def fetch(self) -> None:
        msgs = await self.fetcher.fetch(1, timeout=5)
        await msgs[0].ack()

    async def tidy(self) -> None:
        for undo in self.cleanup:
            await undo()
        self.cleanup.clear()
        await self.nc.flush()


async def cpu_per_op(side: Side, op: Callable[[Side], Awaitable[None]]) -> float:
    """CPU µs of this process per `op`, over one batch ended by a PING/PONG (the server
    has handled all of it), without garbage collections."""
    gc.collect()
    gc.disable()
    try:
        start = time.process_time_ns()
        for _ in range(BATCH):
            await op(side)
        await side.nc.flush()
        spent = time.process_time_ns() - start
    finally:
        gc.enable()
    return spent / BATCH / 1000


OPS: dict[str, Callable[[Side], Awaitable[None]]] = {
    "SUB": Side.sub,
    "consumer create": Side.consumer_create,
    "stream create": Side.stream_create,
    "acked publish": Side.publish,
    "filtered fetch": Side.fetch,
}


async def test_operation_costs_do_not_grow_with_unconcerned_streams_and_consumers(
    tmp_path: Path,
) -> None:
    async with (
        brook.serve(port=0, store_dir=str(tmp_path / "small")) as small_server,
        brook.serve(port=0, store_dir=str(tmp_path / "large")) as large_server,
    ):
        clients = [
            await nats.connect(server.url, allow_reconnect=False)
            for server in (small_server, small_server, large_server, large_server)
        ]
        try:
            small, large = Side(clients[0], "small"), Side(clients[2], "large")
            await small.build(SMALL, holder=clients[1])
            await large.build(LARGE, holder=clients[3])
            samples: dict[str, dict[str, list[float]]] = {
                op: {"small": [], "large": []} for op in OPS
            }
            # One operation at a time, its batches alternating between the sides. SUB and
            # the creates first: before the others' traffic fills the small side's match
            # cache (whose size a SUB or a create must not depend on either).
            for op, probe in OPS.items():
                for round_ in range(ROUNDS):
                    for side in (small, large) if round_ % 2 else (large, small):
                        if probe is Side.fetch:
                            await side.prepare_fetches()
                        samples[op][side.name].append(await cpu_per_op(side, probe))
                        await side.tidy()
        finally:
            for nc in clients:
                await nc.close()
    lines = []
    growth = {}
    for op, sides in samples.items():
        at_small, at_large = statistics.median(sides["small"]), statistics.median(sides["large"])
        growth[op] = at_large / at_small
        lines.append(
            f"{op:16} small {at_small:7.0f} µs  large {at_large:7.0f} µs  x{growth[op]:.2f}"
        )
    report = "\n".join(lines)
    print(report)
    assert max(growth.values()) <= GROWTH_MAX, report
