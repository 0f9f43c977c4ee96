"""`brook bench`: the `nats bench` benchmarks over the wire with nats-py, with its names
and flags, against Brook or any NATS server.

    brook bench pub SUBJECT            core publish            [--msgs --size --clients --sleep -H]
    brook bench sub SUBJECT            core subscribe (waits for a publisher's messages)
    brook bench service request SUBJ   request-reply, one request at a time per client
    brook bench service serve SUBJ     answer requests (queue group), until --msgs were served
    brook bench js pub sync SUBJECT    JetStream publish, waiting for each ack
    brook bench js pub async SUBJECT   JetStream publish, --batch at a time before the acks
    brook bench js ordered             an ordered ephemeral consumer reads the stream
    brook bench js consume / js fetch  a durable pull consumer, fetching --batch at a time
    brook bench kv put / kv get        Key-Value puts and gets on `benchbucket`

Each client is its own connection; all run concurrently in this process's event loop
(the `nats` CLI runs a goroutine per client), so one Python process's speed bounds the
numbers more than a server may. A progress bar counts messages on a terminal's stderr;
the result is a table of each client's msgs/s, MiB/s and (where an operation has one)
latency percentiles in microseconds, with `--json` one document (benchstats.py). The
JetStream benchmarks use the stream `benchstream` (`--create` makes it with `--storage`,
`--replicas`, `--maxbytes`; `--purge` empties it) and the durable `nats-bench`, as the
`nats` CLI's do. Not here: `js pub atomic|fast`, `js get`, `--throughput`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from brook.cli.base import (
    ApiError,
    CliError,
    Command,
    Ctx,
    add_connection_options,
    connect,
    duration_arg,
    run_command,
    size_arg,
)
from brook.cli.benchstats import Report, Sample, csv_text, split
from brook.cli.msgtemplate import parse_headers
from brook.cli.output import human_size
from brook.cli.pubsub import log, wait_while_connected

DEFAULT_STREAM = "benchstream"
DEFAULT_CONSUMER = "nats-bench"
DEFAULT_BUCKET = "benchbucket"
SERVICE_QUEUE = "nats-bench-service"
# Messages between two updates of the progress bar: redrawing per message would cost
# more than the publish it counts.
TICK = 1000
# err_code of "stream name already in use with a different configuration".
STREAM_NAME_IN_USE = 10058

Tick = Callable[[int], None]
# Benchmarks where each client reads all --msgs (the others share them out).
EVERY_CLIENT_READS_ALL = ("sub", "js ordered")

LABELS = {
    "pub": "Core NATS publisher",
    "sub": "Core NATS subscriber",
    "service request": "Core NATS service requester",
    "service serve": "Core NATS service server",
    "js pub sync": "JetStream synchronous publisher",
    "js pub async": "JetStream asynchronous publisher",
    "js ordered": "JetStream ordered ephemeral consumer",
    "js consume": "JetStream durable consumer (fetch)",
    "js fetch": "JetStream durable consumer (fetch)",
    "kv put": "JetStream KV putter",
    "kv get": "JetStream KV getter",
}


# ---------------------------------------------------------------------- running


async def run_bench(ctx: Ctx) -> int:
    args, out = ctx.args, ctx.out
    kind: str = args.kind
    if args.msgs < 1 or args.clients < 1:
        raise CliError("--msgs and --clients must be at least 1")
    try:
        args.headers = parse_headers(args.header) or None
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if kind not in EVERY_CLIENT_READS_ALL:
        args.clients = min(args.clients, args.msgs)  # as `nats bench`: no idle clients
    if kind.startswith("js"):
        await _prepare_stream(ctx)
    if kind == "kv put":
        await _prepare_bucket(ctx)
    options = _options(args)
    args.run_id = f"{time.time_ns():x}"
    log(out, f"Starting {LABELS[kind]} benchmark [{_banner(options)}]")
    clients = [
        await connect(args, name=f"{args.connection_name}-bench-{i}")
        for i in range(1, args.clients + 1)
    ]
    try:
        every = kind in EVERY_CLIENT_READS_ALL
        shares = [args.msgs] * args.clients if every else split(args.msgs, args.clients)
        total = sum(shares)
        runner = RUNNERS[kind]
        with _progress(ctx, total) as tick:
            samples = await _gather(
                [
                    runner(ctx, nc, share, tick, sum(shares[:i]) if not every else 0)
                    for i, (nc, share) in enumerate(zip(clients, shares, strict=True))
                ]
            )
    finally:
        for nc in clients:
            with contextlib.suppress(Exception):
                await nc.close()
    report = Report(kind, LABELS[kind], options, samples)
    if args.csv:
        try:
            await asyncio.to_thread(Path(args.csv).write_text, csv_text(report, args.run_id))
        except OSError as exc:
            raise CliError(f"writing file {args.csv}: {exc.strerror}") from None
    if out.json_mode:
        out.json(report.document())
        return 0
    doc = report.document()
    out.line()
    if args.csv:
        out.error(f"Saved metric data in csv file {args.csv}")
    title = (
        f"{LABELS[kind]} stats: {doc['msgs_per_sec']:,.0f} msgs/sec ~ "
        f"{human_size(int(doc['bytes_per_sec']))}/sec"
    )
    out.line(title)
    for heading, headers, rows in report.tables():
        out.line()
        out.table(headers, rows, title=heading)
    return 0


async def _gather(jobs: list[Awaitable[Sample]]) -> list[Sample]:
    """Every client's sample; the first failure cancels the others and is reported."""
    tasks = [asyncio.ensure_future(job) for job in jobs]
    try:
        return list(await asyncio.gather(*tasks))
    except Exception:
        for task in tasks:
            task.cancel()
        raise


