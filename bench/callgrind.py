"""Instructions per message of Brook's server process, counted by callgrind.

Wall-clock benchmarks on a shared 2-core machine move by 10-20 % between runs; the number
of instructions the server executes per message moves by well under 1 %, so it is what a
change to the hot path is judged by (before and after, same machine, same workload).

    python -m bench.callgrind WORKLOAD [--messages N]

WORKLOAD is one of
* `core`: one publisher → one subscriber, 16-byte core NATS messages;
* `core-users`: the same, both clients logged in as a user without permissions;
* `core-perms`: the same, as a user whose publish and subscribe permissions each have an
  allow and a deny list (`bench.permissions`'s config), so every message is checked;
* `core-mapped`: `core`, the publisher publishing to `mapped.core`, which a subject
  mapping (`"mapped.*": "bench.{{wildcard(1)}}"`) sends to the subscriber's subject;
* `publish`: acknowledged JetStream publishes (16 bytes, 100 in flight) to a file stream
  with one idle consumer, so each is fsynced by the group commit before its PubAck;
* `publish-limits`: the same under a server store limit (`max_file_store`, far from
  reached), so every publish is admitted by it (jetstream/quota.py);
* `pull`: a pull consumer fetching and acking (explicit) 128-byte stored messages;
* `push`: a push consumer with explicit acks, likewise;
* `mirror`: a mirror created on a file stream holding N 128-byte messages, counted until
  it holds all N (the catch-up: the origin's push delivery and the mirror's link and store);
* `source`: the same with a stream sourcing that stream (its messages stored under new
  sequences with the `Nats-Stream-Source` header, as a publish is).

Brook runs under `valgrind --tool=callgrind` with its own store; the counters are zeroed
once the workload is set up (streams created, messages stored, clients connected) and dumped
when it ends, so only the workload is counted. Needs valgrind (Debian's `valgrind` package);
never part of the test run.
"""

from __future__ import annotations

import argparse
import glob
import json
import multiprocessing as mp
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from multiprocessing.queues import Queue
from pathlib import Path

from tests.support.natsserver import free_port, wait_for_info

from bench import consumers, jetstream, mirrors, permissions
from bench.core import CONNECT, SERVER_PIDS, connect_as, publisher, subscriber

DEFAULT_MESSAGES = {
    "core": 100_000,
    "core-users": 100_000,
    "core-perms": 100_000,
    "core-mapped": 100_000,
    "publish": 5_000,
    "publish-limits": 5_000,
    "pull": 10_000,
    "push": 10_000,
    "mirror": 20_000,
    "source": 5_000,  # 20,000 outlasted WAIT_S under valgrind on a loaded machine
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
    ready = mp.Barrier(3)
    out: Queue[tuple[int, float]] = mp.Queue()
    subject = b"bench.core"  # allowed by `bench.permissions`'s config
    sub = mp.Process(target=subscriber, args=(port, subject, n, 16, ready, out, connect))
    sub.start()
    time.sleep(2.0)  # under valgrind: the subscription is registered before the publisher starts
    pub = mp.Process(target=publisher, args=(port, published, n, 16, ready, connect))
    pub.start()
    time.sleep(2.0)  # both connected and waiting at the barrier
    zero()
    ready.wait()
    received, _ = out.get(timeout=3000)
    pub.join()
    sub.join()
    if received != n:
        raise SystemExit(f"core: {received} of {n} messages received")


def _publish(port: int, n: int, zero: Callable[[], None]) -> None:
    jetstream.create_stream(port, "file")
    control = consumers.Control(port)
    control.create_consumer("IDLE", {})
    control.close()
    zero()
    out: Queue[tuple[int, float]] = mp.Queue()
    pub = mp.Process(target=jetstream.publisher, args=(port, 0, n, 16, 100, out))
    pub.start()
    acked, _ = out.get(timeout=3000)
    pub.join()
    if acked != n:
        raise SystemExit(f"publish: {acked} of {n} publishes acknowledged")


def _consume(name: str) -> Callable[[int, int, Callable[[], None]], None]:
    def run(port: int, n: int, zero: Callable[[], None]) -> None:
        jetstream.run(port, n, 128, 2, 1000, "file")
        workload = next(w for w in consumers.WORKLOADS if w.name == CONSUMER_WORKLOADS[name])
        zero()
        outcome = consumers.run_workload(port, workload, n)
        if outcome.ack_floor != n:
            raise SystemExit(f"{name}: ack floor {outcome.ack_floor}, expected {n}")

    return run


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


WORKLOADS: dict[str, Callable[[int, int, Callable[[], None]], None]] = {
    "core": _core,
    "core-users": _core_as(connect_as("open")),
    "core-perms": _core_as(connect_as("limited")),
    "core-mapped": lambda port, n, zero: _core(port, n, zero, published=b"mapped.core"),
    "publish": _publish,
    "publish-limits": _publish,
    "pull": _consume("pull"),
    "push": _consume("push"),
    "mirror": _copy("mirror"),
    "source": _copy("sources"),
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


def measure(workload: str, n: int) -> float:
    """Instructions per message of the server for `n` messages of `workload`."""
    port = free_port()
    with tempfile.TemporaryDirectory() as store, tempfile.TemporaryDirectory() as out:
        serve = [sys.executable, "-m", "brook", "serve", "--host", "127.0.0.1"]
        serve += ["--port", str(port), "--store-dir", store, "--jetstream"]
        if workload in CONFIGS:
            config = Path(out) / "brook.conf"
            config.write_text(CONFIGS[workload])
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
            WORKLOADS[workload](port, n, lambda: _control(proc.pid, "-z"))
            _control(proc.pid, "-d")
            time.sleep(1)
            dumps = sorted(glob.glob(f"{out}/cg.out.*"), key=lambda p: Path(p).stat().st_mtime)
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
    parser.add_argument("workload", choices=sorted(WORKLOADS))
    parser.add_argument("--messages", type=int, help="default: " + json.dumps(DEFAULT_MESSAGES))
    args = parser.parse_args()
    n = args.messages or DEFAULT_MESSAGES[args.workload]
    per_msg = measure(args.workload, n)
    print(json.dumps({"workload": args.workload, "messages": n, "instructions_per_msg": per_msg}))


if __name__ == "__main__":
    main()
