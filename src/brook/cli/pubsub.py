"""`brook pub`, `brook sub`, `brook req` and `brook reply`: core NATS messaging from a
shell, over the wire with nats-py, with the `nats` CLI's names, flags and output.

    brook pub SUBJECT [BODY] [--count N] [--sleep 1s] [-H K:V]... [--reply SUBJ] [-J]
    brook sub [SUBJECT]... [--queue Q] [--count N] [--raw] [--headers-only] [--wait 5s]
              [--stream S] [--all|--new|--last|--since 1h|--last-per-subject]
              [--start-sequence N] [-T]
    brook req SUBJECT [BODY] [-H K:V]... [--count N] [--replies N] [--raw]
    brook reply SUBJECT [BODY] [--echo] [--command CMD] [--queue Q] [--count N] [-H K:V]...

A missing BODY is read from standard input (`--send-on newline`: one message per line).
Bodies and header values take the `nats` CLI's template functions (`{{Count}}`, `{{ID}}`,
`{{Random 10 100}}`, ... see msgtemplate.py). As the `nats` CLI, progress and status lines
go to stderr with the time of day, received messages to stdout; `--json` prints one JSON
document per received message (`sub`, `req`) or a summary (`pub`). Connection options and
exit statuses are the shared layer's (base.py, ADR 0043); where the `nats` CLI exits 0
after a request found no responders or timed out, `brook req` exits 1 so scripts can tell.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import os
import random
import shlex
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from brook.cli.base import (
    ApiError,
    CliError,
    Command,
    Ctx,
    add_connection_options,
    duration_arg,
    run_command,
)
from brook.cli.msgtemplate import TemplateError, expand, expand_or_keep, parse_headers
from brook.cli.output import Output, printable

# The `nats` CLI's default queue group for `reply`, so replies from both tools share load.
DEFAULT_REPLY_QUEUE = "NATS-RPLY-22"
# `pub`/`req` draw a progress bar instead of a line per message above this many messages.
PROGRESS_ABOVE = 20
# How often a waiting command looks whether its connection was closed.
CLOSED_POLL_S = 0.25


# ---------------------------------------------------------------------- plumbing


def single_command(prog: str, description: str, func: Command) -> argparse.ArgumentParser:
    """A parser for a command without subcommands, taking the connection options."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    add_connection_options(parser, suppress=False)
    parser.set_defaults(func=func)
    return parser


def run_single(parser: argparse.ArgumentParser, argv: list[str]) -> int:
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return int(exc.code or 0)
    return run_command(parser.prog, args, args.func)


async def wait_while_connected(nc: Any, event: asyncio.Event, at_most: float | None = None) -> None:
    """Wait for `event` (at most `at_most` seconds); a connection the server closed
    meanwhile (no reconnects: base.connect) ends the command with a CliError instead of
    waiting forever."""
    deadline = None if at_most is None else time.monotonic() + at_most
    while not event.is_set():
        if nc.is_closed:
            raise CliError("the server closed the connection")
        step = (
            CLOSED_POLL_S if deadline is None else min(CLOSED_POLL_S, deadline - time.monotonic())
        )
        if step <= 0:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), step)


def log(out: Output, text: str) -> None:
    """A status line on stderr, as the `nats` CLI logs them: time of day first."""
    out.error(f"{time.strftime('%H:%M:%S')} {text}")


