"""Mirrors and sources: catch-up speed, steady-state lag and fan-in, Brook and nats-server.

Three workloads, each on a fresh server (nats-server first, then Brook), file storage:

* catch-up: an origin stream holding N messages (filled by bench/jetstream.py's raw-socket
  publishers), then a mirror of it is created; the time until the mirror's last sequence
  reaches N gives its rate;
* steady lag: a mirror of an empty origin, then one raw-socket publisher sends acked
  publishes to the origin at a fixed rate for a few seconds while the control connection
  samples origin and mirror every 50 ms; the lag is the origin's last sequence minus the
  mirror's, in messages and in milliseconds at that rate;
* fan-in: ten origins of N/10 messages each, then one stream sourcing all ten; the time
  until it holds N messages gives its rate.

Each workload also checks the result (the mirror's first and last sequences equal the
origin's, the sourcing stream holds every message once). A server that refuses the
configuration is reported as such, not timed.

    python -m bench.mirrors [--messages N] [--size BYTES] [--rate MSGS_PER_S] [--seconds S]

Never part of the test run; numbers go in closing notes and docs, not in assertions.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from multiprocessing.queues import Queue
from typing import Any

from bench import jetstream
from bench.consumers import Control
from bench.core import _connect, _read_until, brook_server, nats_server

ORIGINS = 10
WAIT_S = 300.0


class Refused(Exception):
    """The server refused a configuration the workload needs."""


@dataclass
class Outcome:
    msgs_per_s: float = 0.0
    lag_msgs: tuple[float, float, float] = (0.0, 0.0, 0.0)  # median, p99, max
    problem: str = ""


def create(control: Control, config: dict[str, Any]) -> None:
    reply = control.request(f"$JS.API.STREAM.CREATE.{config['name']}", config)
    if "error" in reply:
        raise Refused(f"{config['name']}: {reply['error'].get('description')}")


def _state(control: Control, name: str) -> dict[str, Any]:
    state: dict[str, Any] = control.request(f"$JS.API.STREAM.INFO.{name}")["state"]
    return state


def wait(control: Control, name: str, messages: int, poll_s: float = 0.002) -> float:
    """Seconds until stream `name` holds `messages` messages (polled every `poll_s`)."""
    started = time.perf_counter()
    while _state(control, name)["messages"] < messages:
        if time.perf_counter() - started > WAIT_S:
            raise Refused(f"{name} did not reach {messages} messages in {WAIT_S:.0f} s")
        time.sleep(poll_s)
    return time.perf_counter() - started


def _fill(port: int, subject_index: int, count: int, size: int) -> None:
    """`count` acked publishes to js.bench.<subject_index>, 1000 in flight."""
    out: Queue[tuple[int, float]] = mp.Queue()
    proc = mp.Process(
        target=jetstream.publisher, args=(port, subject_index, count, size, 1000, out)
    )
    proc.start()
    acked, _ = out.get(timeout=WAIT_S)
    proc.join()
    if acked != count:
        raise Refused(f"fill acknowledged {acked} of {count}")


def catch_up(port: int, args: argparse.Namespace) -> Outcome:
    control = Control(port)
    jetstream.create_stream(port, "file")
    _fill(port, 0, args.messages, args.size)
    create(control, {"name": "MIRROR", "storage": "file", "mirror": {"name": "BENCH"}})
    elapsed = wait(control, "MIRROR", args.messages)
    origin, mirror = _state(control, "BENCH"), _state(control, "MIRROR")
    problem = ""
    if (origin["first_seq"], origin["last_seq"]) != (mirror["first_seq"], mirror["last_seq"]):
        problem = f"origin {origin['first_seq']}..{origin['last_seq']}, mirror {mirror}"
    control.close()
    return Outcome(msgs_per_s=args.messages / elapsed, problem=problem)


def paced_publisher(port: int, rate: int, seconds: float, size: int, out: Queue[int]) -> None:
    """Acked publishes to js.bench.0 at `rate` per second, sent every 5 ms."""
    s = _connect(port)
    s.sendall(b"SUB _INBOX.paced.* 1\r\nPING\r\n")
    _read_until(s, b"PONG\r\n")
    s.setblocking(False)
    frame = b"PUB js.bench.0 _INBOX.paced.x %d\r\n%b\r\n" % (size, b"x" * size)
    started = time.perf_counter()
    sent = 0
    while (now := time.perf_counter() - started) < seconds:
        due = int(now * rate) - sent
        if due > 0:
            s.sendall(frame * due)
            sent += due
        try:
            while s.recv(1 << 20):
                pass
        except BlockingIOError:
            pass
        time.sleep(0.005)
    out.put(sent)
    s.close()


def steady_lag(port: int, args: argparse.Namespace) -> Outcome:
    control = Control(port)
    jetstream.create_stream(port, "file")
    create(control, {"name": "MIRROR", "storage": "file", "mirror": {"name": "BENCH"}})
    out: Queue[int] = mp.Queue()
    proc = mp.Process(target=paced_publisher, args=(port, args.rate, args.seconds, args.size, out))
    proc.start()
    lags: list[int] = []
    while proc.is_alive():
        origin = _state(control, "BENCH")["last_seq"]
        mirror = _state(control, "MIRROR")["last_seq"]
        lags.append(max(origin - mirror, 0))
        time.sleep(0.05)
    sent = out.get(timeout=10)
    proc.join()
    wait(control, "MIRROR", sent)
    control.close()
    lags.sort()
    p99 = lags[min(len(lags) - 1, int(len(lags) * 0.99))] if lags else 0
    median = statistics.median(lags) if lags else 0.0
    return Outcome(lag_msgs=(median, float(p99), float(lags[-1] if lags else 0)))


def fan_in(port: int, args: argparse.Namespace) -> Outcome:
    control = Control(port)
    per_origin = args.messages // ORIGINS
    for i in range(ORIGINS):
        create(control, {"name": f"O{i}", "storage": "file", "subjects": [f"js.bench.{i}"]})
    procs = [
        mp.Process(target=_fill, args=(port, i, per_origin, args.size)) for i in range(ORIGINS)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    sources = [{"name": f"O{i}"} for i in range(ORIGINS)]
    create(control, {"name": "FANIN", "storage": "file", "sources": sources})
    total = per_origin * ORIGINS
    elapsed = wait(control, "FANIN", total)
    state = _state(control, "FANIN")
    problem = "" if state["last_seq"] == total else f"FANIN last_seq {state['last_seq']}"
    control.close()
    return Outcome(msgs_per_s=total / elapsed, problem=problem)


WORKLOADS: dict[str, Callable[[int, argparse.Namespace], Outcome]] = {
    "catch-up": catch_up,
    "steady lag": steady_lag,
    "fan-in": fan_in,
}


def servers() -> Iterator[tuple[str, Callable[[], AbstractContextManager[int]]]]:
    yield "nats-server", lambda: nats_server(jetstream=True)
    yield "brook", lambda: brook_server(jetstream=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--rate", type=int, default=5_000, help="steady-lag publishes per s")
    parser.add_argument("--seconds", type=float, default=5.0, help="steady-lag duration")
    args = parser.parse_args()
    print(
        f"{args.messages} messages of {args.size} bytes, file storage; steady lag at "
        f"{args.rate}/s for {args.seconds:.0f} s; fan-in from {ORIGINS} origins\n"
    )
    results: dict[str, dict[str, Outcome | str]] = {}
    for server, start in servers():
        results[server] = {}
        for name, workload in WORKLOADS.items():
            with start() as port:
                try:
                    results[server][name] = workload(port, args)
                except Refused as refused:
                    results[server][name] = f"refused: {refused}"
    print(f"{'workload':12} {'nats-server':>26} {'brook':>26} {'ratio':>7}")
    for name in WORKLOADS:
        ref, ours = results["nats-server"][name], results["brook"][name]
        cells = [_cell(name, r, args.rate) for r in (ref, ours)]
        ratio = ""
        if isinstance(ref, Outcome) and isinstance(ours, Outcome) and ref.msgs_per_s:
            ratio = f"{ours.msgs_per_s / ref.msgs_per_s:.2f}x"
        print(f"{name:12} {cells[0]:>26} {cells[1]:>26} {ratio:>7}")
        for server, r in (("nats-server", ref), ("brook", ours)):
            if isinstance(r, Outcome) and r.problem:
                print(f"  problem on {server}: {r.problem}")
            elif isinstance(r, str):
                print(f"  {server}: {r}")


def _cell(name: str, r: Outcome | str, rate: int) -> str:
    if isinstance(r, str):
        return "refused"
    if name == "steady lag":
        median, p99, top = r.lag_msgs
        return f"{median:.0f}/{p99:.0f}/{top:.0f} msgs ({p99 / rate * 1000:.0f} ms p99)"
    return f"{r.msgs_per_s:,.0f}/s"


if __name__ == "__main__":
    main()
