"""A flood of failed logins must not slow down the clients already logged in.

Brook runs as its own process; the flood comes from another process (so it does not share
the test's event loop with the client whose round-trip time is measured): several sockets
logging in over and over with a wrong bcrypt password or a wrong nkey signature. bcrypt is
slow on purpose, so Brook checks it off the event loop; were it checked on the loop, every
failed login would stall every client for the length of one check, which is what the
round-trip times before and during the flood would show.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
import socket
import statistics
import time
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

import bcrypt
import nats
import pytest

from tests.support.brookproc import start_brook
from tests.support.natsserver import free_port
from tests.support.nkeyusers import new_user

pytestmark = pytest.mark.timeout(90)

BCRYPT_ROUNDS = 10  # nats-server's `nats server passwd` uses 11; 10 keeps the test short
WORKERS = 4


def _flood(port: int, nkey: str, stop: Event, out: Any) -> None:
    """Log in with bad credentials until `stop`; put "ready" on `out` after the first
    refusal, and at the end (refusals, anything else)."""
    refused = other = 0
    bad = [
        {"user": "alice", "pass": "wrong"},
        {"nkey": nkey, "sig": "A" * 86},  # a well-formed signature of nothing
    ]
    n = 0
    while not stop.is_set():
        options = {"verbose": False, "pedantic": False, **bad[n % len(bad)]}
        n += 1
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            reader = sock.makefile("rb")
            reader.readline()  # INFO
            sock.sendall(b"CONNECT " + json.dumps(options).encode() + b"\r\nPING\r\n")
            line = reader.readline()
            if line == b"-ERR 'Authorization Violation'\r\n":
                refused += 1
            else:
                other += 1
        if n == 1:
            out.put("ready")
    out.put((refused, other))


async def _rtts(nc: Any, count: int) -> list[float]:
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        await nc.flush(timeout=10)
        samples.append(time.perf_counter() - started)
        await asyncio.sleep(0.01)
    return samples


async def test_failed_logins_leave_other_clients_round_trip_alone(tmp_path: Path) -> None:
    user = new_user()
    hashed = bcrypt.hashpw(b"pw", bcrypt.gensalt(rounds=BCRYPT_ROUNDS)).decode()
    started = time.perf_counter()
    bcrypt.checkpw(b"wrong", hashed.encode())
    one_check_s = time.perf_counter() - started
    config = tmp_path / "auth.conf"
    users = f'{{user: alice, password: "{hashed}"}}, {{nkey: {user.public}}}'
    config.write_text(f"authorization {{ users: [{users}] }}")
    port = free_port()
    proc = start_brook(tmp_path / "store", port, args=["-c", str(config)])
    ctx = mp.get_context("spawn")
    stop, out = ctx.Event(), ctx.Queue()
    flooders = [
        ctx.Process(target=_flood, args=(port, user.public, stop, out)) for _ in range(WORKERS)
    ]
    try:
        nc = await nats.connect(f"nats://127.0.0.1:{port}", nkeys_seed_str=user.seed.decode())
        before = await _rtts(nc, 50)
        for p in flooders:
            p.start()
        loop = asyncio.get_running_loop()
        for _ in flooders:  # every worker is logging in
            assert await loop.run_in_executor(None, out.get, True, 60) == "ready"
        during = await _rtts(nc, 50)
        stop.set()
        results = [out.get(timeout=30) for _ in flooders]
        await nc.close()
    finally:
        stop.set()
        for p in flooders:
            p.join(10)
        proc.terminate()
        proc.wait(10)
    refused = sum(r for r, _ in results)
    assert sum(o for _, o in results) == 0, results
    assert refused >= 2 * WORKERS, results
    median_before, median_during = statistics.median(before), statistics.median(during)
    # On the event loop, each failed bcrypt login would hold every client up for a check.
    assert median_during < median_before + one_check_s / 2, (
        f"round trip {median_before * 1e3:.2f} ms before, {median_during * 1e3:.2f} ms "
        f"during {refused} failed logins (one bcrypt check: {one_check_s * 1e3:.1f} ms)"
    )