def go_quote(text: str) -> str:
    """Go's `%q` of a subject (no escapes are needed in valid subjects)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def print_headers(out: Output, headers: dict[str, str] | None) -> None:
    if headers:
        for key, value in headers.items():
            out.line(f"{key}: {value}")
        out.line()


def print_body(out: Output, data: bytes, *, compact: bool = False) -> None:
    """natscli's outPutMSGBody: the body (`nil body` when empty) and, unless `compact`
    (`--raw`), a blank line after it."""
    text = "nil body" if not data else printable(data)
    out.line(text[:-1] if text.endswith("\n") else text)
    if not compact:
        out.line()


def message_json(msg: Any, **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"subject": msg.subject}
    if msg.reply:
        doc["reply"] = msg.reply
    if msg.headers:
        doc["headers"] = dict(msg.headers)
    doc["data"] = printable(msg.data)
    doc.update(extra)
    return doc


def add_body_options(p: argparse.ArgumentParser, *, count_help: str) -> None:
    p.add_argument("subject", help="subject")
    p.add_argument("body", nargs="?", help="message body (default: standard input)")
    p.add_argument(
        "-H", "--header", action="append", default=[], metavar="K:V", help="add a header"
    )
    p.add_argument("--count", type=int, default=1, help=count_help)
    p.add_argument("--sleep", type=duration_arg, default=0.0, help="pause between messages")
    p.add_argument(
        "--templates",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="expand template functions in the body and subject (default: on)",
    )
    p.add_argument(
        "--force-stdin", action="store_true", help="read the body from stdin (the default)"
    )
    p.add_argument(
        "--send-on",
        choices=("eof", "newline"),
        default="eof",
        help="with the body on stdin: one message at end of input, or one per line",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="show only the output received")


async def bodies(args: argparse.Namespace, out: Output) -> Any:
    """The bodies to send: the argument, else stdin whole (`eof`) or line by line."""
    if args.body is not None:
        yield args.body
        return
    if not args.quiet:
        log(out, "Reading payload from STDIN")
    stdin = sys.stdin.buffer
    if args.send_on == "eof":
        yield (await asyncio.to_thread(stdin.read)).decode("utf-8", "surrogateescape")
        return
    while True:
        line = await asyncio.to_thread(stdin.readline)
        if not line:
            return
        yield line.rstrip(b"\r\n").decode("utf-8", "surrogateescape")


def numbered(
    args: argparse.Namespace, out: Output, body: str
) -> Iterator[tuple[int, str, bytes, dict[str, str] | None]]:
    """(number, subject, payload, headers) of each of `--count` messages of `body`."""
    warn = out.error
    for n in range(1, max(args.count, 1) + 1):
        if args.templates:
            subject = expand_or_keep(args.subject, n, warn, "subject")
            text = expand_or_keep(body, n, warn, "body")
        else:
            subject, text = args.subject, body
        try:
            headers = parse_headers(args.header, n) or None
        except ValueError as exc:
            raise CliError(str(exc)) from None
        yield n, subject, text.encode("utf-8", "surrogateescape"), headers


@contextlib.contextmanager
def counted(out: Output, args: argparse.Namespace, what: str) -> Iterator[Callable[[int], None]]:
    """A progress bar over `--count` messages when there are many, else a no-op."""
    if args.count > PROGRESS_ABOVE and not args.quiet:
        with out.progress(what, args.count, counting=True) as advance:
            yield advance
    else:
        yield lambda _n: None


# ---------------------------------------------------------------------- pub


async def publish(ctx: Ctx) -> int:
    args, out, nc = ctx.args, ctx.out, ctx.nc
    many = args.count > PROGRESS_ABOVE
    published = 0
    total_bytes = 0
    acks: list[dict[str, Any]] = []
    with counted(out, args, "Publishing") as advance:
        async for body in bodies(args, out):
            for n, subject, payload, headers in numbered(args, out, body):
                started = time.monotonic()
                if args.jetstream:
                    ack = await _js_publish(ctx, subject, payload, headers)
                    acks.append(ack)
                    if not (many or args.quiet or out.json_mode):
                        log(out, _ack_text(ack))
                else:
                    await nc.publish(subject, payload, reply=args.reply or "", headers=headers)
                    if args.sleep:
                        await nc.flush(timeout=ctx.timeout)
                    if not (many or args.quiet or out.json_mode):
                        log(out, f"Published {len(payload)} bytes to {go_quote(subject)}")
                published += 1
                total_bytes += len(payload)
                advance(1)
                if args.sleep and n < args.count:
                    await asyncio.sleep(max(0.0, args.sleep - (time.monotonic() - started)))
    await nc.flush(timeout=ctx.timeout)
    if out.json_mode:
        doc: dict[str, Any] = {
            "subject": args.subject,
            "published": published,
            "bytes": total_bytes,
        }
        if args.jetstream:
            doc["acks"] = acks
        out.json(doc)
    elif many and not args.quiet:
        log(
            out, f"Published {published} messages ({total_bytes} bytes) to {go_quote(args.subject)}"
        )
    return 0


async def _js_publish(
    ctx: Ctx, subject: str, payload: bytes, headers: dict[str, str] | None
) -> dict[str, Any]:
    """A JetStream publish: the server's ack document, or its error as a CliError."""
    import json

    import nats.errors

    try:
        msg = await ctx.nc.request(subject, payload, timeout=ctx.timeout, headers=headers)
    except nats.errors.NoRespondersError:
        raise CliError(f"no stream stores subject {go_quote(subject)}") from None
    try:
        ack = json.loads(msg.data)
    except ValueError:
        raise CliError(f"not a publish acknowledgement: {msg.data[:80]!r}") from None
    if isinstance(ack.get("error"), dict):
        raise ApiError(ack["error"])
    return dict(ack)