@contextlib.contextmanager
def _progress(ctx: Ctx, total: int) -> Any:
    if not ctx.args.progress:
        yield lambda _n: None
        return
    with ctx.out.progress(LABELS[ctx.args.kind], total, counting=True) as advance:
        yield advance


def _options(args: argparse.Namespace) -> dict[str, Any]:
    options: dict[str, Any] = {
        "clients": args.clients,
        "msgs": args.msgs,
        "msg-size": args.size,
    }
    if getattr(args, "subject", None):
        options["subject"] = _subscribe_subject(args)
    names = ("sleep", "stream", "bucket", "batch", "purge", "consumer", "acks", "storage")
    for name in (*names, "replicas", "history", "randomize"):
        value = getattr(args, name, None)
        if value not in (None, "", False):
            options[name] = value
    return options


def _banner(options: dict[str, Any]) -> str:
    def show(name: str, value: Any) -> str:
        if name == "msg-size":
            return human_size(value)
        return (
            f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)
        )

    return ", ".join(f"{k}={show(k, v)}" for k, v in sorted(options.items()))


def _subscribe_subject(args: argparse.Namespace) -> str:
    return f"{args.subject}.*" if getattr(args, "multisubject", False) else str(args.subject)


def _publish_subject(args: argparse.Namespace, n: int) -> str:
    return f"{args.subject}.{n}" if getattr(args, "multisubject", False) else str(args.subject)


class _Ticker:
    """Counts a client's messages and moves the shared progress bar every TICK of them."""

    def __init__(self, tick: Tick) -> None:
        self.tick = tick
        self.pending = 0

    def __call__(self, n: int = 1) -> None:
        self.pending += n
        if self.pending >= TICK:
            self.tick(self.pending)
            self.pending = 0

    def flush(self) -> None:
        if self.pending:
            self.tick(self.pending)
            self.pending = 0


async def _timed(
    ctx: Ctx,
    count: int,
    tick: Tick,
    offset: int,
    one: Callable[[int], Awaitable[int]],
    *,
    size: int,
    finish: Callable[[], Awaitable[Any]] | None = None,
) -> Sample:
    """`count` operations one after another, `one(n)` for message number `n` (returning
    the size of the payload it moved), each timed for the latency percentiles and all of
    them (with `finish`, a flush) for the rate; `--sleep` between them."""
    sleep = ctx.args.sleep
    clock = time.perf_counter_ns
    latencies = [0] * count
    ticker = _Ticker(tick)
    start = time.perf_counter()
    for i in range(count):
        began = clock()
        size = await one(offset + i)
        latencies[i] = clock() - began
        ticker()
        if sleep:
            await asyncio.sleep(sleep)
    if finish is not None:
        await finish()
    end = time.perf_counter()
    ticker.flush()
    return Sample(count, size, start, end, latencies)


# ---------------------------------------------------------------------- core


