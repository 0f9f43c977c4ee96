"""Core pub→sub across a leafnode connection (ADR 0032): the publisher on the spoke, the
subscriber on the hub, each topology in one run: nats-server to nats-server, Brook spoke
of nats-server, nats-server spoke of Brook, Brook to Brook; msgs/s and the ratio to
nats-server↔nats-server printed, with Brook's own pub→sub on one server (no leaf) as the
client path's reference, and the load average. Load generators are bench.core's
raw-socket ones.

    python -m bench.leafnode [--messages N] [--size BYTES]

Never part of the test run; numbers go in closing notes and docs, not in assertions.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import os
import tempfile
import time
from collections.abc import Iterator
from multiprocessing.queues import Queue
from pathlib import Path

from tests.support.natsserver import free_port, wait_for_port

from bench.core import Result, brook_server, nats_server, publisher, subscriber

TOPOLOGIES = (("nats", "nats"), ("brook", "nats"), ("nats", "brook"), ("brook", "brook"))


@contextlib.contextmanager
def server(kind: str, conf: str) -> Iterator[int]:
    with tempfile.TemporaryDirectory(prefix="leaf-bench-") as tmp:
        path = Path(tmp) / "server.conf"
        path.write_text(conf)
        start = brook_server if kind == "brook" else nats_server
        with start(args=("-c", str(path))) as port:
            yield port


@contextlib.contextmanager
def leaf_pair(spoke_kind: str, hub_kind: str) -> Iterator[tuple[int, int]]:
    """(spoke's client port, hub's client port), the spoke connected to the hub."""
    leaf_port = free_port()
    hub_conf = f'leafnodes {{ listen: "127.0.0.1:{leaf_port}" }}\n'
    spoke_conf = f'leafnodes {{ remotes: [ {{ url: "nats-leaf://127.0.0.1:{leaf_port}" }} ] }}\n'
    with server(hub_kind, hub_conf) as hub, server(spoke_kind, spoke_conf) as spoke:
        wait_for_port(leaf_port)
        time.sleep(1.5)  # the leaf connection's handshake
        yield spoke, hub


def run_pub_sub_across(spoke: int, hub: int, n: int, size: int) -> Result:
    """bench.core's publisher on the spoke, its subscriber on the hub."""
    ready = mp.Barrier(3)
    out: Queue[tuple[int, float]] = mp.Queue()
    sub = mp.Process(target=subscriber, args=(hub, b"bench.fan", n, size, ready, out))
    sub.start()
    time.sleep(1.0)  # the hub's interest reaches the spoke
    pub = mp.Process(target=publisher, args=(spoke, b"bench.fan", n, size, ready))
    pub.start()
    ready.wait()
    received, elapsed = out.get(timeout=300)
    pub.join()
    sub.join()
    name = "pub (spoke) → sub (hub)"
    if received < n:
        name += f" (LOST {n - received})"
    return Result(name, received / elapsed, received * size / elapsed / 1e6)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--size", type=int, default=16)
    args = parser.parse_args()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{args.messages} messages of {args.size} bytes; {os.cpu_count()} cores; load {load}\n")
    print(f"{'spoke → hub':22} {'msgs/s':>12} {'vs nats→nats':>13}")
    reference = 0.0
    for spoke_kind, hub_kind in TOPOLOGIES:
        with leaf_pair(spoke_kind, hub_kind) as (spoke, hub):
            result = run_pub_sub_across(spoke, hub, args.messages, args.size)
        reference = reference or result.msgs_per_s
        label = f"{spoke_kind} → {hub_kind}"
        print(
            f"{label:22} {result.msgs_per_s:>10,.0f}/s {result.msgs_per_s / reference:>12.2f}x"
            + ("" if "LOST" not in result.workload else f"   {result.workload}")
        )
    with brook_server() as port:
        result = run_pub_sub_across(port, port, args.messages, args.size)
    label = "brook (one server)"
    print(f"{label:22} {result.msgs_per_s:>10,.0f}/s {result.msgs_per_s / reference:>12.2f}x")


if __name__ == "__main__":
    main()