def _ack_text(ack: dict[str, Any]) -> str:
    text = f"Stored in Stream: {ack.get('stream')} Sequence: {ack.get('seq', 0):,}"
    if ack.get("domain"):
        text += f' Domain: "{ack["domain"]}"'
    if ack.get("duplicate"):
        text += " Duplicate: true"
    if ack.get("val"):
        text += f" Counter Value: {ack['val']}"
    return text


_pub_parser = single_command("brook pub", "Publish messages.", publish)
add_body_options(_pub_parser, count_help="publish this many messages (default: 1)")
_pub_parser.add_argument("--reply", default="", metavar="SUBJECT", help="reply subject to set")
_pub_parser.add_argument(
    "-J", "--jetstream", action="store_true", help="publish to JetStream and wait for each ack"
)


def pub_command(argv: list[str]) -> int:
    return run_single(_pub_parser, argv)


# ---------------------------------------------------------------------- sub


class _Receiver:
    """Prints what arrives and ends the command after `--count` messages or `--wait`
    without traffic."""

    def __init__(self, ctx: Ctx, *, settle_on_take: bool = True) -> None:
        self.args = ctx.args
        self.out = ctx.out
        self.received = 0
        self.settled = 0
        # `reply` is done once its last answer is sent, not when the request arrives.
        self.settle_on_take = settle_on_take
        self.done = asyncio.Event()
        self.last = time.monotonic()

    def take(self) -> int | None:
        """The next message's number, or None once `--count` were taken."""
        if self.done.is_set() or (self.args.count and self.received >= self.args.count):
            return None
        self.received += 1
        self.last = time.monotonic()
        if self.settle_on_take:
            self.settle()
        return self.received

    def settle(self) -> None:
        """One message fully handled: the command ends after `--count` of them."""
        self.settled += 1
        if self.args.count and self.settled >= self.args.count:
            self.done.set()

    async def wait(self, nc: Any) -> None:
        """Until `--count` messages were handled, or `--wait` passed without traffic."""
        while not self.done.is_set():
            step = CLOSED_POLL_S
            if self.args.wait:
                idle = time.monotonic() - self.last
                if idle >= self.args.wait:
                    return
                step = min(step, self.args.wait - idle)
            await wait_while_connected(nc, self.done, step)

    def stamp(self) -> str:
        if self.args.timestamp:
            return " @ " + datetime.datetime.now().strftime("%b %d %H:%M:%S.%f")
        return ""

    def show(self, n: int, msg: Any, title: str, **extra: Any) -> None:
        args, out = self.args, self.out
        if out.json_mode:
            out.json_line(message_json(msg, **extra))
        elif args.raw:
            print_body(out, msg.data, compact=True)
        else:
            out.line(f"[#{n}]{self.stamp()} {title}")
            if not args.subjects_only:
                print_headers(out, msg.headers)
                if not args.headers_only:
                    print_body(out, msg.data)
        sys.stdout.flush()


def _jetstream_wanted(args: argparse.Namespace) -> bool:
    return bool(
        args.stream or args.all or args.new or args.last or args.since
        or args.last_per_subject or args.start_sequence
    )  # fmt: skip