async def core_pub(ctx: Ctx, nc: Any, count: int, tick: Tick, offset: int) -> Sample:
    args = ctx.args
    payload = bytes(args.size)
    single = not args.multisubject
    subject = str(args.subject)

    async def one(n: int) -> int:
        await nc.publish(
            subject if single else _publish_subject(args, n), payload, headers=args.headers
        )
        return len(payload)

    return await _timed(
        ctx, count, tick, offset, one, size=args.size, finish=lambda: nc.flush(timeout=ctx.timeout)
    )


async def core_sub(ctx: Ctx, nc: Any, count: int, tick: Tick, offset: int) -> Sample:
    """Subscribes, then waits for `count` messages; the clock starts at the first."""
    ticker = _Ticker(tick)
    done = asyncio.Event()
    state = {"received": 0, "start": 0.0, "end": 0.0, "size": 0}

    async def on_message(msg: Any) -> None:
        if state["received"] == 0:
            state["start"] = time.perf_counter()
            state["size"] = len(msg.data)
        state["received"] += 1
        ticker()
        if state["received"] == count:
            state["end"] = time.perf_counter()
            done.set()

    sub = await nc.subscribe(_subscribe_subject(ctx.args), cb=on_message)
    await nc.flush(timeout=ctx.timeout)
    await wait_while_connected(nc, done)
    await sub.unsubscribe()
    ticker.flush()
    return Sample(count, int(state["size"]), state["start"], state["end"])


async def service_request(ctx: Ctx, nc: Any, count: int, tick: Tick, offset: int) -> Sample:
    import nats.errors

    args = ctx.args
    payload = bytes(args.size)

    async def one(n: int) -> int:
        try:
            reply = await nc.request(
                args.subject, payload, timeout=ctx.timeout, headers=args.headers
            )
        except nats.errors.NoRespondersError:
            raise CliError(
                f"no responders on {args.subject!r} (start `brook bench service serve`)"
            ) from None
        if not reply.data or reply.data[:1] == b"-" or b"error" in reply.data:
            raise CliError(f"request did not receive a good reply: {reply.data[:80]!r}")
        return len(payload)

    return await _timed(ctx, count, tick, offset, one, size=args.size)


async def service_serve(ctx: Ctx, nc: Any, count: int, tick: Tick, offset: int) -> Sample:
    """Answers requests in the service's queue group until `count` were served."""
    args = ctx.args
    ticker = _Ticker(tick)
    done = asyncio.Event()
    state = {"served": 0, "start": 0.0, "end": 0.0, "size": 0}

    async def on_request(msg: Any) -> None:
        if done.is_set():
            return
        if state["served"] == 0:
            state["start"] = time.perf_counter()
            state["size"] = len(msg.data)
        if args.sleep:
            await asyncio.sleep(args.sleep)
        await nc.publish(msg.reply, msg.data or b"ok")
        state["served"] += 1
        ticker()
        if state["served"] == count:
            state["end"] = time.perf_counter()
            done.set()

    sub = await nc.subscribe(args.subject, queue=SERVICE_QUEUE, cb=on_request)
    await nc.flush(timeout=ctx.timeout)
    await wait_while_connected(nc, done)
    await nc.flush(timeout=ctx.timeout)
    await sub.unsubscribe()
    ticker.flush()
    return Sample(count, int(state["size"]), state["start"], state["end"])


# ---------------------------------------------------------------------- JetStream


async def _prepare_stream(ctx: Ctx) -> None:
    """`--create` (create or update `--stream`), `--purge`, and a consumer benchmark's
    durable (`--consumer`), through the JetStream API as the `nats` CLI does."""
    args = ctx.args
    stream = args.stream
    if getattr(args, "create", False):
        config = {
            "name": stream,
            "subjects": [_subscribe_subject(args)],
            "storage": args.storage,
            "num_replicas": args.replicas,
            "max_bytes": args.maxbytes,
            "duplicate_window": int(args.dedupwindow * 1e9),
        }
        try:
            await ctx.api(f"STREAM.CREATE.{stream}", config)
        except ApiError as exc:
            if exc.err_code != STREAM_NAME_IN_USE:
                raise
            await ctx.api(f"STREAM.UPDATE.{stream}", config)
    if getattr(args, "purge", False):
        await ctx.api(f"STREAM.PURGE.{stream}")
    if args.kind in ("js consume", "js fetch"):
        config = {
            "durable_name": args.consumer,
            "deliver_policy": "all",
            "ack_policy": args.acks,
            "replay_policy": "instant",
            "max_ack_pending": args.batch * args.clients,
            "inactive_threshold": 10_000_000_000,
        }
        if args.filter:
            config["filter_subjects"] = args.filter
        await ctx.api(
            f"CONSUMER.CREATE.{stream}.{args.consumer}", {"stream_name": stream, "config": config}
        )


