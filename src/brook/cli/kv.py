"""`brook kv`: Key-Value buckets on any NATS server (Brook or nats-server), over the wire.

The commands are thin wrappers over nats-py's Key-Value API, so they behave exactly as any
NATS client does against the server they talk to; nothing here knows it is Brook.

    brook kv add BUCKET [--history N] [--ttl 1h] [--max-value-size 1KB] ...
    brook kv put BUCKET KEY [VALUE]         (VALUE from stdin when omitted or "-")
    brook kv get BUCKET KEY [--revision N] [--raw]
    brook kv del BUCKET KEY
    brook kv purge BUCKET KEY
    brook kv history BUCKET KEY
    brook kv watch BUCKET [KEYS] [--history] [--ignore-deletes] [--count N]
    brook kv ls [BUCKET]                    (buckets, or the keys of one bucket)
    brook kv info BUCKET
    brook kv rm BUCKET

Every command takes the connection options of all client commands (`-s/--server`,
`--user`/`--password`, `--token`, `--creds`, `--nkey`, `--tls*`, `--timeout`; base.py,
ADR 0043) and `--json` (one JSON document, or one per line for `watch`). Exit status: 0
done, 1 the server or the client refused (message on stderr), 2 bad command line. The
bucket helpers shared with `brook object` are in `buckets.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from brook.cli.base import (
    CliError,
    Ctx,
    command_group,
    duration_arg,
    read_input,
    run_group,
    size_arg,
)
from brook.cli.buckets import bucket_streams, delete_bucket, open_bucket
from brook.cli.output import Output, human_duration, human_size, iso_time, printable

KV_PREFIX = "KV_"


# ---------------------------------------------------------------------- kv commands


def _value_json(value: bytes | None) -> dict[str, Any]:
    data = value or b""
    try:
        text: str | None = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return {"value": text, "value_b64": base64.b64encode(data).decode()}


def _entry_json(entry: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "bucket": entry.bucket,
        "key": entry.key,
        "revision": entry.revision,
        "operation": entry.operation or "PUT",
    }
    if entry.created is not None:
        out["created"] = iso_time(entry.created)
    if entry.delta is not None:
        out["delta"] = entry.delta
    out.update(_value_json(entry.value))
    return out


def _status_json(status: Any) -> dict[str, Any]:
    info = status.stream_info
    config = info.config
    return {
        "bucket": status.bucket,
        "stream": config.name,
        "description": config.description,
        "values": status.values,
        "history": status.history,
        "ttl": status.ttl or 0,
        "limit_marker_ttl": status.marker_ttl or 0,
        "max_value_size": config.max_msg_size,
        "max_bytes": config.max_bytes,
        "storage": _enum_value(config.storage),
        "replicas": config.num_replicas,
        "direct": bool(config.allow_direct),
        "bytes": info.state.bytes,
    }


def _enum_value(value: Any) -> Any:
    return getattr(value, "value", value)


def _print_status(out: Output, status: dict[str, Any]) -> None:
    fields: list[tuple[str, Any]] = []
    if status["description"]:
        fields.append(("Description", status["description"]))
    fields += [
        ("Values", status["values"]),
        ("History", status["history"]),
        ("TTL", human_duration(status["ttl"])),
    ]
    if status["limit_marker_ttl"]:
        fields.append(("Limit marker TTL", human_duration(status["limit_marker_ttl"])))
    fields += [
        ("Max value size", human_size(status["max_value_size"])),
        ("Max bucket size", human_size(status["max_bytes"])),
        ("Storage", status["storage"]),
        ("Direct get", "yes" if status["direct"] else "no"),
        ("Size", human_size(status["bytes"])),
        ("Stream", status["stream"]),
    ]
    out.fields(fields, title=f"Key-Value bucket {status['bucket']}")


async def _bucket(js: Any, name: str) -> Any:
    return await open_bucket(js.key_value, name)


async def kv_add(ctx: Ctx) -> int:
    args, js, out = ctx.args, ctx.js, ctx.out
    import nats.js.errors as jserr
    from nats.js import api

    params: dict[str, Any] = {"bucket": args.bucket, "history": args.history}
    for key, value in (
        ("ttl", args.ttl),
        ("max_value_size", args.max_value_size),
        ("max_bytes", args.max_bytes),
        ("storage", api.StorageType(args.storage) if args.storage else None),
        ("description", args.description),
        ("limit_marker_ttl", args.limit_marker_ttl),
    ):
        if value is not None:
            params[key] = value
    if args.replicas != 1:
        params["replicas"] = args.replicas
    if args.direct:
        params["direct"] = True
    try:
        kv = await js.create_key_value(**params)
    except jserr.InvalidBucketNameError:
        raise CliError(f"invalid bucket name {args.bucket!r}") from None
    except jserr.KeyHistoryTooLargeError:
        raise CliError("history can be at most 64") from None
    return out.document(_status_json(await kv.status()), _print_status)


async def kv_info(ctx: Ctx) -> int:
    args, js, out = ctx.args, ctx.js, ctx.out
    kv = await _bucket(js, args.bucket)
    return out.document(_status_json(await kv.status()), _print_status)


async def kv_put(ctx: Ctx) -> int:
    args, js, out = ctx.args, ctx.js, ctx.out
    import nats.js.errors as jserr

    kv = await _bucket(js, args.bucket)
    value = read_input(args.value)
    try:
        revision = await kv.put(args.key, value)
    except jserr.InvalidKeyError:
        raise CliError(f"invalid key {args.key!r}") from None
    if out.json_mode:
        out.json({"bucket": args.bucket, "key": args.key, "revision": revision})
    else:
        out.line(str(revision))
    return 0


async def kv_get(ctx: Ctx) -> int:
    args, js, out = ctx.args, ctx.js, ctx.out
    import nats.js.errors as jserr

    kv = await _bucket(js, args.bucket)
    try:
        entry = await kv.get(args.key, revision=args.revision)
    except jserr.InvalidKeyError:
        raise CliError(f"invalid key {args.key!r}") from None
    except jserr.KeyNotFoundError as err:
        where = f" at revision {args.revision}" if args.revision else ""
        if getattr(err, "op", None) in ("DEL", "PURGE") and err.entry is not None:
            what = "deleted" if err.op == "DEL" else "purged"
            raise CliError(
                f"key {args.key!r} was {what} (revision {err.entry.revision}){where}"
            ) from None
        raise CliError(f"key {args.key!r} not found in bucket {args.bucket!r}{where}") from None
    if out.json_mode:
        out.json(_entry_json(entry))
    elif args.raw:
        out.raw(entry.value or b"")
    else:
        out.line(f"{args.bucket} > {entry.key} revision {entry.revision}")
        out.line()
        out.line(printable(entry.value))
    return 0


async def kv_del(ctx: Ctx) -> int:
    args, js, out = ctx.args, ctx.js, ctx.out
    kv = await _bucket(js, args.bucket)
    await _check_key(kv.delete, args.key)
    if out.json_mode:
        out.json({"bucket": args.bucket, "key": args.key, "deleted": True})
    else:
        out.line(f"deleted {args.key!r} from bucket {args.bucket!r}")
    return 0


async def kv_purge(ctx: Ctx) -> int:
    args, js, out = ctx.args, ctx.js, ctx.out
    import nats.js.kv

    kv = await _bucket(js, args.bucket)
    if not nats.js.kv._is_key_valid(args.key):
        raise CliError(f"invalid key {args.key!r}")
    await kv.purge(args.key)
    if out.json_mode:
        out.json({"bucket": args.bucket, "key": args.key, "purged": True})
    else:
        out.line(f"purged {args.key!r} and its history from bucket {args.bucket!r}")
    return 0


async def _check_key(call: Callable[[str], Awaitable[Any]], key: str) -> Any:
    import nats.js.errors as jserr

    try:
        return await call(key)
    except jserr.InvalidKeyError:
        raise CliError(f"invalid key {key!r}") from None


async def kv_history(ctx: Ctx) -> int:
    args, js, out = ctx.args, ctx.js, ctx.out
    import nats.js.errors as jserr

    kv = await _bucket(js, args.bucket)
    try:
        entries = await kv.history(args.key)
    except jserr.NoKeysError:
        entries = []
    if out.json_mode:
        out.json([_entry_json(e) for e in entries])
        return 0
    if not entries:
        raise CliError(f"key {args.key!r} has no history in bucket {args.bucket!r}")
    rows = [
        (e.revision, e.operation or "PUT", iso_time(e.created), len(e.value or b""),
         printable(e.value, 40))
        for e in entries
    ]  # fmt: skip
    out.table(("REVISION", "OP", "CREATED", "LENGTH", "VALUE"), rows)
    return 0


async def kv_watch(ctx: Ctx) -> int:
    args, js, out = ctx.args, ctx.js, ctx.out
    import nats.errors

    kv = await _bucket(js, args.bucket)
    watcher = await kv.watch(
        args.keys, include_history=args.history, ignore_deletes=args.ignore_deletes
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in _signals():
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    seen = 0
    try:
        while not stop.is_set() and (args.count is None or seen < args.count):
            try:
                entry = await watcher.updates(timeout=0.25)
            except nats.errors.TimeoutError:
                continue
            if entry is None:  # the current values have all been shown
                if not out.json_mode:
                    out.error("# end of current values; watching for updates")
                continue
            if not hasattr(entry, "key"):
                break  # the watcher was stopped
            seen += 1
            if out.json_mode:
                out.json_line(_entry_json(entry))
                continue
            op = entry.operation or "PUT"
            line = f"[{iso_time(entry.created)}] {op} {args.bucket} > {entry.key}"
            if op == "PUT":
                line += f": {printable(entry.value, 200)}"
            out.line(line, flush=True)
    finally:
        with contextlib.suppress(Exception):
            await watcher.stop()
    return 0


def _signals() -> list[int]:
    import signal

    return [signal.SIGINT, signal.SIGTERM]


async def kv_ls(ctx: Ctx) -> int:
    args, js, out = ctx.args, ctx.js, ctx.out
    if args.bucket is None:
        return await _list_buckets(ctx)
    import nats.js.errors as jserr

    kv = await _bucket(js, args.bucket)
    try:
        keys = sorted(await kv.keys())
    except jserr.NoKeysError:
        keys = []
    if out.json_mode:
        out.json(keys)
    else:
        for key in keys:
            out.line(key)
    return 0


async def _list_buckets(ctx: Ctx) -> int:
    js, out = ctx.js, ctx.out
    statuses = [_status_json(_Status(si, b)) for b, si in await bucket_streams(js, KV_PREFIX)]
    return out.listing(
        statuses,
        "no Key-Value buckets",
        ("BUCKET", "VALUES", "HISTORY", "TTL", "SIZE", "DESCRIPTION"),
        lambda s: (s["bucket"], s["values"], s["history"], human_duration(s["ttl"]),
                   human_size(s["bytes"]), s["description"] or ""),
    )  # fmt: skip


class _Status:
    """The fields of nats-py's KeyValue.BucketStatus, from a stream info of a listing."""

    def __init__(self, stream_info: Any, bucket: str) -> None:
        self.stream_info = stream_info
        self.bucket = bucket
        self.values = stream_info.state.messages
        self.history = stream_info.config.max_msgs_per_subject
        self.ttl = stream_info.config.max_age
        self.marker_ttl = stream_info.config.subject_delete_marker_ttl


