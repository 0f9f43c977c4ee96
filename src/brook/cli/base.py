"""The layer every `brook` client command shares (`kv`, `object`, `stream`, `consumer`,
`pub`, `sub`, ...): connection options, connecting, one error path and exit statuses.
ADR 0043. Output (`--json`, tables, progress) is in `output.py`.

A command group is an argparse parser whose subcommands are async functions of a `Ctx`:

    parser, command = command_group("brook stream", "Streams on a NATS server.")
    p = command("info", "show a stream", stream_info)
    p.add_argument("stream")

    def stream_command(argv: list[str]) -> int:
        return run_group(parser, argv)

    async def stream_info(ctx: Ctx) -> int | None:
        info = await ctx.api(f"STREAM.INFO.{ctx.args.stream}")
        return ctx.out.document(info, show_stream)

`run_group` parses, connects once, runs the command and closes. The connection options
(`-s/--server`, `--user`, `--password`, `--token`, `--creds`, `--nkey`, `--tlscert`,
`--tlskey`, `--tlsca`, `--tlsfirst`, `--timeout`, `--connection-name`) and `-j/--json` are
the `nats` CLI's names with its environment variables (`NATS_URL`, `NATS_USER`,
`NATS_PASSWORD`, `NATS_TOKEN`, `NATS_CREDS`, `NATS_NKEY`, `NATS_CERT`, `NATS_KEY`,
`NATS_CA`, `NATS_TIMEOUT`); they go before or after the subcommand. There are no contexts.

Exit status: 0 done, 1 the server or the client refused (one line on stderr,
`<prog>: <reason>`; a JetStream API error reads `<description> (<err_code>)` as the `nats`
CLI prints it), 2 a bad command line (argparse's usage message), 130 interrupted.
A command may return another status (a check's verdict).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import ssl
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from brook.cli.output import Output
from brook.config.conf_syntax import parse_size
from brook.durations import parse_seconds

DEFAULT_URL = "nats://127.0.0.1:4222"
JS_API_PREFIX = "$JS.API"
# What nats.go (and so the `nats` CLI) says when no JetStream API answers a request.
JS_NOT_ENABLED = "jetstream not enabled"

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class CliError(Exception):
    """A failure to report on stderr (`<prog>: <message>`) with exit status 1."""


class ApiError(CliError):
    """A JetStream API error response: its `description (err_code)` is the message, as the
    `nats` CLI prints it; `code` (HTTP-like) and `err_code` are kept for callers that
    tell errors apart (10059 stream not found, 10014 consumer not found, ...)."""

    def __init__(self, error: dict[str, Any]) -> None:
        self.code = int(error.get("code") or 0)
        self.err_code = int(error.get("err_code") or 0)
        self.description = str(error.get("description") or "")
        super().__init__(api_error_text(self.description, self.code, self.err_code))


def api_error_text(description: str, code: int, err_code: int) -> str:
    """jsm.go's `ApiError.Error()`, which the `nats` CLI prints."""
    if not description:
        return f"unknown JetStream {code} Error ({err_code})" if code else "unknown JetStream Error"
    return f"{description} ({err_code})" if err_code else description


# ---------------------------------------------------------------------- arguments