async def js_pub_sync(ctx: Ctx, nc: Any, count: int, tick: Tick, offset: int) -> Sample:
    args = ctx.args
    js = nc.jetstream(timeout=ctx.timeout)
    payload = bytes(args.size)

    async def one(n: int) -> int:
        await js.publish(_publish_subject(args, n), payload, headers=_dedup(args, n))
        return len(payload)

    return await _timed(ctx, count, tick, offset, one, size=args.size)


async def js_pub_async(ctx: Ctx, nc: Any, count: int, tick: Tick, offset: int) -> Sample:
    """`--batch` publishes, then their acks; a batch's latency is from its first publish
    to its last ack."""
    args = ctx.args
    js = nc.jetstream(timeout=ctx.timeout, publish_async_max_pending=max(args.batch, 1) * 2)
    payload = bytes(args.size)
    clock = time.perf_counter_ns
    latencies: list[int] = []
    ticker = _Ticker(tick)
    start = time.perf_counter()
    sent = 0
    while sent < count:
        n = min(args.batch, count - sent)
        began = clock()
        futures = [
            await js.publish_async(
                _publish_subject(args, offset + sent + j),
                payload,
                headers=_dedup(args, offset + sent + j),
            )
            for j in range(n)
        ]
        try:
            await asyncio.wait_for(asyncio.gather(*futures), ctx.timeout)
        except TimeoutError:
            raise CliError(
                f"JS PubAsync ack timeout (pending={js.publish_async_pending()})"
            ) from None
        latencies.append(clock() - began)
        sent += n
        ticker(n)
        if args.sleep:
            await asyncio.sleep(args.sleep)
    end = time.perf_counter()
    ticker.flush()
    return Sample(count, args.size, start, end, latencies)


def _dedup(args: argparse.Namespace, n: int) -> dict[str, str] | None:
    """`--dedup`: a Nats-Msg-Id unique to this run and message."""
    if not args.dedup:
        return args.headers  # type: ignore[no-any-return]
    return {**(args.headers or {}), "Nats-Msg-Id": f"{args.run_id}-{n}"}


async def js_ordered(ctx: Ctx, nc: Any, count: int, tick: Tick, offset: int) -> Sample:
    """An ordered push consumer over the whole stream; every client reads `count`."""
    args = ctx.args
    js = nc.jetstream(timeout=ctx.timeout)
    ticker = _Ticker(tick)
    done = asyncio.Event()
    state = {"received": 0, "size": 0}
    start = time.perf_counter()

    async def on_message(msg: Any) -> None:
        state["received"] += 1
        state["size"] = len(msg.data)
        ticker()
        if state["received"] == count:
            done.set()

    filter_subject = args.filter[0] if args.filter else ""
    sub = await js.subscribe(
        filter_subject, stream=args.stream, cb=on_message, ordered_consumer=True
    )
    await wait_while_connected(nc, done)
    end = time.perf_counter()
    await sub.unsubscribe()
    ticker.flush()
    return Sample(count, state["size"], start, end)


async def js_fetch(ctx: Ctx, nc: Any, count: int, tick: Tick, offset: int) -> Sample:
    """Fetches `count` messages from the durable, `--batch` at a time, acknowledging as
    `--acks` says (`--doubleack`: waiting for the server's confirmation of each)."""
    import nats.errors

    args = ctx.args
    js = nc.jetstream(timeout=ctx.timeout)
    psub = await js.pull_subscribe_bind(durable=args.consumer, stream=args.stream)
    ticker = _Ticker(tick)
    received = 0
    size = 0
    start = time.perf_counter()
    while received < count:
        try:
            msgs = await psub.fetch(min(args.batch, count - received), timeout=ctx.timeout)
        except nats.errors.TimeoutError:
            raise CliError(
                f"only {received:,} of {count:,} messages arrived within {ctx.timeout:g}s "
                f"(does stream {args.stream!r} hold enough?)"
            ) from None
        for msg in msgs:
            if args.acks == "explicit":
                await (msg.ack_sync(timeout=ctx.timeout) if args.doubleack else msg.ack())
            size = len(msg.data)
        if args.acks == "all" and msgs:
            await msgs[-1].ack()
        received += len(msgs)
        ticker(len(msgs))
    end = time.perf_counter()
    with contextlib.suppress(Exception):
        await psub.unsubscribe()
    ticker.flush()
    return Sample(count, size, start, end)


