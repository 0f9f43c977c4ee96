"""JetStream consumer throughput: pull and push with explicit acks, Brook and nats-server.

Each server gets a file-storage stream of N stored messages (filled by the raw-socket
publishers of bench/jetstream.py; the fill rate is printed too), then every workload reads
the whole stream through its own durable consumer with `ack_policy: explicit`:

* pull: `$JS.API.CONSUMER.MSG.NEXT` requests of `{"batch":100,"expires":30s}` to one
  inbox; the client acks what it read (`+ACK` to each reply subject) and then tops up its
  requests, keeping 1 (a plain `fetch(100)` loop: next request once the batch is in) or 4
  (as nats.go's pipelined consumers do: a new request as soon as 100 of the 400 requested
  have arrived) requests outstanding; `max_ack_pending` is the server default, 1000;
* push: a deliver subject with no interest until the client subscribes (delivery starts
  at the SUB), every message acked as soon as its chunk is read, at two `max_ack_pending`
  settings: the server default of 1000 and 20000.

The clients are raw-socket loops in a separate process (nats-py tops out near 50-60k
msgs/s): they parse MSG/HMSG frames themselves and answer a whole read chunk with one
write of acks, so they cost little per message; their CPU share is printed so one can
tell. A workload ends when consumer info reports the ack floor at N with nothing pending,
which is also checked on both servers. nats-server runs first, then Brook, one at a time.

    python -m bench.consumers [--messages N] [--size BYTES] [--profile FILE]

Never part of the test run; numbers go in closing notes and docs, not in assertions.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import socket
import time
from dataclasses import dataclass
from multiprocessing.queues import Queue
from typing import Any

from bench import jetstream
from bench.core import _connect, brook_server, nats_server, server_cpu_s

STREAM = b"BENCH"  # created by bench.jetstream.create_stream, subjects js.bench.>
PULL_BATCH = 100
PULL_EXPIRES_NS = 30_000_000_000
ACK_TAIL = b" 4\r\n+ACK\r\n"
ACK_JOIN = ACK_TAIL + b"PUB "
FLOOR_TIMEOUT_S = 60.0


class Frames:
    """What one read chunk held: acks owed, messages counted, status headers, PING seen.

    The scanner works per chunk, not per message, and keeps only the reply subjects, so
    that the client's cost per message is a find, a split and an append.
    """

    __slots__ = ("acks", "messages", "ping", "pong", "statuses")

    def __init__(self) -> None:
        self.acks: list[bytes] = []
        self.messages = 0
        self.statuses: list[bytes] = []
        self.ping = False
        self.pong = False


def scan(buf: bytes, out: Frames) -> int:
    """Consume complete frames from `buf` into `out`; return where the incomplete rest starts.

    A MSG with a reply subject (`MSG subj sid reply size`) is a consumer delivery; an HMSG
    without one is a status message (408/409 for pull requests), whose header block is kept.
    """
    pos = 0
    n = len(buf)
    while pos < n:
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            break
        if buf.startswith(b"MSG ", pos):
            parts = buf[pos + 4 : eol].split(b" ")
            end = eol + 4 + int(parts[-1])
            if end > n:
                break
            if len(parts) == 4:
                out.acks.append(parts[2])
                out.messages += 1
            pos = end
        elif buf.startswith(b"HMSG ", pos):
            parts = buf[pos + 5 : eol].split(b" ")
            end = eol + 4 + int(parts[-1])
            if end > n:
                break
            if len(parts) == 5:
                out.acks.append(parts[2])
                out.messages += 1
            else:
                out.statuses.append(buf[eol + 2 : eol + 2 + int(parts[-2])])
            pos = end
        else:
            line = buf[pos:eol]
            if line == b"PING":
                out.ping = True
            elif line == b"PONG":
                out.pong = True
            elif line.startswith(b"-ERR"):
                raise SystemExit(f"server error: {line!r}")
            pos = eol + 2
    return pos


def ack_frames(acks: list[bytes]) -> bytes:
    """One `PUB <reply> 4\\r\\n+ACK\\r\\n` per reply subject, built with a single join."""
    if not acks:
        return b""
    return b"PUB " + ACK_JOIN.join(acks) + ACK_TAIL


class Control:
    """A blocking request/reply connection for the JetStream API (create, info)."""

    def __init__(self, port: int) -> None:
        self.sock = _connect(port)
        self.sock.sendall(b"SUB _INBOX.ctl.* 1\r\n")
        self.seq = 0
        self.buf = b""

    def request(self, subject: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        self.seq += 1
        payload = json.dumps(body).encode() if body is not None else b""
        self.sock.sendall(
            b"PUB %b _INBOX.ctl.%d %d\r\n%b\r\n"
            % (subject.encode(), self.seq, len(payload), payload)
        )
        while True:
            eol = self.buf.find(b"\r\n")
            if eol >= 0 and self.buf.startswith(b"MSG "):
                parts = self.buf[4:eol].split(b" ")
                end = eol + 4 + int(parts[-1])
                if len(self.buf) >= end:
                    data = self.buf[eol + 2 : end - 2]
                    self.buf = self.buf[end:]
                    if parts[0] == b"_INBOX.ctl.%d" % self.seq:
                        reply: dict[str, Any] = json.loads(data)
                        return reply
                    continue
            elif eol >= 0:
                line, self.buf = self.buf[:eol], self.buf[eol + 2 :]
                if line == b"PING":
                    self.sock.sendall(b"PONG\r\n")
                continue
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("server closed the control connection")
            self.buf += chunk

    def create_consumer(self, name: str, config: dict[str, Any]) -> None:
        config = {"durable_name": name, "ack_policy": "explicit", "deliver_policy": "all"} | config
        reply = self.request(
            f"$JS.API.CONSUMER.CREATE.{STREAM.decode()}.{name}",
            {"stream_name": STREAM.decode(), "config": config},
        )
        if "error" in reply:
            raise SystemExit(f"consumer create failed: {reply['error']}")

    def info(self, name: str) -> dict[str, Any]:
        return self.request(f"$JS.API.CONSUMER.INFO.{STREAM.decode()}.{name}")

    def wait_acked(self, name: str, total: int) -> dict[str, Any]:
        """Poll consumer info until the ack floor reaches `total`; return the last info."""
        deadline = time.perf_counter() + FLOOR_TIMEOUT_S
        while True:
            info = self.info(name)
            if info.get("ack_floor", {}).get("stream_seq", 0) >= total or (
                time.perf_counter() > deadline
            ):
                return info
            time.sleep(0.002)

    def close(self) -> None:
        self.sock.close()


@dataclass
class Outcome:
    """One client's view of a workload: counts, wall time to a confirmed ack floor, CPU."""

    received: int
    elapsed_s: float
    client_cpu_s: float
    statuses: int
    ack_floor: int
    num_ack_pending: int
    num_pending: int
    num_redelivered: int
    server_cpu_s: float = 0.0  # the server's CPU over the workload (set by run_workload)


