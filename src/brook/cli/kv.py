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

Every command takes `-s/--server URL` (default `$NATS_URL`, else nats://127.0.0.1:4222),
`--user`/`--password`, `--token`, `--timeout` and `--json` (machine-readable output: one
JSON document, or one per line for `watch`). Exit status: 0 done, 1 the server or the
client refused (message on stderr), 2 bad command line. The connection and output helpers
here are shared with `brook object` (`objects.py`).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import datetime
import json
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from brook.config.conf_syntax import parse_duration, parse_size

DEFAULT_URL = "nats://127.0.0.1:4222"
KV_PREFIX = "KV_"


class CliError(Exception):
    """A failure to report on stderr with exit status 1."""


# ---------------------------------------------------------------------- shared plumbing


def add_connection_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """The options every command takes. Defined on the command parser and (with defaults
    suppressed) on each subcommand, so they may come before or after the subcommand."""

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    parser.add_argument(
        "-s",
        "--server",
        default=default(os.environ.get("NATS_URL", DEFAULT_URL)),
        help=f"NATS server URL (default: $NATS_URL or {DEFAULT_URL})",
    )
    parser.add_argument("--user", default=default(None), help="user name")
    parser.add_argument("--password", default=default(None), help="password")
    parser.add_argument("--token", default=default(None), help="authentication token")
    parser.add_argument(
        "--timeout",
        type=float,
        default=default(5.0),
        help="seconds to wait for each server reply (default: 5)",
    )
    parser.add_argument(
        "--json", action="store_true", default=default(False), help="machine-readable output"
    )


def duration_arg(text: str) -> float:
    """Seconds from `30s`, `1h`, `1m30s` or a plain number of seconds."""
    try:
        return parse_duration(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (try 30s, 5m, 1h)") from None


def size_arg(text: str) -> int:
    """Bytes from `1024`, `64KB`, `1MiB`, `1G`."""
    try:
        return parse_size(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (try 1024, 64KB, 1MB)") from None


async def connect(args: argparse.Namespace) -> Any:
    """One connection attempt (no reconnects), failing fast with the reason nats-py saw."""
    import nats

    errors: list[Exception] = []

    async def on_error(err: Exception) -> None:
        errors.append(err)  # reported only if the connection attempt fails

    options: dict[str, Any] = {
        "servers": [args.server],
        "allow_reconnect": False,
        "max_reconnect_attempts": 1,  # nats-py: 0 would mean "retry forever"
        "reconnect_time_wait": 0.05,
        "connect_timeout": args.timeout,
        "error_cb": on_error,
        "name": "brook-cli",
    }
    if args.user is not None:
        options["user"] = args.user
        options["password"] = args.password or ""
    if args.token is not None:
        options["token"] = args.token
    try:
        return await nats.connect(**options)
    except Exception as exc:
        reason = errors[0] if errors else exc
        raise CliError(f"cannot connect to {args.server}: {_describe(reason)}") from None


def _describe(exc: BaseException) -> str:
    """A one-line reason for an exception from nats-py."""
    description = getattr(exc, "description", None)
    if description:
        code = getattr(exc, "err_code", None)
        return f"{description} (error {code})" if code else str(description)
    text = str(exc).strip()
    if text.startswith("nats: "):
        text = text[len("nats: ") :]
    return text or type(exc).__name__


def run_command(
    prog: str,
    args: argparse.Namespace,
    command: Callable[[argparse.Namespace, Any], Awaitable[int | None]],
) -> int:
    """Connect, run one command, close; map failures to a message and exit status 1."""

    async def main() -> int:
        nc = await connect(args)
        try:
            js = nc.jetstream(timeout=args.timeout)
            return await command(args, js) or 0
        finally:
            with contextlib.suppress(Exception):
                await nc.close()

    try:
        return asyncio.run(main())
    except CliError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # anything nats-py raises: report it, never a traceback
        print(f"{prog}: {_describe(exc)}", file=sys.stderr)
        return 1


def emit_json(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str))


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    cells = [[str(c) for c in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def print_fields(fields: Sequence[tuple[str, Any]]) -> None:
    width = max(len(name) for name, _ in fields)
    for name, value in fields:
        print(f"{name.rjust(width)}: {value}")


def human_size(n: int | None) -> str:
    if n is None or n < 0:
        return "unlimited"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover - the loop always returns


def human_duration(seconds: float | None) -> str:
    if not seconds:
        return "forever"
    total = int(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "")
    text += f"{secs}s" if secs else ""
    return text or f"{seconds}s"


def iso_time(value: Any) -> str | None:
    if isinstance(value, datetime.datetime):
        return value.astimezone(datetime.UTC).isoformat().replace("+00:00", "Z")
    return None if value is None else str(value)


def read_input(value: str | None) -> bytes:
    """A command-line value, or standard input when it is omitted or `-`."""
    if value is None or value == "-":
        return sys.stdin.buffer.read()
    return value.encode()


# ---------------------------------------------------------------------- kv commands


def _value_json(value: bytes | None) -> dict[str, Any]:
    data = value or b""
    try:
        text: str | None = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return {"value": text, "value_b64": base64.b64encode(data).decode()}


def _printable(value: bytes | None, limit: int | None = None) -> str:
    data = value or b""
    text = data.decode("utf-8", "backslashreplace")
    if limit is not None and len(text) > limit:
        return text[: limit - 3] + "..."
    return text


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


def _print_status(status: dict[str, Any]) -> None:
    print(f"Key-Value bucket {status['bucket']}")
    print()
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
    print_fields(fields)


async def _bucket(js: Any, name: str) -> Any:
    import nats.js.errors as jserr

    try:
        return await js.key_value(name)
    except jserr.BucketNotFoundError:
        raise CliError(f"bucket {name!r} not found") from None
    except jserr.InvalidBucketNameError:
        raise CliError(f"invalid bucket name {name!r}") from None


async def kv_add(args: argparse.Namespace, js: Any) -> int:
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
    status = _status_json(await kv.status())
    if args.json:
        emit_json(status)
    else:
        _print_status(status)
    return 0


async def kv_info(args: argparse.Namespace, js: Any) -> int:
    kv = await _bucket(js, args.bucket)
    status = _status_json(await kv.status())
    if args.json:
        emit_json(status)
    else:
        _print_status(status)
    return 0


async def kv_put(args: argparse.Namespace, js: Any) -> int:
    import nats.js.errors as jserr

    kv = await _bucket(js, args.bucket)
    value = read_input(args.value)
    try:
        revision = await kv.put(args.key, value)
    except jserr.InvalidKeyError:
        raise CliError(f"invalid key {args.key!r}") from None
    if args.json:
        emit_json({"bucket": args.bucket, "key": args.key, "revision": revision})
    else:
        print(revision)
    return 0


async def kv_get(args: argparse.Namespace, js: Any) -> int:
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
    if args.json:
        emit_json(_entry_json(entry))
    elif args.raw:
        sys.stdout.buffer.write(entry.value or b"")
        sys.stdout.flush()
    else:
        print(f"{args.bucket} > {entry.key} revision {entry.revision}")
        print()
        print(_printable(entry.value))
    return 0


async def kv_del(args: argparse.Namespace, js: Any) -> int:
    kv = await _bucket(js, args.bucket)
    await _check_key(kv.delete, args.key)
    if args.json:
        emit_json({"bucket": args.bucket, "key": args.key, "deleted": True})
    else:
        print(f"deleted {args.key!r} from bucket {args.bucket!r}")
    return 0


async def kv_purge(args: argparse.Namespace, js: Any) -> int:
    import nats.js.kv

    kv = await _bucket(js, args.bucket)
    if not nats.js.kv._is_key_valid(args.key):
        raise CliError(f"invalid key {args.key!r}")
    await kv.purge(args.key)
    if args.json:
        emit_json({"bucket": args.bucket, "key": args.key, "purged": True})
    else:
        print(f"purged {args.key!r} and its history from bucket {args.bucket!r}")
    return 0


async def _check_key(call: Callable[[str], Awaitable[Any]], key: str) -> Any:
    import nats.js.errors as jserr

    try:
        return await call(key)
    except jserr.InvalidKeyError:
        raise CliError(f"invalid key {key!r}") from None


async def kv_history(args: argparse.Namespace, js: Any) -> int:
    import nats.js.errors as jserr

    kv = await _bucket(js, args.bucket)
    try:
        entries = await kv.history(args.key)
    except jserr.NoKeysError:
        entries = []
    if args.json:
        emit_json([_entry_json(e) for e in entries])
        return 0
    if not entries:
        raise CliError(f"key {args.key!r} has no history in bucket {args.bucket!r}")
    rows = [
        (e.revision, e.operation or "PUT", iso_time(e.created), len(e.value or b""),
         _printable(e.value, 40))
        for e in entries
    ]  # fmt: skip
    print_table(("REVISION", "OP", "CREATED", "LENGTH", "VALUE"), rows)
    return 0


async def kv_watch(args: argparse.Namespace, js: Any) -> int:
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
                if not args.json:
                    print("# end of current values; watching for updates", file=sys.stderr)
                continue
            if not hasattr(entry, "key"):
                break  # the watcher was stopped
            seen += 1
            if args.json:
                print(json.dumps(_entry_json(entry)), flush=True)
                continue
            op = entry.operation or "PUT"
            line = f"[{iso_time(entry.created)}] {op} {args.bucket} > {entry.key}"
            if op == "PUT":
                line += f": {_printable(entry.value, 200)}"
            print(line, flush=True)
    finally:
        with contextlib.suppress(Exception):
            await watcher.stop()
    return 0


def _signals() -> list[int]:
    import signal

    return [signal.SIGINT, signal.SIGTERM]


async def kv_ls(args: argparse.Namespace, js: Any) -> int:
    if args.bucket is None:
        return await _list_buckets(args, js)
    import nats.js.errors as jserr

    kv = await _bucket(js, args.bucket)
    try:
        keys = sorted(await kv.keys())
    except jserr.NoKeysError:
        keys = []
    if args.json:
        emit_json(keys)
    else:
        for key in keys:
            print(key)
    return 0


async def _list_buckets(args: argparse.Namespace, js: Any) -> int:
    infos = [
        si for si in await js.streams_info() if si.config.name.startswith(KV_PREFIX)
    ]  # fmt: skip
    statuses = [
        _status_json(_Status(si, si.config.name[len(KV_PREFIX) :]))
        for si in sorted(infos, key=lambda s: s.config.name)
    ]
    if args.json:
        emit_json(statuses)
        return 0
    if not statuses:
        print("no Key-Value buckets")
        return 0
    rows = [
        (s["bucket"], s["values"], s["history"], human_duration(s["ttl"]),
         human_size(s["bytes"]), s["description"] or "")
        for s in statuses
    ]  # fmt: skip
    print_table(("BUCKET", "VALUES", "HISTORY", "TTL", "SIZE", "DESCRIPTION"), rows)
    return 0


class _Status:
    """The fields of nats-py's KeyValue.BucketStatus, from a stream info of a listing."""

    def __init__(self, stream_info: Any, bucket: str) -> None:
        self.stream_info = stream_info
        self.bucket = bucket
        self.values = stream_info.state.messages
        self.history = stream_info.config.max_msgs_per_subject
        self.ttl = stream_info.config.max_age
        self.marker_ttl = stream_info.config.subject_delete_marker_ttl


async def kv_rm(args: argparse.Namespace, js: Any) -> int:
    import nats.js.errors as jserr

    try:
        await js.delete_key_value(args.bucket)
    except jserr.InvalidBucketNameError:
        raise CliError(f"invalid bucket name {args.bucket!r}") from None
    except jserr.NotFoundError:
        raise CliError(f"bucket {args.bucket!r} not found") from None
    if args.json:
        emit_json({"bucket": args.bucket, "deleted": True})
    else:
        print(f"deleted bucket {args.bucket!r}")
    return 0


# ---------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="brook kv",
        description="Key-Value buckets on a NATS server (Brook or nats-server).",
    )
    add_connection_options(parser, suppress=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, help_: str, func: Any) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_)
        add_connection_options(p, suppress=True)
        p.set_defaults(func=func)
        return p

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
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return int(exc.code or 0)
    return run_command(f"brook kv {args.command}", args, args.func)