# ---------------------------------------------------------------------- Key-Value


async def _prepare_bucket(ctx: Ctx) -> None:
    """`--purge` deletes the bucket; the default bucket is (re)created, as `nats bench kv`
    does (another bucket must exist)."""
    import nats.js.errors as jserr
    from nats.js.api import KeyValueConfig, StorageType

    args = ctx.args
    if args.purge:
        with contextlib.suppress(jserr.NotFoundError):
            await ctx.js.delete_key_value(args.bucket)
    if args.bucket == DEFAULT_BUCKET:
        storage = StorageType.MEMORY if args.storage == "memory" else StorageType.FILE
        await ctx.js.create_key_value(
            KeyValueConfig(
                bucket=args.bucket, history=args.history, storage=storage,
                replicas=args.replicas, max_bytes=args.maxbytes,
                description="nats bench bucket",
            )
        )  # fmt: skip


def _key(args: argparse.Namespace, n: int) -> str:
    return str(random.randrange(args.randomize) if args.randomize else n)


async def kv_put(ctx: Ctx, nc: Any, count: int, tick: Tick, offset: int) -> Sample:
    args = ctx.args
    kv = await nc.jetstream(timeout=ctx.timeout).key_value(args.bucket)
    payload = bytes(args.size)

    async def one(n: int) -> int:
        await kv.put(_key(args, n), payload)
        return len(payload)

    return await _timed(ctx, count, tick, offset, one, size=args.size)


async def kv_get(ctx: Ctx, nc: Any, count: int, tick: Tick, offset: int) -> Sample:
    import nats.js.errors as jserr

    args = ctx.args
    kv = await nc.jetstream(timeout=ctx.timeout).key_value(args.bucket)

    async def one(n: int) -> int:
        key = _key(args, n)
        try:
            entry = await kv.get(key)
        except jserr.KeyNotFoundError:
            raise CliError(
                f"key {key!r} not found in bucket {args.bucket!r} (run kv put first)"
            ) from None
        return len(entry.value or b"")

    return await _timed(ctx, count, tick, offset, one, size=0)


RUNNERS: dict[str, Callable[[Ctx, Any, int, Tick, int], Awaitable[Sample]]] = {
    "pub": core_pub,
    "sub": core_sub,
    "service request": service_request,
    "service serve": service_serve,
    "js pub sync": js_pub_sync,
    "js pub async": js_pub_async,
    "js ordered": js_ordered,
    "js consume": js_fetch,
    "js fetch": js_fetch,
    "kv put": kv_put,
    "kv get": kv_get,
}


