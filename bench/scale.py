"""Cost per operation as subscriptions, streams and consumers grow: Brook and nats-server.

Each server starts with one file stream `SCALE` (subjects `scale.>`), one unfiltered
durable consumer on it and a filtered pull consumer `FETCH` (`scale.f`). The setup then
grows in steps to `--subs` subscriptions (a tenth of them wildcards, on a connection of
their own), `--streams` more file streams and `--consumers` more durable consumers on
`SCALE`, each with a filter subject of its own (`scale.c.<i>`; every tenth a push
consumer whose deliver subject nobody subscribes to, so the server watches it for
interest), created with a window of requests in flight. At each size the same probes
run, one operation at a time, each timed from request to answer:

* SUB: `SUB probe.<i>` and a PING, until the PONG (the subscriptions are removed after);
* acked publish: `PUB scale.hot` with a reply, until the PubAck (file storage: Brook
  answers after fsync, nats-server before its periodic one), a subject no filtered
  consumer matches;
* stream create: a file stream of its own subjects (deleted after);
* consumer create: a durable consumer on `SCALE` with a filter of its own (deleted after);
* filtered fetch: (messages published to `scale.f` first) a `MSG.NEXT` of one message on
  `FETCH`, timed until the message arrives, then acked.

Two tables: each probe's median wall time per operation and the server's CPU time per
operation (all its threads, from /proc: the kernel's work in its fsyncs included, the
wait for the disk not), at each size, the
growth from the smallest size to the largest (nats-server's stays near 1x: cost does not
depend on streams or consumers that are not concerned), and Brook/nats-server.

    python -m bench.scale [--subs N] [--streams N] [--consumers N] [--steps F,F,..]
                          [--only brook|nats-server] [--profile FILE]

Never part of the test run; numbers go in closing notes and docs, not in assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from bench.core import SERVER_PIDS, _connect, brook_server, nats_server

STREAM = "SCALE"
WINDOW = 32  # growth requests in flight
PROBES = ("SUB", "acked publish", "stream create", "consumer create", "filtered fetch")


class Conn:
    """One raw client connection: frames read in order, requests answered on an inbox."""

    def __init__(self, port: int) -> None:
        self.sock = _connect(port)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * 1024 * 1024)
        self.buf = b""
        self.seq = 0
        self.early: dict[bytes, bytes] = {}
        self.sock.sendall(b"SUB _INBOX.scale.* 1\r\n")
        self.roundtrip()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self) -> None:
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("server closed the connection")
        self.buf += chunk

    def frame(self) -> tuple[bytes, bytes, bytes, bytes]:
        """The next frame as (op, subject, reply, payload); answers PINGs on the way."""
        while True:
            eol = self.buf.find(b"\r\n")
            if eol < 0:
                self._fill()
                continue
            line = self.buf[:eol]
            if line.startswith((b"MSG ", b"HMSG ")):
                parts = line.split(b" ")
                end = eol + 4 + int(parts[-1])
                while len(self.buf) < end:
                    self._fill()
                body = self.buf[eol + 2 : end - 2]
                self.buf = self.buf[end:]
                reply = parts[3] if len(parts) == (6 if parts[0] == b"HMSG" else 5) else b""
                if parts[0] == b"HMSG":
                    body = body[int(parts[-2]) :]
                return parts[0], parts[1], reply, body
            self.buf = self.buf[eol + 2 :]
            if line == b"PING":
                self.sock.sendall(b"PONG\r\n")
            elif line.startswith(b"-ERR"):
                raise SystemExit(f"server error: {line!r}")
            elif line == b"PONG":
                return line, b"", b"", b""

    def roundtrip(self) -> None:
        self.sock.sendall(b"PING\r\n")
        while self.frame()[0] != b"PONG":
            pass

    def _pub(self, subject: str, payload: bytes) -> bytes:
        self.seq += 1
        inbox = b"_INBOX.scale.%d" % self.seq
        frame = b"PUB %b %b %d\r\n%b\r\n" % (subject.encode(), inbox, len(payload), payload)
        self.sock.sendall(frame)
        return inbox

    def _answer(self, inbox: bytes) -> bytes:
        """The reply on `inbox`; replies to other requests are kept (nats-server answers
        requests in flight in any order)."""
        body = self.early.pop(inbox, None)
        while body is None:
            _, subject, _, data = self.frame()
            if subject == inbox:
                return data
            if subject.startswith(b"_INBOX.scale."):
                self.early[subject] = data
        return body

    def request(self, subject: str, body: dict[str, Any] | bytes | None = None) -> dict[str, Any]:
        """An API request, one at a time; a JSON error in the reply ends the benchmark."""
        payload = body if isinstance(body, bytes) else json.dumps(body).encode() if body else b""
        reply: dict[str, Any] = json.loads(self._answer(self._pub(subject, payload)))
        if "error" in reply:
            raise SystemExit(f"{subject}: {reply['error']}")
        return reply

    def requests(self, calls: list[tuple[str, dict[str, Any]]]) -> None:
        """API requests with `WINDOW` in flight."""
        inboxes: list[bytes] = []
        answered = 0
        for subject, body in calls:
            inboxes.append(self._pub(subject, json.dumps(body).encode()))
            if len(inboxes) - answered >= WINDOW:
                self._check(self._answer(inboxes[answered]), subject)
                answered += 1
        while answered < len(inboxes):
            self._check(self._answer(inboxes[answered]), "pipelined request")
            answered += 1

    @staticmethod
    def _check(reply: bytes, what: str) -> None:
        if b'"error"' in reply:
            raise SystemExit(f"{what}: {reply[:300]!r}")

    def close(self) -> None:
        self.sock.close()


def stream_config(name: str, subjects: list[str]) -> dict[str, Any]:
    return {"name": name, "subjects": subjects, "storage": "file"}


def consumer_create(
    name: str, filter_subject: str | None, deliver_subject: str | None = None
) -> tuple[str, dict[str, Any]]:
    config: dict[str, Any] = {"durable_name": name, "ack_policy": "explicit"}
    if filter_subject is not None:
        config["filter_subject"] = filter_subject
    if deliver_subject is not None:
        config["deliver_subject"] = deliver_subject
    return (
        f"$JS.API.CONSUMER.CREATE.{STREAM}.{name}",
        {"stream_name": STREAM, "config": config},
    )


@dataclass
class Setup:
    """What exists now (beyond the base stream and its two consumers)."""

    subs: int = 0
    streams: int = 0
    consumers: int = 0


@dataclass
class Point:
    size: Setup
    us: dict[str, float] = field(default_factory=dict)  # probe -> median wall µs per op
    cpu: dict[str, float] = field(default_factory=dict)  # probe -> server CPU µs per op


def server_cpu_ns(pid: int) -> int:
    """CPU time the server's threads have run so far, in ns (/proc/<pid>/task/*/schedstat:
    exact, where /proc/<pid>/stat counts clock ticks)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/schedstat") as f:
            total += int(f.read().split()[0])
    return total


