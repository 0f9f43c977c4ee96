"""What a Prometheus scrape of `/metrics` costs as streams and consumers grow (ADR 0040).

An in-process Brook gets `--streams` file streams, each with `--consumers` durable pull
consumers and `--msgs` messages (the first consumer of each fetches and acks one), created
over nats-py with a window of requests in flight. Then, with per-consumer series and
without, the scrape is timed three ways: `render()` alone (the time the event loop is
held: the collector runs synchronously on it), a GET over HTTP from another thread
(request to last byte), and `/jsz?consumers=true&config=true` for comparison (what
prometheus-nats-exporter asks a server for, once per scrape). Sizes are the bodies', and gzipped
(as Prometheus asks for them: `Accept-Encoding: gzip`).

    python -m bench.metrics [--streams N] [--consumers N] [--msgs N] [--runs N]

Never part of the test run; numbers go in ADR 0040 and docs/monitoring.md.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import statistics
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import nats

import brook
from brook.monitor.metrics import MetricsExporter

WINDOW = 64


async def _windowed(calls: list[Callable[[], Awaitable[Any]]]) -> None:
    for i in range(0, len(calls), WINDOW):
        await asyncio.gather(*(call() for call in calls[i : i + WINDOW]))


async def _populate(url: str, streams: int, consumers: int, msgs: int) -> None:
    nc = await nats.connect(url)
    js = nc.jetstream(timeout=30)
    await _windowed(
        [partial(js.add_stream, name=f"S{i}", subjects=[f"s.{i}.>"]) for i in range(streams)]
    )
    await _windowed(
        [
            partial(js.add_consumer, f"S{i}", durable_name=f"C{j}", ack_policy="explicit")
            for i in range(streams)
            for j in range(consumers)
        ]
    )
    await _windowed(
        [partial(js.publish, f"s.{i}.x", b"m") for i in range(streams) for _ in range(msgs)]
    )
    for i in range(streams):
        if consumers:
            sub = await js.pull_subscribe_bind("C0", f"S{i}")
            for m in await sub.fetch(1, timeout=5):
                await m.ack()
            await sub.unsubscribe()
    await nc.flush()
    await nc.close()


def _get(url: str) -> tuple[float, int]:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as resp:
        size = len(resp.read())
    return time.perf_counter() - start, size


async def _timed_get(url: str, runs: int) -> tuple[float, int]:
    results = [await asyncio.to_thread(_get, url) for _ in range(runs)]
    return statistics.median(r[0] for r in results), results[-1][1]


async def main(streams: int, consumers: int, msgs: int, runs: int) -> None:
    with tempfile.TemporaryDirectory() as store:
        async with brook.serve(port=0, http_port=-1, store_dir=store) as srv:
            t0 = time.perf_counter()
            await _populate(srv.url, streams, consumers, msgs)
            took = time.perf_counter() - t0
            print(f"{streams} streams x {consumers} consumers set up in {took:.1f} s")
            monitor = srv.monitor
            base = monitor.url
            print(f"{'what':<34} {'median ms':>10} {'bytes':>12} {'gzipped':>10} {'series':>8}")
            for per_consumer in (True, False):
                exporter = MetricsExporter(
                    monitor.feed, lambda: monitor.varz({}), per_consumer=per_consumer
                )
                times = []
                for _ in range(runs):
                    start = time.perf_counter()
                    body, _ = exporter.render()
                    times.append(time.perf_counter() - start)
                series = sum(1 for line in body.splitlines() if not line.startswith(b"#"))
                label = f"render(), per_consumer={per_consumer}"
                ms = statistics.median(times) * 1000
                packed = len(gzip.compress(body))
                print(f"{label:<34} {ms:>10.1f} {len(body):>12,} {packed:>10,} {series:>8,}")
            for path in ("/metrics", "/jsz?consumers=true&config=true"):
                wall, size = await _timed_get(base + path, runs)
                print(f"{'GET ' + path.split('?')[0]:<34} {wall * 1000:>10.1f} {size:>12,}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--consumers", type=int, default=2)
    parser.add_argument("--msgs", type=int, default=3)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.streams, args.consumers, args.msgs, args.runs))