async def subscribe(ctx: Ctx) -> int:
    args, out, nc = ctx.args, ctx.out, ctx.nc
    jetstream = _jetstream_wanted(args)
    subjects = list(args.subjects)
    if args.inbox and jetstream:
        raise CliError("generating inboxes is not compatible with JetStream subscriptions")
    if not subjects and args.inbox:
        subjects = [nc.new_inbox()]
    if not subjects and not args.stream:
        raise CliError("subject is required")
    if jetstream and len(subjects) > 1:
        raise CliError("streams subscribe support only 1 subject")
    if args.terminate_at_end and not jetstream:
        raise CliError("--terminate-at-end is only supported for JetStream subscriptions")
    receiver = _Receiver(ctx)
    ignored = set(args.ignore_subject)

    async def on_core(msg: Any) -> None:
        if msg.subject in ignored:
            return
        n = receiver.take()
        if n is None:
            return
        title = f"Received on {go_quote(msg.subject)}"
        if msg.reply:
            title += f" with reply {go_quote(msg.reply)}"
        receiver.show(n, msg, title)

    if jetstream:
        await _js_subscribe(ctx, subjects[0] if subjects else "", receiver)
    else:
        for subject in subjects:
            await nc.subscribe(subject, queue=args.queue or "", cb=on_core)
        await nc.flush(timeout=ctx.timeout)
        if not (args.raw or out.json_mode) or args.inbox:
            log(out, f"Subscribing on {', '.join(subjects)}")
    await receiver.wait(nc)
    return 0


async def _js_subscribe(ctx: Ctx, subject: str, receiver: _Receiver) -> None:
    """An ordered ephemeral consumer without acks, as the `nats` CLI's `sub --stream`."""
    from nats.js.api import ConsumerConfig, DeliverPolicy

    args, out = ctx.args, ctx.out
    config = ConsumerConfig(headers_only=bool(args.headers_only or args.subjects_only) or None)
    what = "from first received message"
    if args.start_sequence:
        config.deliver_policy = DeliverPolicy.BY_START_SEQUENCE
        config.opt_start_seq = args.start_sequence
        what = f"starting at sequence {args.start_sequence}"
    elif args.last:
        config.deliver_policy, what = DeliverPolicy.LAST, "from last received message"
    elif args.all:
        config.deliver_policy = DeliverPolicy.ALL
    elif args.new:
        config.deliver_policy, what = DeliverPolicy.NEW, "for new messages"
    elif args.since:
        config.deliver_policy = DeliverPolicy.BY_START_TIME
        config.opt_start_time = datetime.datetime.now(datetime.UTC) - datetime.timedelta(
            seconds=args.since
        )
        what = f"since {args.since:g}s"
    elif args.last_per_subject:
        config.deliver_policy = DeliverPolicy.LAST_PER_SUBJECT
        what = "for last message per subject"

    async def on_message(msg: Any) -> None:
        meta = msg.metadata
        n = receiver.take()
        if n is None:
            return
        summary = (
            f"stream: {meta.stream} seq: {meta.sequence.stream:,} / pending: "
            f"{meta.num_pending:,} / subject: {msg.subject} / time: "
            f"{meta.timestamp.astimezone().strftime('%Y-%m-%d %H:%M:%S')}"
        )
        receiver.show(
            n, msg, f"Received JetStream message: {summary}",
            stream=meta.stream, seq=meta.sequence.stream, pending=meta.num_pending,
        )  # fmt: skip
        if args.terminate_at_end and meta.num_pending == 0:
            receiver.done.set()

    js = ctx.js
    stream = args.stream or await js.find_stream_name_by_subject(subject)
    if args.terminate_at_end:
        info = await js.stream_info(stream)
        if info.state.messages == 0:
            receiver.done.set()
            return
    await js.subscribe(subject, stream=stream, cb=on_message, ordered_consumer=True, config=config)
    if not (args.raw or out.json_mode):
        log(
            out,
            "Subscribing to JetStream Stream holding messages with subject "
            f"{subject or '>'} {what}",
        )