class Bench:
    def __init__(self, port: int, args: argparse.Namespace) -> None:
        self.args = args
        self.pid = SERVER_PIDS[port]
        self.ctl = Conn(port)  # API requests and probes
        self.holder = Conn(port)  # the grown subscriptions
        self.have = Setup()
        self.stage = 0
        # nats-server 2.15 refuses a stream's 1001st consumer unless max_consumers says more.
        base = stream_config(STREAM, ["scale.>"]) | {"max_consumers": args.consumers + 1000}
        self.ctl.request(f"$JS.API.STREAM.CREATE.{STREAM}", base)
        self.ctl.requests([consumer_create("BASE", None), consumer_create("FETCH", "scale.f")])

    def grow(self, to: Setup) -> None:
        subs = [
            b"SUB hold.%d.* h%d\r\n" % (i, i) if i % 10 == 9 else b"SUB hold.%d h%d\r\n" % (i, i)
            for i in range(self.have.subs, to.subs)
        ]
        for start in range(0, len(subs), 1000):
            self.holder.send(b"".join(subs[start : start + 1000]))
        self.holder.roundtrip()
        self.ctl.requests(
            [
                (f"$JS.API.STREAM.CREATE.G{i}", stream_config(f"G{i}", [f"g{i}.>"]))
                for i in range(self.have.streams, to.streams)
            ]
        )
        grown = range(self.have.consumers, to.consumers)
        self.ctl.requests(
            [
                consumer_create(f"C{i}", f"scale.c.{i}", f"deliver.{i}" if i % 10 == 9 else None)
                for i in grown
            ]
        )
        self.have = to

    def timed(self, point: Point, probe: str, count: int, op: Callable[[int], object]) -> None:
        """`op(i)` for i in range(count), one at a time: the median wall time of one and
        the server's mean CPU time per operation, in µs, go to `point`."""
        samples = []
        cpu = server_cpu_ns(self.pid)
        for i in range(count):
            start = time.perf_counter()
            op(i)
            samples.append(time.perf_counter() - start)
        point.cpu[probe] = (server_cpu_ns(self.pid) - cpu) / count / 1000
        point.us[probe] = statistics.median(samples) * 1e6

    def probe(self, point: Point) -> None:
        a, ctl, n = self.args, self.ctl, self.stage
        self.stage += 1

        def sub(i: int) -> None:
            ctl.send(b"SUB probe.%d.%d p%d.%d\r\n" % (n, i, n, i))
            ctl.roundtrip()

        self.timed(point, "SUB", a.probe_subs, sub)
        ctl.send(b"".join(b"UNSUB p%d.%d\r\n" % (n, i) for i in range(a.probe_subs)))
        ctl.roundtrip()
        self.timed(point, "acked publish", a.probe_pubs, lambda i: self._publish("scale.hot"))
        names = [f"P{n}_{i}" for i in range(a.probe_creates)]
        self.timed(
            point,
            "stream create",
            a.probe_creates,
            lambda i: ctl.request(
                f"$JS.API.STREAM.CREATE.{names[i]}", stream_config(names[i], [f"p{n}.{i}.>"])
            ),
        )
        ctl.requests([(f"$JS.API.STREAM.DELETE.{name}", {}) for name in names])
        self.timed(
            point,
            "consumer create",
            a.probe_creates,
            lambda i: ctl.request(*consumer_create(names[i], f"scale.p.{n}.{i}")),
        )
        ctl.requests([(f"$JS.API.CONSUMER.DELETE.{STREAM}.{name}", {}) for name in names])
        for _ in range(a.probe_fetches):
            self._publish("scale.f")
        self.timed(
            point,
            "filtered fetch",
            a.probe_fetches,
            lambda i: ctl.send(b"PUB %b 0\r\n\r\n" % self._fetch_one()),  # and ack it
        )

    def _publish(self, subject: str) -> None:
        self.ctl.request(subject, b"x" * 16)

    def _fetch_one(self) -> bytes:
        """One message from FETCH; returns its ack subject."""
        ctl = self.ctl
        inbox = ctl._pub(f"$JS.API.CONSUMER.MSG.NEXT.{STREAM}.FETCH", b'{"batch":1}')
        while True:
            _, subject, reply, body = ctl.frame()
            if subject == b"scale.f" and reply:
                return reply  # a delivery shows the stored subject; its reply is the ack
            if subject == inbox:
                raise SystemExit(f"fetch answered with a status: {body!r}")

    def close(self) -> None:
        self.ctl.close()
        self.holder.close()


