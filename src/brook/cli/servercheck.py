"""`brook server check ...`: the `nats server check` health checks, with its flags,
thresholds, messages and Nagios output (checkresult.py), computed as jsm.go's monitor
package computes them from the same server documents (the JetStream ones in checkjs.py):

    connection   connect time, RTT and a round trip through the server
    stream       messages, subjects and sources of a stream (--stream)
    consumer     ack pending, waiting pulls, unprocessed, redeliveries, last delivery/ack
    message      the last message on a subject of a stream: its age and content
    jetstream    the account's memory, storage, streams and consumers against its limits
    kv           a bucket exists, its value count, and a key holds a value
    request      a service answers, in time, with the expected body and headers
    server       a server (by name, over `$SYS`) is up long enough, within CPU, memory,
                 connection and subscription thresholds, with auth/TLS/JetStream on

Thresholds come from flags only (the `nats` CLI also reads `io.nats.monitor.*` stream and
consumer metadata; Brook does not). Not here: `meta`, `credential`, `server
--tls-cert-warn/crit` and the cluster checks of `stream` (Brook has no clusters).
`request --match-headers` checks the reply's headers (the `nats` CLI's flag adds them to
the request instead).

A check never fails with an error message and exit status 1: a connection or server
failure is its CRITICAL verdict, as monitoring systems expect.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import random
import string
import sys
import time
from collections.abc import Callable
from typing import Any

from brook.cli.base import (
    CliError,
    connect,
    describe,
    duration_arg,
)
from brook.cli.checkbase import Check, Connected, go_duration
from brook.cli.checkjs import check_consumer, check_jetstream, check_kv, check_message, check_stream
from brook.cli.checkresult import (
    DEFAULT_NAMESPACE,
    FORMATS,
    CheckResult,
    PerfData,
    write_atomically,
)
from brook.cli.output import Output

NO_SYSTEM_ACCESS = (
    "no results received, ensure the account used has system privileges and appropriate permissions"
)
SERVER_ID_LENGTH = 56
# nats.go's ErrNoResponders, which the `nats` CLI's request check prints.
NO_RESPONDERS = "nats: no responders available for request"
# Payload of the connection check's round trip (jsm.go sends 100 random characters).
ROUND_TRIP_BYTES = 100


# ---------------------------------------------------------------------- connection


async def check_connection(args: argparse.Namespace, result: CheckResult) -> None:
    started = time.perf_counter()
    try:
        nc = await connect(args)
    except CliError as exc:
        result.critical(f"connection failed: {str(exc).split(': ', 1)[-1]}")
        return
    try:
        elapsed = time.perf_counter() - started
        url = nc.connected_url.geturl() if nc.connected_url else args.server
        result.pd(PerfData("connect_time", elapsed, args.connect_warn, args.connect_critical, "s"))
        if args.connect_critical and elapsed >= args.connect_critical:
            result.critical(
                f"connected to {url}, connect time exceeded {go_duration(args.connect_critical)}"
            )
        elif args.connect_warn and elapsed >= args.connect_warn:
            result.warn(
                f"connected to {url}, connect time exceeded {go_duration(args.connect_warn)}"
            )
        else:
            result.ok(f"connected to {url} in {go_duration(elapsed)}")

        rtt = await nc.rtt(timeout=args.timeout)
        result.pd(PerfData("rtt", rtt, args.rtt_warn, args.rtt_critical, "s"))
        if args.rtt_critical and rtt >= args.rtt_critical:
            result.critical(f"rtt time exceeded {go_duration(args.rtt_critical)}")
        elif args.rtt_warn and rtt >= args.rtt_warn:
            result.warn(f"rtt time exceeded {go_duration(args.rtt_warn)}")
        else:
            result.ok(f"rtt time {go_duration(rtt)}")

        payload = "".join(random.choices(string.ascii_letters + string.digits, k=ROUND_TRIP_BYTES))
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox, max_msgs=1)
        began = time.perf_counter()
        await nc.publish(inbox, payload.encode())
        try:
            received = await sub.next_msg(timeout=args.timeout)
        except Exception as exc:
            result.critical(f"did not receive from {inbox}: {describe(exc)}")
            return
        took = time.perf_counter() - began
        result.pd(PerfData("request_time", took, args.req_warn, args.req_critical, "s"))
        if received.data != payload.encode():
            result.critical("did not receive expected message")
        if args.req_critical and took >= args.req_critical:
            result.critical(f"round trip request took {took:f}")
        elif args.req_warn and took >= args.req_warn:
            result.warn(f"round trip request took {took:f}")
        else:
            result.ok(f"round trip took {took:f}s")
    finally:
        await nc.close()


# ---------------------------------------------------------------------- request


async def check_request(args: argparse.Namespace, result: CheckResult) -> None:
    import re

    import nats.errors

    async with Connected(args, result, "could not load info") as nc:
        if nc is None:
            return
        began = time.perf_counter()
        try:
            reply = await nc.request(
                args.subject, args.payload.encode(), timeout=args.timeout,
                headers=dict(args.headers) or None,
            )  # fmt: skip
        except Exception as exc:
            took = time.perf_counter() - began
            result.pd(
                PerfData("time", round(took, 3), args.response_warn, args.response_critical, "s")
            )
            reason = (
                NO_RESPONDERS if isinstance(exc, nats.errors.NoRespondersError) else describe(exc)
            )
            result.critical(f"could not send request: {reason}")
            return
        took = time.perf_counter() - began
        result.pd(PerfData("time", round(took, 3), args.response_warn, args.response_critical, "s"))
        if args.match_payload:
            try:
                pattern = re.compile(args.match_payload.encode())
            except re.error as exc:
                result.critical(f"content regex compile failed: {exc}")
                return
            if not pattern.search(reply.data):
                result.critical("response does not match regexp")
        for key, value in args.match_headers:
            got = (reply.headers or {}).get(key, "")
            if got != value:
                result.critical(f'invalid header "{key}" = "{got}"')
        if args.response_critical and took > args.response_critical:
            result.critical(f"response took {go_duration(round(took, 3))}")
        elif args.response_warn and took > args.response_warn:
            result.warn(f"response took {go_duration(round(took, 3))}")
        if not result.warnings and not result.criticals:
            result.ok("Valid response")


def _key_value(text: str) -> tuple[str, str]:
    """`K=V` of a `--headers`/`--match-headers` flag (the `nats` CLI's map flags)."""
    key, equals, value = text.partition("=")
    if not equals or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


# ---------------------------------------------------------------------- server


async def fetch_varz(nc: Any, server: str, wait: float) -> dict[str, Any]:
    """`server`'s VARZ through the system account's services, as the `nats` CLI asks:
    by ID (56 upper-case characters) or by exact name, every server's when empty (the
    first reply). Raises CliError when no server answers (no system credentials)."""
    import json

    import nats.errors

    if len(server) == SERVER_ID_LENGTH and server.upper() == server:
        subject, body = f"$SYS.REQ.SERVER.{server}.VARZ", b"{}"
    else:
        subject = "$SYS.REQ.SERVER.PING.VARZ"
        request: dict[str, Any] = {"exact_match": True}
        if server:
            request["server_name"] = server
        body = json.dumps(request).encode()
    try:
        msg = await nc.request(subject, body, timeout=wait)
    except (nats.errors.NoRespondersError, nats.errors.TimeoutError):
        raise CliError(NO_SYSTEM_ACCESS) from None
    try:
        reply = json.loads(msg.data)
    except ValueError:
        raise CliError(f"invalid response received: {msg.data[:80]!r}") from None
    if reply.get("error"):
        raise CliError(f"invalid response received: {reply['error']}")
    varz = reply.get("data")
    if not isinstance(varz, dict):
        raise CliError(f"no data received for {server}")
    return varz


def _parse_time(stamp: str) -> datetime.datetime:
    whole, _, fraction = stamp.rstrip("Z").partition(".")
    moment = datetime.datetime.fromisoformat(whole).replace(tzinfo=datetime.UTC)
    return moment + datetime.timedelta(microseconds=int((fraction or "0")[:6].ljust(6, "0")))


async def check_server(args: argparse.Namespace, result: CheckResult) -> None:
    async with Connected(args, result, "connection failed") as nc:
        if nc is None:
            return
        try:
            varz = await fetch_varz(nc, args.name, float(args.timeout))
        except CliError as exc:
            result.critical(f"varz failed: {exc}")
            return
        if varz.get("server_name") != args.name:
            result.critical(f'result from wrong server "{varz.get("server_name")}"')
            return
        for wanted, present, yes, no in (
            (args.js_required, bool((varz.get("jetstream") or {}).get("config")),
             "JetStream enabled", "JetStream not enabled"),
            (args.tls_required, bool(varz.get("tls_required")), "TLS required", "TLS not required"),
            (args.auth_required, bool(varz.get("auth_required")),
             "Authentication required", "Authentication not required"),
        ):  # fmt: skip
            if wanted:
                (result.ok if present else result.critical)(yes if present else no)
        up = (_parse_time(varz["now"]) - _parse_time(varz["start"])).total_seconds()
        warn, crit = args.uptime_warn, args.uptime_critical
        if warn or crit:
            if crit > warn:
                result.critical("Up invalid thresholds")
                return
            level = result.critical if up <= crit else result.warn if up <= warn else result.ok
            level(f"Up {go_duration(int(up))}")
        cpu, mem = float(varz.get("cpu") or 0), float(varz.get("mem") or 0)
        conns, subs = float(varz.get("connections") or 0), float(varz.get("subscriptions") or 0)
        result.pd(
            PerfData("uptime", up, warn, crit, "s"),
            PerfData("cpu", cpu, args.cpu_warn, args.cpu_critical, "%"),
            PerfData("mem", mem, args.mem_warn, args.mem_critical),
            PerfData("connections", conns, args.conn_warn, args.conn_critical),
            PerfData("subscriptions", subs, args.subs_warn, args.subs_critical),
        )
        for label, crit_at, warn_at, value, invertible in (
            ("CPU", args.cpu_critical, args.cpu_warn, cpu, False),
            ("Memory", args.mem_critical, args.mem_warn, mem, False),
            ("Connections", args.conn_critical, args.conn_warn, conns, True),
            ("Subscriptions", args.subs_critical, args.subs_warn, subs, True),
        ):
            _check_level(result, label, crit_at, warn_at, value, invertible)


def _check_level(
    result: CheckResult, label: str, crit: float, warn: float, value: float, invertible: bool
) -> None:
    """jsm.go's checkVal: at or above the thresholds, or (when `invertible` and critical
    is below warning) at or below them."""
    if not crit and not warn:
        return
    if crit < warn and not invertible:
        result.critical(f"{label} invalid thresholds")
        return
    falling = crit < warn
    if (value <= crit) if falling else (value >= crit):
        result.critical(f"{label} {value:.2f}")
    elif (value <= warn) if falling else (value >= warn):
        result.warn(f"{label} {value:.2f}")
    else:
        result.ok(f"{label} {value:.2f}")


# ---------------------------------------------------------------------- running


CHECKS: dict[str, tuple[str, Check, Callable[[argparse.Namespace], str]]] = {
    "connection": ("connections", check_connection, lambda a: "Connection"),
    "stream": ("stream", check_stream, lambda a: str(a.stream)),
    "consumer": ("consumer", check_consumer, lambda a: f"{a.stream}_{a.consumer}"),
    "jetstream": ("jetstream", check_jetstream, lambda a: "JetStream"),
    "kv": ("kv", check_kv, lambda a: str(a.bucket)),
    "request": ("request", check_request, lambda a: str(a.subject)),
    "message": ("message", check_message, lambda a: "Stream Message"),
    "server": ("server", check_server, lambda a: str(a.name)),
}


def run_check(args: argparse.Namespace) -> int:
    """Run the chosen check and print its verdict; the Nagios exit status."""
    suite, check, name = CHECKS[args.check]
    result = CheckResult(name(args), suite)
    try:
        asyncio.run(check(args, result))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        result.critical(f"Check failed: {describe(exc)}")
    text = result.render(Output(json_mode=bool(args.json)), args.format, args.namespace)
    if args.outfile:
        try:
            write_atomically(args.outfile, text)
        except OSError as exc:
            sys.stderr.write(f"brook server check: --outfile {args.outfile}: {exc.strerror}\n")
            return 1
    else:
        sys.stdout.write(text + "\n")
    return result.exit_status(args.format)


def add_check_parsers(check_group: Any, make_leaf: Callable[..., argparse.ArgumentParser]) -> None:
    """The check subcommands' parsers with the `nats server check` flags."""

    def leaf(name: str, help_: str, aliases: list[str] | None = None) -> argparse.ArgumentParser:
        p = make_leaf(check_group, name, help_, aliases)
        add_format_options(p, suppress=True)
        return p

    conn = leaf("connection", "Checks basic server connection", aliases=["conn"])
    for flag, default in (("connect", 0.5), ("rtt", 0.5), ("req", 0.5)):
        conn.add_argument(f"--{flag}-warn", type=duration_arg, default=default, metavar="DURATION")
        conn.add_argument(
            f"--{flag}-critical", type=duration_arg, default=default * 2, metavar="DURATION"
        )

    stream = leaf("stream", "Checks the health of a stream")
    stream.add_argument("--stream", required=True, help="the stream to check")
    stream.add_argument("--lag-critical", type=int, default=0, metavar="MSGS")
    stream.add_argument("--seen-critical", type=duration_arg, default=0.0, metavar="DURATION")
    stream.add_argument("--min-sources", type=int, default=0, metavar="SOURCES")
    stream.add_argument("--max-sources", type=int, default=0, metavar="SOURCES")
    stream.add_argument("--msgs-warn", type=int, default=0, metavar="MSGS", help="warn below this")
    stream.add_argument(
        "--msgs-critical", type=int, default=0, metavar="MSGS", help="critical below this"
    )
    stream.add_argument("--subjects-warn", type=int, default=0, metavar="SUBJECTS")
    stream.add_argument("--subjects-critical", type=int, default=0, metavar="SUBJECTS")

    consumer = leaf("consumer", "Checks the health of a consumer")
    consumer.add_argument("--stream", required=True, help="the consumer's stream")
    consumer.add_argument("--consumer", required=True, help="the consumer to check")
    for flag in ("outstanding-ack", "waiting", "unprocessed", "redelivery"):
        consumer.add_argument(f"--{flag}-critical", type=int, default=-1)
    consumer.add_argument(
        "--last-delivery-critical", type=duration_arg, default=0.0, metavar="DURATION"
    )
    consumer.add_argument("--last-ack-critical", type=duration_arg, default=0.0, metavar="DURATION")

    js = leaf("jetstream", "Check JetStream account state", aliases=["js"])
    for flag, warn, crit in (
        ("mem", 75, 90),
        ("store", 75, 90),
        ("streams", -1, -1),
        ("consumers", -1, -1),
    ):
        js.add_argument(f"--{flag}-warn", type=int, default=warn, metavar="PCT")
        js.add_argument(f"--{flag}-critical", type=int, default=crit, metavar="PCT")
    js.add_argument("--replicas", action=argparse.BooleanOptionalAction, default=True)
    js.add_argument("--replica-seen-critical", type=duration_arg, default=5.0, metavar="DURATION")
    js.add_argument("--replica-lag-critical", type=int, default=200, metavar="OPS")

    kv = leaf("kv", "Checks a NATS KV Bucket")
    kv.add_argument("--bucket", required=True, help="the bucket to check")
    kv.add_argument("--values-critical", type=int, default=-1)
    kv.add_argument("--values-warn", type=int, default=-1)
    kv.add_argument("--key", default="", help="a key that must hold a value")

    msg = leaf("message", "Checks properties of a message stored in a stream")
    msg.add_argument("--stream", required=True, help="the stream to check")
    msg.add_argument("--subject", default=">", help="the subject of the last message to check")
    msg.add_argument("--age-warn", type=duration_arg, default=0.0, metavar="DURATION")
    msg.add_argument("--age-critical", type=duration_arg, default=0.0, metavar="DURATION")
    msg.add_argument("--content", default="", metavar="REGEX", help="the body must match")
    msg.add_argument(
        "--body-timestamp", action="store_true", help="the body is the message's Unix time"
    )

    req = leaf("request", "Checks a request-reply service", aliases=["req"])
    req.add_argument("--subject", required=True, help="the subject to send the request to")
    req.add_argument("--payload", default="", help="the request's body")
    req.add_argument("--headers", type=_key_value, action="append", default=[], metavar="K=V")
    req.add_argument("--match-payload", default="", metavar="REGEX", help="the reply must match")
    req.add_argument(
        "--match-headers", type=_key_value, action="append", default=[], metavar="K=V",
        help="the reply must have this header",
    )  # fmt: skip
    req.add_argument("--response-critical", type=duration_arg, default=0.0, metavar="DURATION")
    req.add_argument("--response-warn", type=duration_arg, default=0.0, metavar="DURATION")

    srv = leaf("server", "Checks a NATS Server health (needs system credentials)")
    srv.add_argument("--name", required=True, help="server name to require in the result")
    for flag in ("cpu", "mem", "conn", "subs"):
        srv.add_argument(f"--{flag}-warn", type=int, default=0)
        srv.add_argument(f"--{flag}-critical", type=int, default=0)
    srv.add_argument("--uptime-warn", type=duration_arg, default=0.0, metavar="DURATION")
    srv.add_argument("--uptime-critical", type=duration_arg, default=0.0, metavar="DURATION")
    srv.add_argument("--auth-required", action="store_true", help="authentication is required")
    srv.add_argument("--tls-required", action="store_true", help="TLS is required")
    srv.add_argument("--js-required", action="store_true", help="JetStream is enabled")


def add_format_options(p: argparse.ArgumentParser, *, suppress: bool = False) -> None:
    """`--format`, `--namespace` and `--outfile`, on `check` and (defaults suppressed)
    on each check, so they may come before or after the check's name."""

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    p.add_argument(
        "--format",
        choices=FORMATS,
        default=default("nagios"),
        help="output format (default: nagios)",
    )
    p.add_argument(
        "--namespace", default=default(DEFAULT_NAMESPACE),
        help=f"the prometheus format's namespace (default: {DEFAULT_NAMESPACE})",
    )  # fmt: skip
    p.add_argument("--outfile", default=default(""), help="write the result to this file instead")


__all__ = ["add_check_parsers", "add_format_options", "run_check"]
