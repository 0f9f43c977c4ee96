"""Mirror catch-up: how fast a new mirror copies a stream already holding N messages,
Brook and nats-server side by side (ADR 0020).

Each server gets a file stream filled with N acknowledged publishes (bench.jetstream's
raw publishers), then a mirror of it is created and timed until its last sequence is the
origin's and its lag is 0 (stream info polled every 20 ms). Both mirrors copy through
their origin's direct push consumer with flow control; Brook's syncs what it stored
before each flow-control reply (group commit).

    python -m bench.mirror [--messages N] [--size BYTES]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import nats

from bench.core import brook_server, nats_server
from bench.jetstream import run as fill


async def catch_up(port: int, n: int) -> float:
    """Seconds from the mirror's creation until it holds the origin's `n` messages."""
    nc = await nats.connect(f"nats://127.0.0.1:{port}")
    try:
        body = json.dumps({"name": "MIR", "mirror": {"name": "BENCH"}}).encode()
        start = time.perf_counter()
        reply = json.loads((await nc.request("$JS.API.STREAM.CREATE.MIR", body, 10)).data)
        if "error" in reply:
            raise SystemExit(f"mirror create failed: {reply['error']}")
        while True:
            info = json.loads((await nc.request("$JS.API.STREAM.INFO.MIR", b"", 10)).data)
            if info["state"]["last_seq"] >= n and info["mirror"]["lag"] == 0:
                return time.perf_counter() - start
            await asyncio.sleep(0.02)
    finally:
        await nc.close()


def measure(port: int, n: int, size: int) -> float:
    fill(port, n, size, 2, 1000, "file")
    return n / asyncio.run(catch_up(port, n))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=128)
    args = parser.parse_args()
    print(f"mirror catch-up of {args.messages} stored messages of {args.size} bytes\n")
    with nats_server(jetstream=True) as port:
        ref = measure(port, args.messages, args.size)
    with brook_server(jetstream=True) as port:
        ours = measure(port, args.messages, args.size)
    print(f"{'nats-server':>14} {'brook':>14} {'ratio':>7}")
    print(f"{ref:>10,.0f}/s {ours:>10,.0f}/s {ours / ref:>6.2f}x")


if __name__ == "__main__":
    main()
