"""Stream backup and restore throughput, Brook and nats-server, over nats-py as the nats CLI
does it (tests/support/snapshots.py): snapshot with 128 KiB chunks acknowledged as they
come, restore in 64 KiB chunks each acknowledged before the next. Messages are half random
bytes, half repeated text, so compression has something to do on both servers.

    python -m bench.snapshots [--messages N] [--size BYTES]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from typing import Any

import nats
from tests.support.snapshots import backup, restore

from bench.core import brook_server, nats_server


async def run(port: int, messages: int, size: int) -> dict[str, float]:
    nc = await nats.connect(f"nats://127.0.0.1:{port}")
    js = nc.jetstream()
    await js.add_stream(name="B", subjects=["b.>"])
    half = size // 2
    pending: list[Any] = []
    for i in range(messages):
        pending.append(
            await js.publish_async(f"b.{i % 100}", os.urandom(half) + b"x" * (size - half))
        )
        if len(pending) >= 500:
            await asyncio.gather(*pending)
            pending.clear()
    await asyncio.gather(*pending)
    stored = (await js.stream_info("B")).state.bytes
    start = time.perf_counter()
    saved = await backup(nc, "B", timeout=60)
    snap_s = time.perf_counter() - start
    await js.delete_stream("B")
    start = time.perf_counter()
    final = await restore(nc, "B", saved.meta, saved.data)
    restore_s = time.perf_counter() - start
    assert final["state"]["messages"] == messages, final
    await nc.close()
    return {
        "stored_mb": stored / 1e6,
        "backup_mb": len(saved.data) / 1e6,
        "snapshot_mb_s": stored / snap_s / 1e6,
        "restore_mb_s": stored / restore_s / 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=2_000)
    args = parser.parse_args()
    results = {}
    for name, server in (("nats-server", nats_server), ("brook", brook_server)):
        with server(jetstream=True) as port:
            results[name] = asyncio.run(run(port, args.messages, args.size))
    for name, r in results.items():
        print(
            f"{name:12s} stored {r['stored_mb']:.1f} MB, backup {r['backup_mb']:.1f} MB, "
            f"snapshot {r['snapshot_mb_s']:.1f} MB/s, restore {r['restore_mb_s']:.1f} MB/s"
        )
    n, b = results["nats-server"], results["brook"]
    print(
        f"brook/nats-server: snapshot x{b['snapshot_mb_s'] / n['snapshot_mb_s']:.2f}, "
        f"restore x{b['restore_mb_s'] / n['restore_mb_s']:.2f}"
    )


if __name__ == "__main__":
    main()
