"""Catch-up of a hub's source after a leaf partition (issue 19): a spoke with a stream
(JetStream domain `edge`), a hub (domain `hub`) with a stream sourcing it across the leaf
through `external: {api: "$JS.edge.API"}`. Once the source has copied a first message,
the leaf is cut behind a TCP proxy the bench controls (tests/support/linkproxy.py) for
`--cut` seconds while N acked publishes go to the spoke's stream; then it is healed.

Printed per topology (nats-server↔nats-server, the reference, then Brook spoke /
nats-server hub, nats-server spoke / Brook hub, Brook↔Brook): the time from the heal until
the copy grows again (the source's retry wait and the leaf's reconnect), the time from the
heal until it holds all N, and the copy's rate once it restarted (msgs/s, the retry wait
excluded), with that rate's ratio to the reference.

    python -m bench.leafcatchup [--cut SECONDS] [--messages N] [--size BYTES] [--mode reset|silent]

Never part of the test run; numbers go in closing notes and docs, not in assertions.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import tempfile
import threading
import time
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from tests.support.leafnodes import hub_conf, spoke_conf
from tests.support.linkproxy import CutMode, LinkProxy
from tests.support.natsserver import free_port, wait_for_port
from tests.support.partitions import KEEPALIVE

from bench import jetstream
from bench.consumers import Control
from bench.leafnode import TOPOLOGIES, server
from bench.mirrors import WAIT_S, Refused, _fill, _state, create, wait

T = TypeVar("T")
POLL_S = 0.01
SOURCE = {"name": "BENCH", "external": {"api": "$JS.edge.API", "deliver": "deliver.edge"}}


class ProxyThread:
    """A `LinkProxy` on an event loop of its own thread, driven from this blocking bench."""

    def __init__(self, target_port: int) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.proxy = LinkProxy(("127.0.0.1", target_port))
        self.call(self.proxy.start())

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=30)

    def close(self) -> None:
        self.call(self.proxy.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


@contextlib.contextmanager
def proxied_pair(
    spoke_kind: str, hub_kind: str, mode: CutMode
) -> Iterator[tuple[int, int, ProxyThread]]:
    """(spoke's client port, hub's client port, the proxy on the leaf between them); for a
    silent cut, 1 s PINGs so the servers notice it (a reset is noticed at once)."""
    keepalive = KEEPALIVE if mode == "silent" else ""
    leaf_port = free_port()
    with tempfile.TemporaryDirectory(prefix="leaf-catchup-") as tmp:
        hub = (
            hub_conf(leaf_port)
            + keepalive
            + f'jetstream {{ store_dir: "{tmp}/hub", domain: hub }}\n'
        )
        with server(hub_kind, hub) as hub_port:
            wait_for_port(leaf_port)
            link = ProxyThread(leaf_port)
            try:
                ignore = "ignore_discovered_servers: true"  # the hub's own URL: around the proxy
                js = keepalive + f'jetstream {{ store_dir: "{tmp}/spoke", domain: edge }}\n'
                with server(spoke_kind, spoke_conf(link.proxy.port, ignore, js)) as spoke_port:
                    yield spoke_port, hub_port, link
            finally:
                link.close()


@dataclass
class Outcome:
    cut_s: float  # how long the link was down (longer than asked if publishing overran)
    restart_s: float  # heal → the copy grows again
    complete_s: float  # heal → the copy holds all N
    rate: float  # msgs/s from the restart to complete
    problem: str = ""


def catch_up(spoke: int, hub: int, link: ProxyThread, args: argparse.Namespace) -> Outcome:
    jetstream.create_stream(spoke, "file")
    control = Control(hub)
    create(control, {"name": "COPY", "storage": "file", "sources": [SOURCE]})
    _fill(spoke, 0, 1, args.size)
    wait(control, "COPY", 1)  # the source is flowing before the cut
    mode: CutMode = args.mode
    link.call(link.proxy.cut(mode))
    cut_at = time.perf_counter()
    _fill(spoke, 0, args.messages, args.size)
    while time.perf_counter() - cut_at < args.cut:  # polled: answers the hub's PINGs
        _state(control, "COPY")
        time.sleep(min(0.5, max(0.0, args.cut - (time.perf_counter() - cut_at))))
    total = args.messages + 1
    at_heal = _state(control, "COPY")["messages"]
    link.call(link.proxy.heal())
    healed = time.perf_counter()
    cut_s = healed - cut_at
    restarted = None
    while (count := _state(control, "COPY")["messages"]) < total:
        now = time.perf_counter()
        if restarted is None and count > at_heal:
            restarted = now
        if now - healed > WAIT_S:
            raise Refused(f"COPY holds {count} of {total} {WAIT_S:.0f} s after the heal")
        time.sleep(POLL_S)
    done = time.perf_counter()
    if restarted is None:  # all of it within one poll
        restarted = done - POLL_S
    state = _state(control, "COPY")
    control.close()
    problem = "" if state["last_seq"] == total else f"COPY last_seq {state['last_seq']} of {total}"
    return Outcome(
        cut_s=cut_s,
        restart_s=restarted - healed,
        complete_s=done - healed,
        rate=(total - at_heal) / (done - restarted),
        problem=problem,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cut", type=float, default=30.0, help="seconds the leaf is cut")
    parser.add_argument("--messages", type=int, default=100_000, help="published during the cut")
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--mode", choices=("reset", "silent"), default="reset")
    args = parser.parse_args()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"{args.messages} messages of {args.size} bytes published during a {args.cut:.0f} s "
        f"{args.mode} cut of the leaf, file storage; {os.cpu_count()} cores; load {load}\n"
    )
    header = f"{'spoke → hub':16} {'cut':>6} {'restart':>8} {'complete':>9} {'catch-up':>12}"
    print(header + f" {'vs nats→nats':>13}")
    reference = 0.0
    for spoke_kind, hub_kind in TOPOLOGIES:
        label = f"{spoke_kind} → {hub_kind}"
        with proxied_pair(spoke_kind, hub_kind, args.mode) as (spoke, hub, link):
            try:
                r = catch_up(spoke, hub, link, args)
            except Refused as refused:
                print(f"{label:16} refused: {refused}")
                continue
        if (spoke_kind, hub_kind) == TOPOLOGIES[0]:
            reference = r.rate
        ratio = f"{r.rate / reference:>12.2f}x" if reference else f"{'-':>13}"
        print(
            f"{label:16} {r.cut_s:>5.1f}s {r.restart_s:>7.2f}s {r.complete_s:>8.2f}s "
            f"{r.rate:>10,.0f}/s {ratio}" + (f"   {r.problem}" if r.problem else "")
        )


if __name__ == "__main__":
    main()
