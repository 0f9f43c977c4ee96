"""A stream sourcing ten origins, Brook and nats-server (issue 16, ADR 0020): catch-up, the
rate at which a new sourcing stream copies what its origins hold, and steady state, the
lag while the origins take acknowledged publishes.

    python -m bench.sources [--origins N] [--messages N] [--size BYTES]

Catch-up: each of `--origins` origins holds `--messages` messages; the sourcing stream is
created and timed until it holds them all. Steady state: then as many more acknowledged
publishes spread over the origins (500 in flight), timed until the sourcing stream holds
them all too; the largest total `lag` its info showed meanwhile is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

import nats

from bench.core import brook_server, nats_server


async def _publish(js: Any, origins: int, messages: int, size: int, tag: str) -> None:
    payload = b"x" * size
    pending: list[Any] = []
    for i in range(messages * origins):
        pending.append(await js.publish_async(f"o{i % origins}.{tag}", payload))
        if len(pending) >= 500:
            await asyncio.gather(*pending)
            pending.clear()
    await asyncio.gather(*pending)


async def _until(js: Any, total: int, lags: list[int]) -> None:
    while True:
        info = await js.stream_info("S")
        lags.append(sum(source.lag or 0 for source in info.sources or []))
        if info.state.messages >= total:
            return
        await asyncio.sleep(0.02)


async def run(port: int, origins: int, messages: int, size: int) -> dict[str, float]:
    nc = await nats.connect(f"nats://127.0.0.1:{port}")
    js = nc.jetstream()
    for o in range(origins):
        await js.add_stream(name=f"O{o}", subjects=[f"o{o}.>"])
    await _publish(js, origins, messages, size, "before")
    total = origins * messages
    sources = [{"name": f"O{o}"} for o in range(origins)]
    start = time.perf_counter()
    await nc.request(
        "$JS.API.STREAM.CREATE.S",
        json.dumps({"name": "S", "sources": sources}).encode(),
        timeout=10,
    )
    await _until(js, total, [])
    catch_up_s = time.perf_counter() - start
    lags: list[int] = []
    start = time.perf_counter()
    watcher = asyncio.create_task(_until(js, 2 * total, lags))
    await _publish(js, origins, messages, size, "live")
    await watcher
    steady_s = time.perf_counter() - start
    await nc.close()
    return {
        "catch_up_msgs_s": total / catch_up_s,
        "steady_msgs_s": total / steady_s,
        "max_lag": float(max(lags, default=0)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--origins", type=int, default=10)
    parser.add_argument("--messages", type=int, default=5_000)
    parser.add_argument("--size", type=int, default=128)
    args = parser.parse_args()
    results = {}
    for name, server in (("nats-server", nats_server), ("brook", brook_server)):
        with server(jetstream=True) as port:
            results[name] = asyncio.run(run(port, args.origins, args.messages, args.size))
    for name, r in results.items():
        print(
            f"{name:12s} catch-up {r['catch_up_msgs_s']:,.0f} msgs/s, steady "
            f"{r['steady_msgs_s']:,.0f} msgs/s (max lag {r['max_lag']:,.0f})"
        )
    n, b = results["nats-server"], results["brook"]
    print(
        f"brook/nats-server: catch-up x{b['catch_up_msgs_s'] / n['catch_up_msgs_s']:.2f}, "
        f"steady x{b['steady_msgs_s'] / n['steady_msgs_s']:.2f}"
    )


if __name__ == "__main__":
    main()