_sub_parser = single_command(
    "brook sub", "Subscribe to subjects and print what arrives.", subscribe
)
_sub_parser.add_argument("subjects", nargs="*", help="subjects to subscribe to")
_sub_parser.add_argument("--queue", default="", help="subscribe in this queue group")
_sub_parser.add_argument("--count", type=int, default=0, help="quit after this many messages")
_sub_parser.add_argument(
    "--wait", type=duration_arg, default=0.0, help="quit after this long without traffic"
)
_sub_parser.add_argument("-r", "--raw", action="store_true", help="show the bodies only")
_sub_parser.add_argument("--headers-only", action="store_true", help="show headers, no bodies")
_sub_parser.add_argument("--subjects-only", action="store_true", help="show the subjects only")
_sub_parser.add_argument("-t", "--timestamp", action="store_true", help="show receive times")
_sub_parser.add_argument("-i", "--inbox", action="store_true", help="subscribe to a new inbox")
_sub_parser.add_argument(
    "-I", "--ignore-subject", action="append", default=[], metavar="SUBJECT",
    help="do not show messages on this subject",
)  # fmt: skip
_js = _sub_parser.add_argument_group("JetStream (any of these subscribes through a stream)")
_js.add_argument("--stream", default="", help="the stream to read")
_js.add_argument("--all", action="store_true", help="every message in the stream")
_js.add_argument("--new", action="store_true", help="only messages from now on")
_js.add_argument("--last", action="store_true", help="the last message and those after")
_js.add_argument("--since", type=duration_arg, default=0.0, help="messages of the last DURATION")
_js.add_argument("--last-per-subject", action="store_true", help="the last message of each subject")
_js.add_argument("--start-sequence", type=int, default=0, metavar="SEQ", help="from this sequence")
_js.add_argument(
    "-T", "--terminate-at-end", action="store_true", help="quit once every message was received"
)


def sub_command(argv: list[str]) -> int:
    return run_single(_sub_parser, argv)


# ---------------------------------------------------------------------- req


async def request(ctx: Ctx) -> int:
    import nats.errors

    args, out, nc = ctx.args, ctx.out, ctx.nc
    talk = not (args.raw or out.json_mode or args.count > PROGRESS_ABOVE)
    with counted(out, args, "Requesting") as advance:
        async for body in bodies(args, out):
            for _n, subject, payload, headers in numbered(args, out, body):
                if talk:
                    log(out, f"Sending request on {go_quote(subject)}")
                inbox = nc.new_inbox()
                replies = await nc.subscribe(inbox, max_msgs=args.replies or 0)
                started = time.monotonic()
                await nc.publish(subject, payload, reply=inbox, headers=headers)
                got = 0
                wait = ctx.timeout
                try:
                    while True:
                        try:
                            msg = await replies.next_msg(timeout=wait)
                        except nats.errors.TimeoutError:
                            if got:
                                break
                            raise CliError(
                                f"timeout waiting for a reply to {go_quote(subject)}"
                            ) from None
                        if msg.headers and msg.headers.get("Status") == "503":
                            raise CliError("no responders are available")
                        rtt = time.monotonic() - started
                        got += 1
                        _show_reply(out, args, msg, rtt, talk)
                        if args.replies and got >= args.replies:
                            break
                        wait = (
                            max(0.0, ctx.timeout - rtt) if args.replies == 0
                            else rtt / got + args.reply_timeout
                        )  # fmt: skip
                finally:
                    with contextlib.suppress(Exception):
                        await replies.unsubscribe()
                advance(1)
                if args.sleep:
                    await asyncio.sleep(args.sleep)
    return 0


def _show_reply(out: Output, args: argparse.Namespace, msg: Any, rtt: float, talk: bool) -> None:
    from brook.durations import go_string

    if out.json_mode:
        out.json_line(message_json(msg, rtt_ms=round(rtt * 1000, 3)))
    elif args.raw:
        print_body(out, msg.data, compact=True)
    elif talk:
        log(out, f"Received with rtt {go_string(int(rtt * 1e9))}")
        if msg.headers:  # on stderr, as the `nats` CLI logs them
            for key, value in msg.headers.items():
                log(out, f"{key}: {value}")
            out.error("")
        print_body(out, msg.data)


_req_parser = single_command("brook req", "Send requests and print the replies.", request)
add_body_options(_req_parser, count_help="send this many requests (default: 1)")
_req_parser.add_argument("-r", "--raw", action="store_true", help="show the reply bodies only")
_req_parser.add_argument(
    "--replies", type=int, default=1, help="wait for this many replies; 0 waits for --timeout"
)
_req_parser.add_argument(
    "--reply-timeout", type=duration_arg, default=0.3,
    help="with several replies: the longest pause between two (default: 300ms)",
)  # fmt: skip


def req_command(argv: list[str]) -> int:
    return run_single(_req_parser, argv)


# ---------------------------------------------------------------------- reply