# ---------------------------------------------------------------------- command line


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="brook bench", description="Benchmark a NATS server.")
    add_connection_options(parser, suppress=False)
    groups = parser.add_subparsers(dest="bench", metavar="BENCHMARK", required=True)

    def leaf(sub: Any, name: str, kind: str, *, subject: bool = True) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(
            name, help=LABELS[kind], description=LABELS[kind]
        )
        add_connection_options(p, suppress=True)
        p.set_defaults(kind=kind, func=run_bench)
        if subject:
            p.add_argument("subject", help="subject to use for the benchmark")
        p.add_argument("--clients", type=int, default=1, help="concurrent clients (default: 1)")
        p.add_argument("--msgs", type=int, default=100_000, help="messages (default: 100000)")
        p.add_argument("--size", type=size_arg, default=128, help="message size (default: 128B)")
        p.add_argument(
            "--progress", action=argparse.BooleanOptionalAction, default=True,
            help="show a progress bar on a terminal (default: on)",
        )  # fmt: skip
        p.add_argument("--sleep", type=duration_arg, default=0.0, help="pause between messages")
        p.add_argument("--csv", default="", metavar="FILE", help="save each client's numbers")
        p.add_argument(
            "-H", "--header", action="append", default=[], metavar="K:V", help="add a header"
        )
        return p

    def publisher(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--multisubject", action="store_true",
            help="publish each message on SUBJECT.<n> (subscribers use SUBJECT.*)",
        )  # fmt: skip

    def jetstream(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--stream", default=DEFAULT_STREAM, help=f"stream (default: {DEFAULT_STREAM})"
        )
        p.add_argument("--purge", action="store_true", help="purge the stream first")

    def js_publisher(p: argparse.ArgumentParser) -> None:
        publisher(p)
        jetstream(p)
        p.add_argument("--create", action="store_true", help="create or update the stream first")
        p.add_argument(
            "--storage", choices=("file", "memory"), default="file", help="with --create"
        )
        p.add_argument("--replicas", type=int, default=1, help="with --create (default: 1)")
        p.add_argument(
            "--maxbytes", type=size_arg, default=1 << 30, help="with --create (default: 1GB)"
        )
        p.add_argument("--dedup", action="store_true", help="set a Nats-Msg-Id on each message")
        p.add_argument(
            "--dedupwindow", type=duration_arg, default=120.0, help="with --create (default: 2m)"
        )

    def js_consumer(p: argparse.ArgumentParser, *, durable: bool) -> None:
        jetstream(p)
        p.add_argument("--batch", type=int, default=500, help="messages per fetch (default: 500)")
        p.add_argument(
            "--filter", action="append", default=[], metavar="SUBJECT", help="filter subjects"
        )
        if durable:
            p.add_argument(
                "--consumer",
                default=DEFAULT_CONSUMER,
                help=f"durable (default: {DEFAULT_CONSUMER})",
            )
            p.add_argument("--acks", choices=("explicit", "none", "all"), default="explicit")
            p.add_argument(
                "--doubleack", action="store_true", help="wait for each ack's confirmation"
            )

    publisher(leaf(groups, "pub", "pub"))
    core_sub_parser = leaf(groups, "sub", "sub")
    core_sub_parser.add_argument(
        "--multisubject", action="store_true", help="subscribe to SUBJECT.*"
    )

    service = groups.add_parser("service", help="request-reply benchmarks")
    service_sub = service.add_subparsers(dest="service", metavar="MODE", required=True)
    leaf(service_sub, "request", "service request")
    leaf(service_sub, "serve", "service serve")

    js = groups.add_parser("js", help="JetStream benchmarks")
    js_sub = js.add_subparsers(dest="js", metavar="BENCHMARK", required=True)
    js_pub = js_sub.add_parser("pub", help="JetStream publishers")
    js_pub_sub = js_pub.add_subparsers(dest="mode", metavar="MODE", required=True)
    js_publisher(leaf(js_pub_sub, "sync", "js pub sync"))
    async_parser = leaf(js_pub_sub, "async", "js pub async")
    js_publisher(async_parser)
    async_parser.add_argument(
        "--batch", type=int, default=500, help="publishes per batch (default: 500)"
    )
    js_consumer(leaf(js_sub, "ordered", "js ordered", subject=False), durable=False)
    js_consumer(leaf(js_sub, "consume", "js consume", subject=False), durable=True)
    js_consumer(leaf(js_sub, "fetch", "js fetch", subject=False), durable=True)
    kv = groups.add_parser("kv", help="Key-Value benchmarks")
    kv_sub = kv.add_subparsers(dest="kv", metavar="BENCHMARK", required=True)
    for name in ("put", "get"):
        p = leaf(kv_sub, name, f"kv {name}", subject=False)
        p.add_argument(
            "--bucket", default=DEFAULT_BUCKET, help=f"bucket (default: {DEFAULT_BUCKET})"
        )
        p.add_argument(
            "--randomize", type=int, default=0, metavar="N",
            help="random keys below N (default: 0, sequential keys)",
        )  # fmt: skip
    put = kv_sub.choices["put"]
    put.add_argument("--storage", choices=("file", "memory"), default="file")
    put.add_argument("--replicas", type=int, default=1)
    put.add_argument("--maxbytes", type=size_arg, default=1 << 30, help="(default: 1GB)")
    put.add_argument("--history", type=int, default=1, help="values kept per key (default: 1)")
    put.add_argument("--purge", action="store_true", help="delete the bucket first")
    return parser


def bench_command(argv: list[str]) -> int:
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return int(exc.code or 0)
    func: Command = args.func
    return run_command(f"brook bench {args.kind}", args, func)


__all__ = ["bench_command"]