def _finish(
    s: socket.socket, control: Control, name: str, total: int
) -> tuple[float, dict[str, Any]]:
    """Flush the last acks' reading (PING/PONG), then wait for the server's ack floor."""
    s.sendall(b"PING\r\n")
    tail = b""
    frames = Frames()
    while not frames.pong:
        chunk = s.recv(1 << 16)
        if not chunk:
            raise ConnectionError("server closed the connection")
        buf = tail + chunk
        tail = buf[scan(buf, frames) :]
    info = control.wait_acked(name, total)
    return time.perf_counter(), info


def _outcome(
    received: int, start: float, end: float, cpu: float, statuses: int, info: dict[str, Any]
) -> Outcome:
    return Outcome(
        received=received,
        elapsed_s=end - start,
        client_cpu_s=cpu,
        statuses=statuses,
        ack_floor=int(info.get("ack_floor", {}).get("stream_seq", -1)),
        num_ack_pending=int(info.get("num_ack_pending", -1)),
        num_pending=int(info.get("num_pending", -1)),
        num_redelivered=int(info.get("num_redelivered", -1)),
    )


def _pending_from_status(header: bytes) -> int:
    """`Nats-Pending-Messages` of a 408/409 status: messages the request never delivered."""
    for line in header.split(b"\r\n"):
        key, _, value = line.partition(b":")
        if key.strip().lower() == b"nats-pending-messages":
            return int(value.strip())
    return 0