def duration_arg(text: str) -> float:
    """Seconds from `30s`, `1h`, `1m30s` or a plain number of seconds."""
    try:
        return parse_seconds(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (try 30s, 5m, 1h)") from None


def size_arg(text: str) -> int:
    """Bytes from `1024`, `64KB`, `1MiB`, `1G`; `-1` is unlimited."""
    if text.strip() == "-1":
        return -1
    try:
        return parse_size(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (try 1024, 64KB, 1MB)") from None


# (flag, environment variable, help) of the string-valued connection options.
_STRING_OPTIONS = (
    ("--user", "NATS_USER", "user name (a token when given without --password)"),
    ("--password", "NATS_PASSWORD", "password"),
    ("--token", "NATS_TOKEN", "authentication token"),
    ("--creds", "NATS_CREDS", "user credentials file (JWT and seed)"),
    ("--nkey", "NATS_NKEY", "user nkey seed file"),
    ("--tlscert", "NATS_CERT", "TLS client certificate file"),
    ("--tlskey", "NATS_KEY", "TLS client private key file"),
    ("--tlsca", "NATS_CA", "TLS certificate authority file"),
)


def add_connection_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """The options every command takes. Defined on the group's parser and (with defaults
    suppressed) on each subcommand, so they may come before or after the subcommand."""

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    env = os.environ
    parser.add_argument(
        "-s",
        "--server",
        default=default(env.get("NATS_URL", DEFAULT_URL)),
        metavar="URL",
        help=f"NATS server URLs, comma separated (default: $NATS_URL or {DEFAULT_URL})",
    )
    for flag, var, help_ in _STRING_OPTIONS:
        parser.add_argument(
            flag, default=default(env.get(var)), metavar="FILE" if "file" in help_ else None,
            help=f"{help_} (${var})",
        )  # fmt: skip
    parser.add_argument(
        "--tlsfirst",
        "--tls-first",
        action="store_true",
        default=default(False),
        help="TLS handshake before the server's INFO (servers with handshake_first)",
    )
    parser.add_argument(
        "--timeout",
        type=duration_arg,
        metavar="DURATION",
        # A string default goes through `type` as a command-line value would, so a bad
        # $NATS_TIMEOUT is a usage error rather than a traceback.
        default=default(env.get("NATS_TIMEOUT", "5s")),
        help="time to wait for each server reply, e.g. 5s (default: $NATS_TIMEOUT or 5s)",
    )
    parser.add_argument(
        "--connection-name",
        default=default("brook-cli"),
        metavar="NAME",
        help="the connection's name in the server's monitoring (default: brook-cli)",
    )
    parser.add_argument(
        "-j",
        "--json",
        action="store_true",
        default=default(False),
        help="machine-readable output (JSON)",
    )


# ---------------------------------------------------------------------- connecting


def connect_options(args: argparse.Namespace) -> dict[str, Any]:
    """nats-py's `connect()` keywords for the connection options: one attempt, no
    reconnects, the `nats` CLI's meaning of each flag."""
    options: dict[str, Any] = {
        "servers": [s.strip() for s in args.server.split(",") if s.strip()],
        "allow_reconnect": False,
        "max_reconnect_attempts": 1,  # nats-py: 0 would mean "retry forever"
        "reconnect_time_wait": 0.05,
        "connect_timeout": args.timeout,
        "name": args.connection_name,
    }
    if args.user and not args.password:
        options["token"] = args.user  # as the `nats` CLI: a user without password is a token
    elif args.user:
        options["user"] = args.user
        options["password"] = args.password
    if args.token:
        options["token"] = args.token
    if args.creds:
        options["user_credentials"] = _readable(args.creds, "--creds")
    if args.nkey:
        options["nkeys_seed"] = _readable(args.nkey, "--nkey")
    if args.tlscert or args.tlskey or args.tlsca or args.tlsfirst:
        options["tls"] = _tls_context(args)
        options["tls_handshake_first"] = bool(args.tlsfirst)
    return options


def _readable(path: str, flag: str) -> str:
    if not os.path.isfile(path):
        raise CliError(f"{flag}: no such file {path!r}")
    return path


def _tls_context(args: argparse.Namespace) -> ssl.SSLContext:
    try:
        context = ssl.create_default_context(
            cafile=_readable(args.tlsca, "--tlsca") if args.tlsca else None
        )
        if args.tlscert or args.tlskey:
            if not (args.tlscert and args.tlskey):
                raise CliError("--tlscert and --tlskey go together")
            context.load_cert_chain(
                _readable(args.tlscert, "--tlscert"), _readable(args.tlskey, "--tlskey")
            )
    except ssl.SSLError as exc:
        raise CliError(f"TLS setup: {exc.reason or exc}") from None
    return context


async def connect(args: argparse.Namespace, **overrides: Any) -> Any:
    """A nats-py client connected with the connection options (`overrides` go to
    `nats.connect`, e.g. another `name` or callbacks); failing fast with the reason the
    server or nats-py gave, as a `CliError`."""
    import nats

    errors: list[Exception] = []

    async def on_error(err: Exception) -> None:
        errors.append(err)  # reported only if the connection attempt fails

    options = {**connect_options(args), "error_cb": on_error, **overrides}
    try:
        return await nats.connect(**options)
    except Exception as exc:
        reason = errors[0] if errors else exc
        raise CliError(f"cannot connect to {args.server}: {describe(reason)}") from None


def describe(exc: BaseException) -> str:
    """A one-line reason for an exception from nats-py: a JetStream API error as the
    `nats` CLI prints it, a server's `-ERR` with its text, else the exception's text."""
    if isinstance(exc, CliError):
        return str(exc)
    import nats.errors
    import nats.js.errors

    if isinstance(exc, nats.js.errors.ServiceUnavailableError | nats.errors.NoRespondersError):
        return JS_NOT_ENABLED  # no JetStream API answers (nats-py's 503)
    description = getattr(exc, "description", None)
    if description is not None:  # nats.js.errors.APIError
        code = int(getattr(exc, "code", 0) or 0)
        return api_error_text(str(description), code, int(getattr(exc, "err_code", 0) or 0))

    if isinstance(exc, nats.errors.TimeoutError | asyncio.TimeoutError | TimeoutError):
        return "timeout waiting for a reply"
    text = str(exc).strip()
    if text.startswith("nats: "):
        text = text[len("nats: ") :]
    return text.strip("'") or type(exc).__name__


# ---------------------------------------------------------------------- running


@dataclass
class Ctx:
    """What a command runs with: its arguments, the connection, the JetStream context
    (nats-py's, with the command's timeout), its output."""

    args: argparse.Namespace
    nc: Any
    js: Any
    out: Output

    async def api(self, subject: str, request: dict[str, Any] | None = None) -> dict[str, Any]:
        """One JetStream API request (`$JS.API.<subject>`), its JSON reply as the server
        sent it; an error reply raises `ApiError`. Commands use this where the server's
        own document is the output (info, ls, add), so no field is lost in translation."""
        payload = b"" if request is None else json.dumps(request).encode()
        return await request_json(self.nc, f"{JS_API_PREFIX}.{subject}", payload, self.timeout)

    @property
    def timeout(self) -> float:
        return float(self.args.timeout)


async def request_json(nc: Any, subject: str, payload: bytes, wait: float) -> dict[str, Any]:
    """A request whose reply is a JSON document; an `error` member raises `ApiError`."""
    import nats.errors

    try:
        msg = await nc.request(subject, payload, timeout=wait)
    except nats.errors.NoRespondersError:
        raise CliError(JS_NOT_ENABLED) from None
    except nats.errors.TimeoutError:
        raise CliError(f"timeout waiting for a reply to {subject}") from None
    try:
        reply = json.loads(msg.data)
    except ValueError:
        raise CliError(f"not a JSON reply to {subject}: {msg.data[:80]!r}") from None
    if not isinstance(reply, dict):
        raise CliError(f"unexpected reply to {subject}: {msg.data[:80]!r}")
    if isinstance(reply.get("error"), dict):
        raise ApiError(reply["error"])
    return reply


Command = Callable[[Ctx], Awaitable[int | None]]


def run_command(prog: str, args: argparse.Namespace, command: Command) -> int:
    """Connect, run one command, close; failures become one line on stderr and an exit
    status (module docstring). `args` needs the connection options and `json`."""
    out = Output(json_mode=bool(args.json))

    async def main() -> int:
        nc = await connect(args)
        try:
            js = nc.jetstream(timeout=args.timeout)
            return await command(Ctx(args, nc, js, out)) or EXIT_OK
        finally:
            with contextlib.suppress(Exception):
                await nc.close()

    try:
        return asyncio.run(main())
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:  # anything nats-py raises: report it, never a traceback
        out.error(f"{prog}: {describe(exc)}")
        return EXIT_FAILED


def command_group(
    prog: str, description: str
) -> tuple[argparse.ArgumentParser, Callable[..., argparse.ArgumentParser]]:
    """A group's parser (`brook stream`) and a factory of its subcommands:
    `command(name, help, func, aliases=())` returns the subcommand's parser, which
    takes the connection options too."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    add_connection_options(parser, suppress=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(
        name: str, help_: str, func: Command, aliases: tuple[str, ...] = ()
    ) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_, aliases=list(aliases))
        add_connection_options(p, suppress=True)
        p.set_defaults(func=func, command_name=name)
        return p

    return parser, command


def run_group(parser: argparse.ArgumentParser, argv: list[str]) -> int:
    """Parse `argv` with a `command_group` parser and run the chosen subcommand."""
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return int(exc.code or 0)
    return run_command(f"{parser.prog} {args.command_name}", args, args.func)


def read_input(value: str | None) -> bytes:
    """A command-line value, or standard input when it is omitted or `-`."""
    if value is None or value == "-":
        return sys.stdin.buffer.read()
    return value.encode()


def confirm_forced(args: argparse.Namespace, what: str) -> None:
    """Deletions are non-interactive: without `-f/--force` they are refused, so a script
    never deletes by accident and never hangs at a prompt."""
    if not getattr(args, "force", False):
        raise CliError(f"refusing to {what} without -f/--force")
