"""Key-Value speed and memory: Brook and nats-server side by side, in one run.

For each server (its own process, JetStream on file storage, a bucket made by nats-py):

* put/s: pipelined raw-socket publishes to `$KV.bench.<key>`, PubAcks counted as they
  arrive (the window keeps the server busy; one request-reply per key would measure the
  client instead);
* get/s: pipelined `$JS.API.STREAM.MSG.GET.KV_bench {"last_by_subj": ...}` requests, the
  path nats-py's `kv.get` takes on a bucket without `allow_direct`;
* direct get/s: pipelined `$JS.API.DIRECT.GET.KV_bench.$KV.bench.<key>` requests (empty
  body), the path `kv.get` takes with `direct=True` (and nats.go always);
* the same three through nats-py, one call at a time, as an application sees them;
* memory: the server's resident set size (RSS) empty and with 1M distinct keys loaded.

Brook acknowledges puts after fsync (group commit); nats-server before its periodic
fsync, as in bench/jetstream.py.

    python -m bench.kv [--puts N] [--gets N] [--keys N] [--window W] [--memory-keys N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

import nats
from tests.kv.loadgen import key_name, pipelined, put_keys, rss_bytes, server_process

BUCKET = "bench"
MIB = 1024 * 1024


async def _create_bucket(port: int, direct: bool) -> None:
    nc = await nats.connect(f"nats://127.0.0.1:{port}")
    await nc.jetstream(timeout=30).create_key_value(bucket=BUCKET, direct=direct)
    await nc.close()


def _msg_get_frame(keys: int) -> Any:
    head = f"PUB $JS.API.STREAM.MSG.GET.KV_{BUCKET} ".encode()

    def frame(i: int, reply: bytes) -> bytes:
        body = json.dumps({"last_by_subj": f"$KV.{BUCKET}.{key_name(i % keys)}"}).encode()
        return head + reply + b" %d\r\n%b\r\n" % (len(body), body)

    return frame


def _direct_get_frame(keys: int) -> Any:
    head = f"PUB $JS.API.DIRECT.GET.KV_{BUCKET}.$KV.{BUCKET}.".encode()

    def frame(i: int, reply: bytes) -> bytes:
        return head + key_name(i % keys).encode() + b" " + reply + b" 0\r\n\r\n"

    return frame


async def _client_rates(port: int, n: int, keys: int) -> dict[str, float]:
    """nats-py, one call at a time: what an application's sequential loop sees."""
    nc = await nats.connect(f"nats://127.0.0.1:{port}")
    js = nc.jetstream(timeout=30)
    rates: dict[str, float] = {}
    kv = await js.key_value(BUCKET)
    start = time.perf_counter()
    for i in range(n):
        await kv.put(key_name(i % keys), b"v" * 16)
    rates["nats-py put"] = n / (time.perf_counter() - start)
    for label, direct in (("nats-py get", False), ("nats-py direct get", True)):
        kv._direct = direct  # the same bucket, read both ways
        start = time.perf_counter()
        for i in range(n):
            await kv.get(key_name(i % keys))
        rates[label] = n / (time.perf_counter() - start)
    await nc.close()
    return rates


def measure(kind: str, args: argparse.Namespace) -> dict[str, float]:
    results: dict[str, float] = {}
    with server_process(kind) as (port, _pid):
        asyncio.run(_create_bucket(port, direct=True))
        results["put"] = args.puts / put_keys(port, BUCKET, args.puts, window=args.window)
        keys = min(args.puts, args.keys)
        results["get"] = args.gets / pipelined(
            port, args.gets, _msg_get_frame(keys), b"stream_msg_get_response", window=args.window
        )
        results["direct get"] = args.gets / pipelined(
            port,
            args.gets,
            _direct_get_frame(keys),
            b"Nats-Sequence:",
            error_mark=b"NATS/1.0 4",  # a 404/408 status reply
            window=args.window,
        )
        results.update(asyncio.run(_client_rates(port, args.client_ops, keys)))
    if args.memory_keys:
        with server_process(kind) as (port, pid):
            asyncio.run(_create_bucket(port, direct=False))
            results["rss empty MiB"] = rss_bytes(pid)[0] / MIB
            seconds = put_keys(port, BUCKET, args.memory_keys, window=args.window)
            time.sleep(1.0)  # let a group commit and any background work settle
            results[f"rss {args.memory_keys:,} keys MiB"] = rss_bytes(pid)[0] / MIB
            results[f"put {args.memory_keys:,} keys s"] = seconds
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--puts", type=int, default=200_000, help="pipelined puts")
    parser.add_argument("--gets", type=int, default=100_000, help="pipelined gets (each kind)")
    parser.add_argument("--keys", type=int, default=10_000, help="distinct keys read back")
    parser.add_argument("--window", type=int, default=2048, help="requests in flight")
    parser.add_argument("--client-ops", type=int, default=3_000, help="nats-py calls (each)")
    parser.add_argument("--memory-keys", type=int, default=1_000_000, help="0 to skip")
    args = parser.parse_args()
    table: dict[str, dict[str, float]] = {}
    for kind in ("brook", "nats-server"):
        print(f"measuring {kind} ...", flush=True)
        table[kind] = measure(kind, args)
    print()
    print(f"{'':32}{'brook':>14}{'nats-server':>14}{'ratio':>8}")
    for metric in table["brook"]:
        b, n = table["brook"][metric], table["nats-server"][metric]
        unit = "" if metric.endswith(("MiB", " s")) else "/s"
        ratio = f"{b / n:.2f}" if n else "-"
        print(f"{metric + unit:32}{b:14,.1f}{n:14,.1f}{ratio:>8}")


if __name__ == "__main__":
    main()