def pull_client(port: int, name: str, total: int, inflight: int, out: Queue[Outcome]) -> None:
    """Fetch-100 loop: ack every message of a batch, then request the next batch."""
    control = Control(port)
    s = _connect(port)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * 1024 * 1024)
    inbox = b"_INBOX.pull.%b" % name.encode()
    s.sendall(b"SUB %b 1\r\nPING\r\n" % inbox)
    frames = Frames()
    tail = b""
    while not frames.pong:
        buf = tail + s.recv(1 << 16)
        tail = buf[scan(buf, frames) :]
    next_subject = b"$JS.API.CONSUMER.MSG.NEXT.%b.%b" % (STREAM, name.encode())

    def pull(batch: int) -> bytes:
        body = b'{"batch":%d,"expires":%d}' % (batch, PULL_EXPIRES_NS)
        return b"PUB %b %b %d\r\n%b\r\n" % (next_subject, inbox, len(body), body)

    window = (inflight - 1) * PULL_BATCH
    received = requested = statuses = 0
    cpu0 = time.process_time()
    start = time.perf_counter()
    out_buf = []
    while requested < total and requested - received <= window:
        batch = min(PULL_BATCH, total - requested)
        out_buf.append(pull(batch))
        requested += batch
    s.sendall(b"".join(out_buf))
    while received < total:
        chunk = s.recv(1 << 20)
        if not chunk:
            raise ConnectionError("server closed the connection")
        buf = tail + chunk
        frames = Frames()
        tail = buf[scan(buf, frames) :]
        received += frames.messages
        for header in frames.statuses:
            statuses += 1
            if not header.startswith(b"NATS/1.0 100"):
                requested -= _pending_from_status(header)
        out_buf = [ack_frames(frames.acks)]
        if frames.ping:
            out_buf.append(b"PONG\r\n")
        while requested < total and requested - received <= window:
            batch = min(PULL_BATCH, total - requested)
            out_buf.append(pull(batch))
            requested += batch
        s.sendall(b"".join(out_buf))
    end, info = _finish(s, control, name, total)
    cpu = time.process_time() - cpu0
    out.put(_outcome(received, start, end, cpu, statuses, info))
    s.close()
    control.close()


def push_client(port: int, name: str, deliver: bytes, total: int, out: Queue[Outcome]) -> None:
    """Subscribe to the deliver subject (delivery starts here) and ack every message."""
    control = Control(port)
    s = _connect(port)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * 1024 * 1024)
    received = statuses = 0
    tail = b""
    cpu0 = time.process_time()
    start = time.perf_counter()
    s.sendall(b"SUB %b 1\r\n" % deliver)
    while received < total:
        chunk = s.recv(1 << 20)
        if not chunk:
            raise ConnectionError("server closed the connection")
        buf = tail + chunk
        frames = Frames()
        tail = buf[scan(buf, frames) :]
        received += frames.messages
        statuses += len(frames.statuses)
        data = ack_frames(frames.acks)
        if frames.ping:
            data += b"PONG\r\n"
        if data:
            s.sendall(data)
    end, info = _finish(s, control, name, total)
    cpu = time.process_time() - cpu0
    out.put(_outcome(received, start, end, cpu, statuses, info))
    s.close()
    control.close()


@dataclass
class Workload:
    label: str
    name: str
    config: dict[str, Any]
    inflight: int = 0  # pull requests outstanding; 0 for push


WORKLOADS = [
    Workload("pull fetch(100), 1 request out", "PULL1", {}, inflight=1),
    Workload("pull fetch(100), 4 requests out", "PULL4", {}, inflight=4),
    Workload("push, max_ack_pending 1000", "PUSH1K", {"max_ack_pending": 1000}),
    Workload("push, max_ack_pending 20000", "PUSH20K", {"max_ack_pending": 20000}),
]