async def reply(ctx: Ctx) -> int:
    args, out, nc = ctx.args, ctx.out, ctx.nc
    if args.body is None and not args.command and not args.echo:
        log(out, "No body or command supplied, enabling echo mode")
        args.echo = True
    receiver = _Receiver(ctx, settle_on_take=False)
    try:
        parse_headers(args.header)
    except ValueError as exc:
        raise CliError(str(exc)) from None

    async def on_request(msg: Any) -> None:
        n = receiver.take()
        if n is None:
            return
        try:
            await _answer(ctx, msg, n - 1)  # the `nats` CLI counts replies from 0
        finally:
            receiver.settle()

    await nc.subscribe(args.subject, queue=args.queue, cb=on_request)
    await nc.flush(timeout=ctx.timeout)
    if not out.json_mode:
        log(out, f"Listening on {go_quote(args.subject)} in group {go_quote(args.queue)}")
    await receiver.wait(nc)
    await nc.flush(timeout=ctx.timeout)  # the last reply leaves before the connection closes
    return 0


async def _answer(ctx: Ctx, msg: Any, number: int) -> None:
    """Show request `number` and send its reply (`--echo`, `--command` or BODY)."""
    args, out = ctx.args, ctx.out
    if out.json_mode:
        out.json_line(message_json(msg))
    else:
        log(out, f"[#{number}] Received on subject {go_quote(msg.subject)}:")
        for key, value in (msg.headers or {}).items():
            log(out, f"{key}: {value}")
        out.line()
        out.line(printable(msg.data), flush=True)
    if args.sleep:
        await asyncio.sleep(random.uniform(0, args.sleep))
    headers = parse_headers(args.header, number)
    request_text = msg.data.decode("utf-8", "surrogateescape")
    if args.echo:
        headers = {**(msg.headers or {}), **headers, "NATS-Reply-Counter": str(number)}
        data = msg.data
    elif args.command:
        data = await _run_reply_command(out, args.command, msg.subject, request_text, number)
    else:
        try:
            data = expand(args.body, number, request_text).encode("utf-8", "surrogateescape")
        except TemplateError as exc:
            log(out, f"Could not parse body template: {exc}")
            data = args.body.encode()
    if msg.reply:
        await ctx.nc.publish(msg.reply, data, headers=headers or None)


async def _run_reply_command(out: Output, command: str, subject: str, body: str, n: int) -> bytes:
    """`--command`: `{{0}}`, `{{1}}`... are the subject's tokens, the template functions
    apply (`{{Request}}` is the body); the command's combined output is the reply."""
    for i, token in enumerate(subject.split(".")):
        command = command.replace(f"{{{{{i}}}}}", token)
    with contextlib.suppress(TemplateError):
        command = expand(command, n, body)
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        log(out, f"Could not parse command: {exc}")
        return b""
    env = {**os.environ, "NATS_REQUEST_SUBJECT": subject, "NATS_REQUEST_BODY": body}
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
    except OSError as exc:
        log(out, f"Command {command!r} failed to run: {exc}")
        return b""
    output, _ = await proc.communicate()
    if proc.returncode:
        log(out, f"Command {command!r} failed to run: exit status {proc.returncode}")
    return output


_reply_parser = single_command("brook reply", "Answer requests on a subject.", reply)
_reply_parser.add_argument("subject", help="subject to answer on")
_reply_parser.add_argument(
    "body", nargs="?", help="reply body (templates; {{Request}} is the request)"
)
_reply_parser.add_argument("--echo", action="store_true", help="reply with the request itself")
_reply_parser.add_argument("--command", default="", help="reply with this command's output")
_reply_parser.add_argument(
    "-q",
    "--queue",
    default=DEFAULT_REPLY_QUEUE,
    help=f"queue group (default: {DEFAULT_REPLY_QUEUE})",
)
_reply_parser.add_argument("--count", type=int, default=0, help="quit after this many requests")
_reply_parser.add_argument(
    "--sleep",
    type=duration_arg,
    default=0.0,
    metavar="MAX",
    help="random delay before replying, up to MAX",
)
_reply_parser.add_argument(
    "-H", "--header", action="append", default=[], metavar="K:V", help="add a header"
)
_reply_parser.set_defaults(wait=0.0, timestamp=False)


def reply_command(argv: list[str]) -> int:
    return run_single(_reply_parser, argv)


__all__ = ["pub_command", "reply_command", "req_command", "sub_command"]
