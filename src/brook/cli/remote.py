"""What `brook kv` and `brook object` share: connection options, connecting through nats-py,
running a command with its exit status, argument types and output helpers, and the bucket
plumbing both stores have (open, list, delete).

Exit status: 0 done, 1 the server or the client refused (`CliError`, message on stderr),
2 bad command line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from brook.config.conf_syntax import parse_size
from brook.durations import parse_seconds

DEFAULT_URL = "nats://127.0.0.1:4222"


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
        return parse_seconds(text)
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


def report(as_json: bool, document: dict[str, Any], show: Callable[[dict[str, Any]], None]) -> int:
    """A command's result: `document` as JSON (`--json`), else as `show` prints it for
    people; the command's exit status (0)."""
    if as_json:
        emit_json(document)
    else:
        show(document)
    return 0


def report_list(
    as_json: bool,
    items: list[dict[str, Any]],
    none: str,
    headers: Sequence[str],
    row: Callable[[dict[str, Any]], Sequence[Any]],
) -> int:
    """A command's list: `items` as JSON (`--json`), else `none` when there are none,
    else a table of `headers` with a `row` per item; the command's exit status (0)."""
    if as_json:
        emit_json(items)
    elif not items:
        print(none)
    else:
        print_table(headers, [row(item) for item in items])
    return 0


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


# ---------------------------------------------------------------------- buckets

Command = Callable[[argparse.Namespace, Any], Awaitable[int]]


def subcommands(
    parser: argparse.ArgumentParser,
) -> Callable[[str, str, Command], argparse.ArgumentParser]:
    """A factory of subcommand parsers that take the connection options too."""
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, help_: str, func: Command) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_)
        add_connection_options(p, suppress=True)
        p.set_defaults(func=func)
        return p

    return command


async def open_bucket(open_: Callable[[str], Awaitable[Any]], name: str) -> Any:
    """`js.key_value` or `js.object_store`, with nats-py's errors as CLI errors."""
    import nats.js.errors as jserr

    try:
        return await open_(name)
    except jserr.BucketNotFoundError:
        raise CliError(f"bucket {name!r} not found") from None
    except jserr.InvalidBucketNameError:
        raise CliError(f"invalid bucket name {name!r}") from None


async def delete_bucket(args: argparse.Namespace, delete: Callable[[str], Awaitable[Any]]) -> int:
    """`js.delete_key_value` or `js.delete_object_store`, reported."""
    import nats.js.errors as jserr

    try:
        await delete(args.bucket)
    except jserr.InvalidBucketNameError:
        raise CliError(f"invalid bucket name {args.bucket!r}") from None
    except jserr.NotFoundError:
        raise CliError(f"bucket {args.bucket!r} not found") from None
    if args.json:
        emit_json({"bucket": args.bucket, "deleted": True})
    else:
        print(f"deleted bucket {args.bucket!r}")
    return 0


async def bucket_streams(js: Any, prefix: str) -> list[tuple[str, Any]]:
    """(bucket name, stream info) of every stream named `<prefix><bucket>`, by name."""
    infos = sorted(await js.streams_info(), key=lambda s: s.config.name)
    return [
        (si.config.name[len(prefix) :], si) for si in infos if si.config.name.startswith(prefix)
    ]