def run_workload(port: int, w: Workload, total: int) -> Outcome:
    control = Control(port)
    deliver = b"_INBOX.push.%b" % w.name.encode()
    config = dict(w.config)
    if not w.inflight:
        config["deliver_subject"] = deliver.decode()
    control.create_consumer(w.name, config)
    control.close()
    out: Queue[Outcome] = mp.Queue()
    if w.inflight:
        proc = mp.Process(target=pull_client, args=(port, w.name, total, w.inflight, out))
    else:
        proc = mp.Process(target=push_client, args=(port, w.name, deliver, total, out))
    cpu_before = server_cpu_s(port)
    proc.start()
    result = out.get(timeout=max(300.0, total / 2000))
    proc.join()
    result.server_cpu_s = server_cpu_s(port) - cpu_before
    return result


def run_server(port: int, args: argparse.Namespace) -> tuple[float, list[Outcome]]:
    fill = jetstream.run(port, args.messages, args.size, 2, args.window, "file")
    control = Control(port)
    info = control.request(f"$JS.API.STREAM.INFO.{STREAM.decode()}")
    stored = info.get("state", {}).get("messages")
    control.close()
    if stored != args.messages:
        raise SystemExit(f"stream holds {stored} messages, expected {args.messages}")
    return fill, [run_workload(port, w, args.messages) for w in args.workloads]


def _check(server: str, w: Workload, o: Outcome, total: int) -> str:
    """Empty when the consumer ended fully acked; otherwise what was wrong."""
    problems = []
    if o.ack_floor != total:
        problems.append(f"ack floor {o.ack_floor}")
    if o.num_ack_pending != 0:
        problems.append(f"ack pending {o.num_ack_pending}")
    if o.num_pending != 0:
        problems.append(f"num_pending {o.num_pending}")
    if o.num_redelivered:
        problems.append(f"redelivered {o.num_redelivered}")
    if o.received != total:
        problems.append(f"received {o.received}")
    return f"  {server} {w.name}: " + ", ".join(problems) if problems else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--window", type=int, default=1000, help="fill publishes in flight")
    parser.add_argument(
        "--profile", metavar="FILE", help="run Brook under cProfile, stats written to FILE"
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=[w.name for w in WORKLOADS],
        help="run only this workload (repeatable), e.g. to profile one of them",
    )
    args = parser.parse_args()
    args.workloads = [w for w in WORKLOADS if not args.only or w.name in args.only]
    if args.messages % 2:
        parser.error("--messages must be even (the fill uses two publishers)")
    print(
        f"{args.messages} stored messages of {args.size} bytes (file storage), durable "
        f"consumers, ack_policy explicit; {os.cpu_count()} cores\n"
    )
    with nats_server(jetstream=True) as port:
        ref_fill, ref = run_server(port, args)
    with brook_server(jetstream=True, profile=args.profile) as port:
        our_fill, ours = run_server(port, args)
    print(
        f"{'workload':34} {'nats-server':>14} {'brook':>14} {'ratio':>7}"
        f" {'client CPU (nats/brook)':>24} {'server µs/msg (nats/brook)':>27}"
    )
    print(
        f"{'fill (2 publishers, acked)':34} {ref_fill:>10,.0f}/s {our_fill:>10,.0f}/s "
        f"{our_fill / ref_fill:>6.2f}x"
    )
    problems = []
    for w, r, o in zip(args.workloads, ref, ours, strict=True):
        r_rate, o_rate = r.received / r.elapsed_s, o.received / o.elapsed_s
        print(
            f"{w.label:34} {r_rate:>10,.0f}/s {o_rate:>10,.0f}/s {o_rate / r_rate:>6.2f}x"
            f" {r.client_cpu_s / r.elapsed_s:>15.0%} / {o.client_cpu_s / o.elapsed_s:<4.0%}"
            f" {r.server_cpu_s / r.received * 1e6:>16.1f} / {o.server_cpu_s / o.received * 1e6:.1f}"
        )
        problems += [
            _check("nats-server", w, r, args.messages),
            _check("brook", w, o, args.messages),
        ]
        if r.statuses or o.statuses:
            problems.append(
                f"  {w.name}: status messages nats-server {r.statuses}, brook {o.statuses}"
            )
    problems = [p for p in problems if p]
    print(
        "\nall consumers ended with ack floor = N, nothing pending, nothing redelivered"
        if not problems
        else "\nproblems:\n" + "\n".join(problems)
    )


if __name__ == "__main__":
    main()