async def kv_rm(ctx: Ctx) -> int:
    js = ctx.js
    return await delete_bucket(ctx, js.delete_key_value)


# ---------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    parser, command = command_group(
        "brook kv", "Key-Value buckets on a NATS server (Brook or nats-server)."
    )

    p = command("add", "create a bucket (or confirm an identical one exists)", kv_add)
    p.add_argument("bucket")
    p.add_argument("--history", type=int, default=1, help="revisions kept per key (1-64)")
    p.add_argument("--ttl", type=duration_arg, help="how long values live (e.g. 1h)")
    p.add_argument("--max-value-size", type=size_arg, help="largest value accepted")
    p.add_argument("--max-bytes", type=size_arg, help="largest total bucket size")
    p.add_argument("--storage", choices=("file", "memory"), help="default: file")
    p.add_argument("--replicas", type=int, default=1)
    p.add_argument("--description")
    p.add_argument("--direct", action="store_true", help="serve reads with direct get")
    p.add_argument(
        "--limit-marker-ttl",
        type=duration_arg,
        help="leave a marker this long when a key's last value expires (NATS 2.11+)",
    )

    p = command("put", "set a key's value (read from stdin when VALUE is omitted)", kv_put)
    p.add_argument("bucket")
    p.add_argument("key")
    p.add_argument("value", nargs="?")

    p = command("get", "show a key's value", kv_get)
    p.add_argument("bucket")
    p.add_argument("key")
    p.add_argument("--revision", type=int, help="a specific revision")
    p.add_argument("--raw", action="store_true", help="print only the value's bytes")

    p = command("del", "delete a key (its history is kept)", kv_del)
    p.add_argument("bucket")
    p.add_argument("key")

    p = command("purge", "delete a key and all of its history", kv_purge)
    p.add_argument("bucket")
    p.add_argument("key")

    p = command("history", "show every kept revision of a key", kv_history)
    p.add_argument("bucket")
    p.add_argument("key")

    p = command("watch", "print changes as they happen (Ctrl-C to stop)", kv_watch)
    p.add_argument("bucket")
    p.add_argument("keys", nargs="?", default=">", help="key or wildcard (default: all)")
    p.add_argument("--history", action="store_true", help="start with every kept revision")
    p.add_argument("--ignore-deletes", action="store_true", help="skip deletes and purges")
    p.add_argument("--count", type=int, help="exit after this many changes")

    p = command("ls", "list buckets, or the keys of BUCKET", kv_ls)
    p.add_argument("bucket", nargs="?")

    p = command("info", "show a bucket's configuration and state", kv_info)
    p.add_argument("bucket")

    p = command("rm", "delete a bucket and everything in it", kv_rm)
    p.add_argument("bucket")
    return parser


def kv_command(argv: list[str]) -> int:
    return run_group(build_parser(), argv)