def run_server(server: AbstractContextManager[int], args: argparse.Namespace) -> list[Point]:
    points = []
    with server as port:
        bench = Bench(port, args)
        for f in args.steps:
            to = Setup(int(args.subs * f), int(args.streams * f), int(args.consumers * f))
            start = time.perf_counter()
            bench.grow(to)
            grown = time.perf_counter() - start
            point = Point(to)
            bench.probe(point)
            points.append(point)
            print(
                f"  {to.subs:>6} subs {to.streams:>5} streams {to.consumers:>6} consumers"
                f" (grown in {grown:5.1f} s): "
                + ", ".join(f"{k} {point.us[k]:,.0f} µs ({point.cpu[k]:,.0f})" for k in PROBES),
                flush=True,
            )
        bench.close()
    return points


def servers(args: argparse.Namespace) -> Iterator[tuple[str, AbstractContextManager[int]]]:
    if args.only in (None, "nats-server"):
        yield "nats-server", nats_server(jetstream=True)
    if args.only in (None, "brook"):
        yield "brook", brook_server(jetstream=True, profile=args.profile)


def report(results: dict[str, list[Point]]) -> None:
    sizes = [p.size for p in next(iter(results.values()))]
    header = "".join(f" {f'{s.subs}/{s.streams}/{s.consumers}':>17}" for s in sizes)
    measures: list[tuple[str, Callable[[Point, str], float]]] = [
        ("median wall µs per operation", lambda p, probe: p.us[probe]),
        ("server CPU µs per operation", lambda p, probe: p.cpu[probe]),
    ]
    for title, measure in measures:
        print(f"\n{title:48} at subs/streams/consumers{header}   growth")
        for probe in PROBES:
            for name, points in results.items():
                row = [measure(p, probe) for p in points]
                cells = "".join(f" {v:>17,.0f}" for v in row)
                growth = row[-1] / row[0] if row[0] else float("nan")
                print(f"  {probe:16} {name:12}{' ' * 44}{cells} {growth:>7.1f}x")
            if len(results) == 2:
                ref, ours = results["nats-server"], results["brook"]
                pairs = zip(ref, ours, strict=True)
                cells = "".join(
                    f" {measure(o, probe) / measure(r, probe):>16.1f}x" for r, o in pairs
                )
                print(f"  {probe:16} {'brook/nats':12}{' ' * 44}{cells}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subs", type=int, default=10_000)
    parser.add_argument("--streams", type=int, default=1_000)
    parser.add_argument("--consumers", type=int, default=10_000)
    parser.add_argument(
        "--steps",
        type=lambda s: [float(x) for x in s.split(",")],
        default=[0.0, 0.1, 0.3, 1.0],
        help="the sizes probed, as fractions of the full setup",
    )
    parser.add_argument("--probe-subs", type=int, default=500)
    parser.add_argument("--probe-pubs", type=int, default=200)
    parser.add_argument("--probe-creates", type=int, default=50)
    parser.add_argument("--probe-fetches", type=int, default=100)
    parser.add_argument("--only", choices=["brook", "nats-server"])
    parser.add_argument("--profile", metavar="FILE", help="run Brook under cProfile")
    args = parser.parse_args()
    print(
        f"up to {args.subs} subscriptions, {args.streams} file streams, {args.consumers}"
        f" filtered consumers on one stream; {os.cpu_count()} cores"
    )
    results: dict[str, list[Point]] = {}
    for name, server in servers(args):
        print(name, flush=True)
        results[name] = run_server(server, args)
    report(results)


if __name__ == "__main__":
    main()
