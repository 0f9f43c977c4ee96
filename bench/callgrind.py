"""Instructions per message of Brook's server process, counted by callgrind.

Wall-clock benchmarks on a shared 2-core machine move by 10-20 % between runs; the number
of instructions the server executes per message moves by well under 1 %, so it is what a
change to the hot path is judged by (before and after, same machine, same workload).

    python -m bench.callgrind WORKLOAD [--messages N] [--keep FILE]

WORKLOAD is one of
* `core`: one publisher → one subscriber, 16-byte core NATS messages;
* `core-users`: the same, both clients logged in as a user without permissions;
* `core-perms`: the same, as a user whose publish and subscribe permissions each have an
  allow and a deny list (`bench.permissions`'s config), so every message is checked;
* `core-mapped`: `core`, the publisher publishing to `mapped.core`, which a subject
  mapping (`"mapped.*": "bench.{{wildcard(1)}}"`) sends to the subscriber's subject;
* `core-mixed`: one publisher → one subscriber of `bench.core`'s mixed traffic (64
  subjects, a wildcard subscription, payloads of 16 B to 1 KiB, replies and headers);
* `publish`: acknowledged JetStream publishes (16 bytes, 100 in flight) to a file stream
  with one idle consumer, so each is fsynced by the group commit before its PubAck;
* `publish-dedup`: the same, each publish with a `Nats-Msg-Id` of its own (as Spark's
  writes), so each is also checked against and remembered in the duplicate window;
* `publish-consumers`: the same with 20 idle consumers (unfiltered, pull, none fetching):
  what each consumer a publish concerns costs it (ideally next to nothing);
* `publish-one`: `publish` strictly one at a time (each PUB sent once the previous
  PubAck arrived), as an application awaiting each publish: every publish is a group
  commit of its own, so this is what a batch's round trip costs (ADR 0068);
* `publish-limits`: the same under a server store limit (`max_file_store`, far from
  reached), so every publish is admitted by it (jetstream/quota.py);
* `spark-write`: the Spark connector's write task (`bench.spark_publish`: 100-byte rows,
  derived `Nats-Msg-Id`s, up to `maxPending` in flight) to an `allow_batched` file stream,
  a PubAck per row (option fastBatch=false); `spark-write-fast`: the same rows as one
  ADR-50 fast batch, a flow ack per up to 500 rows (brook_spark/fastbatch.py, ADR 0063);
* `pull`: a pull consumer fetching and acking (explicit) 128-byte stored messages;
* `push`: a push consumer with explicit acks, likewise;
* `direct`: N 100-byte messages of a file stream with `allow_direct` read by the Spark
  connector's batched direct gets (`brook_spark.fetch.read_range`, 10,000 per request), as
  a Spark task reads them: the server's cost of one direct-get reply;
* `mirror`: a mirror created on a file stream holding N 128-byte messages, counted until
  it holds all N (the catch-up: the origin's push delivery and the mirror's link and store);
* `source`: the same with a stream sourcing that stream (its messages stored under new
  sequences with the `Nats-Stream-Source` header, as a publish is);
* `leaf-out`: `core` across a leafnode connection, Brook the spoke of a nats-server hub,
  the publisher on Brook and the subscriber on the hub: Brook's cost of a PUB sent on as
  an `LMSG` (ADR 0032);
* `leaf-in`: the other direction, a nats-server spoke of a Brook hub, the publisher on
  the spoke and the subscriber on Brook: Brook's cost of an `LMSG` delivered as a `MSG`;
* `leaf-out-5k`, `leaf-in-5k`: the same with 5,000 more subscriptions (other subjects)
  on each side, so each side's interest map holds them: the cost per message must not grow.

Only Brook runs under callgrind; a leaf workload's nats-server is started beside it.

Brook runs under `valgrind --tool=callgrind` with its own store; the counters are zeroed
once the workload is set up (streams created, messages stored, clients connected) and dumped
when it ends, so only the workload is counted. Needs valgrind (Debian's `valgrind` package);
never part of the test run.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import glob
import json
import multiprocessing as mp
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.queues import Queue
from pathlib import Path

from tests.support.natsserver import free_port, wait_for_info

from bench import consumers, jetstream, leafnode, mirrors, permissions
from bench.core import (
    BATCH,
    CONNECT,
    MIX_CYCLE,
    MIX_WILDCARD,
    SERVER_PIDS,
    _connect,
    _read_until,
    connect_as,
    count_frames,
    mixed_cycle,
    send_frames,
)

DEFAULT_MESSAGES = {
    "core": 100_000,
    "core-users": 100_000,
    "core-perms": 100_000,
    "core-mapped": 100_000,
    "core-mixed": 102_400,  # 400 cycles of `bench.core.Mix`
    "publish": 5_000,
    "publish-dedup": 5_000,
    "publish-consumers": 5_000,
    "publish-limits": 5_000,
    "publish-one": 1_000,
    "spark-write": 5_000,
    "spark-write-fast": 5_000,
    "pull": 10_000,
    "push": 10_000,
    "direct": 50_000,
    "mirror": 20_000,
    "source": 5_000,  # 20,000 outlasted WAIT_S under valgrind on a loaded machine
    "leaf-out": 100_000,
    "leaf-in": 100_000,
    "leaf-out-5k": 100_000,
    "leaf-in-5k": 100_000,
}
CONSUMER_WORKLOADS = {"pull": "PULL1", "push": "PUSH1K"}


def _control(pid: int, flag: str) -> None:
    """`callgrind_control -z` zeroes the counters, `-d` dumps them to a new file."""
    subprocess.run(
        ["callgrind_control", flag, str(pid)],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _core_as(connect: bytes) -> Callable[[int, int, Callable[[], None]], None]:
    return lambda port, n, zero: _core(port, n, zero, connect)


def _core(
    port: int,
    n: int,
    zero: Callable[[], None],
    connect: bytes = CONNECT,
    published: bytes = b"bench.core",
) -> None:
    subject = b"bench.core"  # allowed by `bench.permissions`'s config
    frame = b"PUB %b 16\r\n%b\r\n" % (published, b"x" * 16)
    frame_len = len(b"MSG %b 1 16\r\n" % subject) + 16 + 2
    _pub_sub(port, zero, frame, subject, frame_len, n, connect)


def _core_mixed(port: int, n: int, zero: Callable[[], None]) -> None:
    if n % MIX_CYCLE:
        raise SystemExit(f"core-mixed: --messages must be a multiple of {MIX_CYCLE}")
    mix = mixed_cycle()
    _pub_sub(port, zero, mix.pubs, MIX_WILDCARD, mix.msg_bytes, n // MIX_CYCLE, CONNECT, 2)


def _pub_sub(
    port: int,
    zero: Callable[[], None],
    frame: bytes,
    subject: bytes,
    frame_len: int,
    count: int,
    connect: bytes,
    per_send: int = BATCH,
) -> None:
    """One publisher sending `frame` `count` times, one subscriber to `subject`
    receiving as many frames of `frame_len` bytes (`bench.core`'s load generators)."""
    ready = mp.Barrier(3)
    out: Queue[tuple[int, float]] = mp.Queue()
    args = (port, subject, frame_len, count, ready, out, connect)
    sub = mp.Process(target=count_frames, args=args)
    sub.start()
    time.sleep(2.0)  # under valgrind: the subscription is registered before the publisher starts
    pub = mp.Process(target=send_frames, args=(port, frame, count, ready, connect, per_send))
    pub.start()
    time.sleep(2.0)  # both connected and waiting at the barrier
    zero()
    ready.wait()
    received, _ = out.get(timeout=3000)
    pub.join()
    sub.join()
    if received != count:
        raise SystemExit(f"core: {received} of {count} frames received")


def _publish(
    port: int, n: int, zero: Callable[[], None], msg_ids: bool = False, idle: int = 1
) -> None:
    jetstream.create_stream(port, "file")
    control = consumers.Control(port)
    for i in range(idle):
        control.create_consumer(f"IDLE{i}" if i else "IDLE", {})
    control.close()
    zero()
    out: Queue[tuple[int, float]] = mp.Queue()
    pub = mp.Process(target=jetstream.publisher, args=(port, 0, n, 16, 100, out, msg_ids))
    pub.start()
    acked, _ = out.get(timeout=3000)
    pub.join()
    if acked != n:
        raise SystemExit(f"publish: {acked} of {n} publishes acknowledged")


def _publish_one(port: int, n: int, zero: Callable[[], None]) -> None:
    jetstream.create_stream(port, "file")
    control = consumers.Control(port)
    control.create_consumer("IDLE", {})
    control.close()
    zero()
    pub = mp.Process(target=_one_by_one, args=(port, n))
    pub.start()
    pub.join()
    if pub.exitcode != 0:
        raise SystemExit(f"publish-one: the publisher failed ({pub.exitcode})")


def _one_by_one(port: int, n: int) -> None:
    """`n` 16-byte publishes, each sent once the previous one's PubAck arrived."""
    s = _connect(port)
    s.setblocking(True)
    s.sendall(b"SUB _INBOX.one.* 1\r\nPING\r\n")
    _read_until(s, b"PONG\r\n")
    frame = b"PUB js.bench.0 _INBOX.one.x 16\r\n%b\r\n" % (b"x" * 16)
    pending = b""
    for _ in range(n):
        s.sendall(frame)
        while (end := pending.find(b"}\r\n")) < 0:
            pending += s.recv(65536)
        pending = pending[end + 3 :]
    s.close()


def _consume(name: str) -> Callable[[int, int, Callable[[], None]], None]:
    def run(port: int, n: int, zero: Callable[[], None]) -> None:
        jetstream.run(port, n, 128, 2, 1000, "file")
        workload = next(w for w in consumers.WORKLOADS if w.name == CONSUMER_WORKLOADS[name])
        zero()
        outcome = consumers.run_workload(port, workload, n)
        if outcome.ack_floor != n:
            raise SystemExit(f"{name}: ack floor {outcome.ack_floor}, expected {n}")

    return run


def _direct(port: int, n: int, zero: Callable[[], None]) -> None:
    from brook_spark import fetch  # the connector's imports (pyarrow) only for this workload
    from brook_spark.options import ConnectOptions

    s = _connect(port)
    body = json.dumps(
        {"name": "BENCH", "subjects": ["js.bench.>"], "storage": "file", "allow_direct": True}
    ).encode()
    s.sendall(
        b"SUB _INBOX.create 1\r\nPUB $JS.API.STREAM.CREATE.BENCH _INBOX.create %d\r\n%b\r\n"
        % (len(body), body)
    )
    _read_until(s, b"stream_create_response")
    s.close()
    out: Queue[tuple[int, float]] = mp.Queue()
    pub = mp.Process(target=jetstream.publisher, args=(port, 0, n, 100, 1000, out))
    pub.start()
    acked, _ = out.get(timeout=3000)
    pub.join()
    spec = fetch.RangeRead(
        connect=ConnectOptions(servers=(f"nats://127.0.0.1:{port}",), request_timeout_s=600.0),
        stream="BENCH",
        lo=1,
        hi=n + 1,
        filters=(),
        direct=True,
        include_headers=True,
    )
    zero()
    rows = sum(batch.num_rows for batch in fetch.read_range(spec))
    if acked != n or rows != n:
        raise SystemExit(f"direct: {acked} stored, {rows} of {n} read")


def _copy(kind: str) -> Callable[[int, int, Callable[[], None]], None]:
    """A mirror (`kind` "mirror") or a source ("sources") of a stream of `n` messages."""

    def run(port: int, n: int, zero: Callable[[], None]) -> None:
        jetstream.run(port, n, 128, 2, 1000, "file")
        control = consumers.Control(port)
        zero()
        origin = {"name": "BENCH"}
        config = {"name": "COPY", "storage": "file", kind: origin if kind == "mirror" else [origin]}
        mirrors.create(control, config)
        mirrors.wait(control, "COPY", n, poll_s=1.0)  # few polls: not the workload
        control.close()

    return run


@dataclass(frozen=True)
class LeafWorkload:
    """Messages across a leaf connection between Brook (its role: "spoke" or "hub") and a
    nats-server, the publisher on the spoke, with `extra` more subscriptions on each side.

    The publisher sends `LEAF_BATCH` messages, then waits for the subscriber to have
    them all: unpaced, a nats-server would find Brook under valgrind a slow consumer of
    its leaf connection and drop it (and Brook a nats-server hub's)."""

    brook_role: str
    extra: int = 0

    def config(self, leaf_port: int) -> str:
        # The raw-socket clients answer no PING: none comes while a slow run lasts.
        pings = 'ping_interval: "1h"\n'
        if self.brook_role == "hub":
            return pings + f'leafnodes {{ listen: "127.0.0.1:{leaf_port}" }}\n'
        url = f"nats-leaf://127.0.0.1:{leaf_port}"
        return pings + f'leafnodes {{ remotes: [ {{ url: "{url}" }} ] }}\n'

    def run(self, port: int, leaf_port: int, n: int, zero: Callable[[], None]) -> None:
        other = LeafWorkload("spoke" if self.brook_role == "hub" else "hub")
        with contextlib.ExitStack() as stack:
            nats = stack.enter_context(leafnode.server("nats", other.config(leaf_port)))
            spoke, hub = (port, nats) if self.brook_role == "spoke" else (nats, port)
            if self.extra:
                for side, name in ((port, b"brook"), (nats, b"nats")):
                    stack.enter_context(_subscribed(side, name, self.extra))
            sub = stack.enter_context(socket.create_connection(("127.0.0.1", hub)))
            pub = stack.enter_context(socket.create_connection(("127.0.0.1", spoke)))
            _across(pub, sub, n, zero)


LEAF_BATCH = 500


def _across(pub: socket.socket, sub: socket.socket, n: int, zero: Callable[[], None]) -> None:
    """`n` 16-byte messages published on `pub`'s server, received on `sub`'s: once a
    probe crossed (the leaf connection is up, the subscription's interest with it: it
    was shown first), counted from `zero()` on, `LEAF_BATCH` at a time."""
    sub.sendall(CONNECT + b"SUB bench.core 1\r\nSUB bench.probe 2\r\nPING\r\n")
    pub.sendall(CONNECT)
    sub.settimeout(1.0)
    seen = b""
    deadline = time.monotonic() + 1200  # thousands of LS+ each way under valgrind: minutes
    while b"MSG bench.probe" not in seen:
        if time.monotonic() > deadline:
            raise SystemExit("the leaf connection did not come up")
        pub.sendall(b"PUB bench.probe 0\r\n\r\n")
        with contextlib.suppress(TimeoutError):
            seen += sub.recv(65536)
    time.sleep(5.0)  # the probes still under way arrive
    with contextlib.suppress(TimeoutError):
        while sub.recv(65536):
            pass
    sub.settimeout(300)
    frame = b"PUB bench.core 16\r\n" + b"x" * 16 + b"\r\n"
    frame_len = len(b"MSG bench.core 1 16\r\n") + 16 + 2
    zero()
    sent = 0
    while sent < n:
        k = min(LEAF_BATCH, n - sent)
        pub.sendall(frame * k)
        sent += k
        expected = k * frame_len
        while expected > 0:
            chunk = sub.recv(expected)
            if not chunk:
                raise SystemExit(f"leaf: the subscriber was closed after {sent - k} messages")
            expected -= len(chunk)


@contextlib.contextmanager
def _subscribed(port: int, name: bytes, count: int) -> Iterator[None]:
    """`count` subscriptions (`<name>.<i>`, nothing published to them) held on the
    server at `port`, and their interest shown across the leaf, while the context lasts."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        subs = b"".join(b"SUB %b.%d %d\r\n" % (name, i, i) for i in range(count))
        s.sendall(CONNECT + subs + b"PING\r\n")
        seen = b""
        while seen.count(b"PONG") < 2:  # CONNECT's PING, then the SUBs'
            seen += s.recv(65536)
        yield


def _spark_write(port: int, n: int, zero: Callable[[], None], fast: bool) -> None:
    from bench import spark_publish  # pyarrow and the connector only for these workloads

    spark_publish.callgrind_workload(fast)(port, n, zero)


LEAF_WORKLOADS = {
    "leaf-out": LeafWorkload("spoke"),
    "leaf-in": LeafWorkload("hub"),
    "leaf-out-5k": LeafWorkload("spoke", 5_000),
    "leaf-in-5k": LeafWorkload("hub", 5_000),
}


WORKLOADS: dict[str, Callable[[int, int, Callable[[], None]], None]] = {
    "core": _core,
    "core-users": _core_as(connect_as("open")),
    "core-perms": _core_as(connect_as("limited")),
    "core-mapped": lambda port, n, zero: _core(port, n, zero, published=b"mapped.core"),
    "core-mixed": _core_mixed,
    "publish": _publish,
    "publish-dedup": functools.partial(_publish, msg_ids=True),
    "publish-consumers": functools.partial(_publish, idle=20),
    "publish-limits": _publish,
    "publish-one": _publish_one,
    "pull": _consume("pull"),
    "push": _consume("push"),
    "direct": _direct,
    "mirror": _copy("mirror"),
    "source": _copy("sources"),
    "spark-write": functools.partial(_spark_write, fast=False),
    "spark-write-fast": functools.partial(_spark_write, fast=True),
}


# The config file each workload's server runs with (none: flags only).
CONFIGS = {
    "core-users": permissions.CONFIG,
    "core-perms": permissions.CONFIG,
    "core-mapped": 'mappings { "mapped.*": "bench.{{wildcard(1)}}" }\n',
}


def _total(path: str) -> int:
    with open(path) as f:
        for line in f:
            if line.startswith(("totals:", "summary:")):
                return int(line.split()[1])
    raise SystemExit(f"no totals in {path}")


def measure(workload: str, n: int, keep: str | None = None) -> float:
    """Instructions per message of the server for `n` messages of `workload`; `keep`:
    where to copy callgrind's dump (for `callgrind_annotate`)."""
    port = free_port()
    leaf_port = free_port()
    leaf = LEAF_WORKLOADS.get(workload)
    with tempfile.TemporaryDirectory() as store, tempfile.TemporaryDirectory() as out:
        serve = [sys.executable, "-m", "brook", "serve", "--host", "127.0.0.1"]
        serve += ["--port", str(port), "--store-dir", store, "--jetstream"]
        if workload in CONFIGS or leaf is not None:
            config = Path(out) / "brook.conf"
            config.write_text(leaf.config(leaf_port) if leaf else CONFIGS[workload])
            serve += ["-c", str(config)]
        if workload == "publish-limits":
            config = Path(out) / "limits.conf"
            config.write_text("jetstream { max_file_store: 1T }\n")
            serve += ["-c", str(config)]
        proc = subprocess.Popen(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}/cg.out", *serve],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        SERVER_PIDS[port] = proc.pid
        try:
            wait_for_info(port, 400)  # started: its start-up is not counted
            time.sleep(1)
            zero = functools.partial(_control, proc.pid, "-z")
            if leaf is not None:
                leaf.run(port, leaf_port, n, zero)
            else:
                WORKLOADS[workload](port, n, zero)
            _control(proc.pid, "-d")
            time.sleep(1)
            dumps = sorted(glob.glob(f"{out}/cg.out.*"), key=lambda p: Path(p).stat().st_mtime)
            if keep:
                shutil.copyfile(dumps[-1], keep)
            return _total(dumps[-1]) / n
        finally:
            proc.terminate()
            try:
                proc.wait(120)
            except subprocess.TimeoutExpired:  # valgrind's exit on a loaded machine: counted
                proc.kill()
                proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=sorted([*WORKLOADS, *LEAF_WORKLOADS]))
    parser.add_argument("--messages", type=int, help="default: " + json.dumps(DEFAULT_MESSAGES))
    parser.add_argument("--keep", metavar="FILE", help="copy callgrind's dump to FILE")
    args = parser.parse_args()
    n = args.messages or DEFAULT_MESSAGES[args.workload]
    per_msg = measure(args.workload, n, args.keep)
    print(json.dumps({"workload": args.workload, "messages": n, "instructions_per_msg": per_msg}))


if __name__ == "__main__":
    main()
