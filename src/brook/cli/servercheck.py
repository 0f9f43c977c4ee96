"""`brook server check ...`: the `nats server check` health checks, with its flags,
thresholds, messages and Nagios output (checkresult.py), computed as jsm.go's monitor
package computes them from the same server documents:

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
from collections.abc import Callable, Coroutine
from typing import Any

from brook.cli.base import (
    JS_API_PREFIX,
    ApiError,
    CliError,
    connect,
    describe,
    duration_arg,
    request_json,
)
from brook.cli.checkresult import (
    DEFAULT_NAMESPACE,
    FORMATS,
    CheckResult,
    PerfData,
    write_atomically,
)
from brook.cli.output import Output
from brook.durations import go_string

Check = Callable[[argparse.Namespace, CheckResult], Coroutine[Any, Any, None]]
NO_SYSTEM_ACCESS = (
    "no results received, ensure the account used has system privileges and appropriate permissions"
)
SERVER_ID_LENGTH = 56
# err_code of "no message found" (JSNoMessageFoundErr).
NO_MESSAGE = 10037
# nats.go's ErrNoResponders, which the `nats` CLI's request check prints.
NO_RESPONDERS = "nats: no responders available for request"
# Payload of the connection check's round trip (jsm.go sends 100 random characters).
ROUND_TRIP_BYTES = 100


async def _api(
    nc: Any, args: argparse.Namespace, subject: str, request: dict[str, Any] | None = None
) -> dict[str, Any]:
    import json

    body = b"" if request is None else json.dumps(request).encode()
    return await request_json(nc, f"{JS_API_PREFIX}.{subject}", body, float(args.timeout))


def _go(seconds: float) -> str:
    """Seconds as Go prints a time.Duration ("1.5ms", "2s")."""
    return go_string(int(seconds * 1e9))


def _seconds_since(stamp: str | None) -> float | None:
    if not stamp or stamp.startswith("0001-"):
        return None
    text = stamp.rstrip("Z")
    whole, _, fraction = text.partition(".")
    moment = datetime.datetime.fromisoformat(whole).replace(tzinfo=datetime.UTC)
    seconds = (datetime.datetime.now(datetime.UTC) - moment).total_seconds()
    return seconds - float(f"0.{fraction or '0'}")


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
                f"connected to {url}, connect time exceeded {_go(args.connect_critical)}"
            )
        elif args.connect_warn and elapsed >= args.connect_warn:
            result.warn(f"connected to {url}, connect time exceeded {_go(args.connect_warn)}")
        else:
            result.ok(f"connected to {url} in {_go(elapsed)}")

        rtt = await nc.rtt(timeout=args.timeout)
        result.pd(PerfData("rtt", rtt, args.rtt_warn, args.rtt_critical, "s"))
        if args.rtt_critical and rtt >= args.rtt_critical:
            result.critical(f"rtt time exceeded {_go(args.rtt_critical)}")
        elif args.rtt_warn and rtt >= args.rtt_warn:
            result.warn(f"rtt time exceeded {_go(args.rtt_warn)}")
        else:
            result.ok(f"rtt time {_go(rtt)}")

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


# ---------------------------------------------------------------------- stream


async def check_stream(args: argparse.Namespace, result: CheckResult) -> None:
    async with _connected(args, result, "could not load info") as nc:
        if nc is None:
            return
        info = await _api(nc, args, f"STREAM.INFO.{args.stream}")
        state = info.get("state") or {}
        msgs = int(state.get("messages") or 0)
        if args.msgs_warn or args.msgs_critical:
            result.pd(PerfData("messages", msgs, args.msgs_warn, args.msgs_critical))
            if args.msgs_critical and msgs <= args.msgs_critical:
                result.critical(f"{msgs} messages")
            elif args.msgs_warn and msgs <= args.msgs_warn:
                result.warn(f"{msgs} messages")
            else:
                result.ok(f"{msgs} messages")
        if args.subjects_warn > 0 or args.subjects_critical > 0:
            _check_subjects(result, int(state.get("num_subjects") or 0), args)
        _check_sources(result, info, args)


def _check_subjects(result: CheckResult, subjects: int, args: argparse.Namespace) -> None:
    """jsm.go's streamCheckSubjects: warn < crit means "at least", else "at most"."""
    warn, crit = args.subjects_warn, args.subjects_critical
    result.pd(PerfData("subjects", subjects, warn, crit))
    rising = warn < crit
    if (rising and subjects >= crit) or (not rising and subjects <= crit):
        result.critical(f"{subjects} subjects")
    elif (rising and subjects >= warn) or (not rising and subjects <= warn):
        result.warn(f"{subjects} subjects")
    else:
        result.ok(f"{subjects} subjects")


def _check_sources(result: CheckResult, info: dict[str, Any], args: argparse.Namespace) -> None:
    sources = info.get("sources") or []
    count = len(sources)
    result.pd(PerfData("sources", count, args.min_sources, args.max_sources))
    if (args.min_sources and count < args.min_sources) or (
        args.max_sources and count > args.max_sources
    ):
        result.critical(f"{count} sources")
    else:
        result.ok(f"{count} sources")
    lag_crit, seen_crit = args.lag_critical, args.seen_critical
    if not lag_crit and not seen_crit:
        return
    mirror = info.get("mirror")
    if not sources:
        if mirror is None:
            result.critical("not mirrored")
            return
        lag, active = int(mirror.get("lag") or 0), int(mirror.get("active") or 0) / 1e9
        result.pd(
            PerfData("lag", lag, crit=lag_crit),
            PerfData("active", active, crit=seen_crit, unit="s"),
        )
        healthy = True
        if lag_crit and lag >= lag_crit:
            result.critical(f"Mirror Lag {lag}")
            healthy = False
        if seen_crit and active >= seen_crit:
            result.critical(f"Mirror Seen {_go(active)}")
            healthy = False
        if healthy:
            result.ok(f"Mirror {mirror.get('name', '')}")
        return
    lagged = sum(1 for s in sources if lag_crit and int(s.get("lag") or 0) >= lag_crit)
    inactive = sum(1 for s in sources if seen_crit and int(s.get("active") or 0) / 1e9 >= seen_crit)
    result.pd(PerfData("sources_lagged", lagged), PerfData("sources_inactive", inactive))
    if lagged:
        result.critical(f"{lagged} sources are lagged")
    else:
        result.ok(f"{count} sources current")
    if inactive:
        result.critical(f"{inactive} sources are inactive")
    else:
        result.ok(f"{count} sources active")


# ---------------------------------------------------------------------- message


async def check_message(args: argparse.Namespace, result: CheckResult) -> None:
    """jsm.go's CheckStreamMessage: the last message on a literal subject, its age (from
    the stream, or `--body-timestamp`: the body as Unix seconds) and its content."""
    import base64
    import re

    from brook.subjects import is_valid_literal_subject

    if not is_valid_literal_subject(args.subject.encode()):
        result.critical(f'Check failed: invalid subject "{args.subject}"')
        return
    async with _connected(args, result, "could not load info") as nc:
        if nc is None:
            return
        try:
            reply = await _api(
                nc, args, f"STREAM.MSG.GET.{args.stream}", {"last_by_subj": args.subject}
            )
        except ApiError as exc:
            result.critical(
                "no message found" if exc.err_code == NO_MESSAGE else f"msg load failed: {exc}"
            )
            return
        message = reply.get("message") or {}
        data = base64.b64decode(message.get("data") or "")
        if args.body_timestamp:
            try:
                age = time.time() - int(data.strip())
            except ValueError as exc:
                result.critical(f"invalid timestamp body: {exc}")
                return
        else:
            age = _seconds_since(message.get("time")) or 0.0
        age = round(age, 3)
        result.pd(
            PerfData("age", age, args.age_warn, args.age_critical, "s"),
            PerfData("size", len(data), unit="B"),
        )
        if args.age_critical and age > args.age_critical:
            result.critical(f"{_go(age)} old")
        elif args.age_warn and age > args.age_warn:
            result.warn(f"{_go(age)} old")
        if args.content:
            try:
                pattern = re.compile(args.content.encode())
            except re.error as exc:
                result.critical(f"content regex compile failed: {exc}")
                return
            if not pattern.search(data):
                result.critical(f"does not match regex: {args.content}")
        if not result.warnings and not result.criticals:
            result.ok(f"Valid message on {args.stream} > {args.subject}")


# ---------------------------------------------------------------------- consumer


async def check_consumer(args: argparse.Namespace, result: CheckResult) -> None:
    async with _connected(args, result, "could not load info") as nc:
        if nc is None:
            return
        info = await _api(nc, args, f"CONSUMER.INFO.{args.stream}.{args.consumer}")
        ack_pending = int(info.get("num_ack_pending") or 0)
        waiting = int(info.get("num_waiting") or 0)
        pending = int(info.get("num_pending") or 0)
        redelivered = int(info.get("num_redelivered") or 0)
        last_delivery = _seconds_since((info.get("delivered") or {}).get("last_active"))
        last_ack = _seconds_since((info.get("ack_floor") or {}).get("last_active"))
        names = ("outstanding_ack", "waiting", "unprocessed", "redelivery")
        crit = {k: max(getattr(args, f"{k}_critical"), 0) for k in names}
        result.pd(
            PerfData("ack_pending", ack_pending, crit=crit["outstanding_ack"]),
            PerfData("pull_waiting", waiting, crit=crit["waiting"]),
            PerfData("pending", pending, crit=crit["unprocessed"]),
            PerfData("redelivered", redelivered, crit=crit["redelivery"]),
        )
        if last_delivery is not None:
            result.pd(
                PerfData("last_delivery", last_delivery, crit=args.last_delivery_critical, unit="s")
            )
        if last_ack is not None:
            result.pd(PerfData("last_ack", last_ack, crit=args.last_ack_critical, unit="s"))
        for value, limit, label in (
            (ack_pending, args.outstanding_ack_critical, "Ack Pending"),
            (waiting, args.waiting_critical, "Waiting Pulls"),
            (pending, args.unprocessed_critical, "Unprocessed Messages"),
            (redelivered, args.redelivery_critical, "Redelivered"),
        ):
            if limit > 0:
                (result.critical if value >= limit else result.ok)(f"{label}: {value}")
        for age, limit, label, none in (
            (last_delivery, args.last_delivery_critical, "Last delivery", "No deliveries"),
            (last_ack, args.last_ack_critical, "Last ack", "No acks"),
        ):
            if limit <= 0:
                continue
            if age is None:
                result.critical(none)
            elif age >= limit:
                result.critical(f"{label} {_go(age)} ago")
            else:
                result.ok(f"{label} {_go(age)} ago")


# ---------------------------------------------------------------------- jetstream


async def check_jetstream(args: argparse.Namespace, result: CheckResult) -> None:
    async with _connected(args, result, "connection failed") as nc:
        if nc is None:
            return
        try:
            info = await _api(nc, args, "INFO")
        except CliError as exc:
            result.critical(f"JetStream not available: {exc}")
            return
        limits = info.get("limits") or {}
        a = args
        for item, unit, warn, crit, limit, current in (
            ("memory", "B", a.mem_warn, a.mem_critical, "max_memory", "memory"),
            ("storage", "B", a.store_warn, a.store_critical, "max_storage", "storage"),
            ("streams", "", a.streams_warn, a.streams_critical, "max_streams", "streams"),
            ("consumers", "", a.consumers_warn, a.consumers_critical, "max_consumers", "consumers"),
        ):
            used, most = int(info.get(current) or 0), int(limits.get(limit) or 0)
            _check_usage(result, item, unit, warn, crit, most, used)
        # Every Brook stream has one replica: the replica health is a count of them.
        if args.replicas:
            streams = int(info.get("streams") or 0)
            result.pd(
                PerfData("replicas_ok", streams), PerfData("replicas_no_leader", 0),
                PerfData("replicas_missing_replicas", 0),
                PerfData("replicas_lagged", 0, crit=args.replica_lag_critical),
                PerfData("replicas_not_seen", 0, crit=args.replica_seen_critical, unit="s"),
                PerfData("replicas_fail", 0),
            )  # fmt: skip


def _check_usage(
    result: CheckResult, item: str, unit: str, warn: int, crit: int, limit: int, current: int
) -> None:
    """jsm.go's checkJSAccountInfo for one resource: its use in percent of the limit."""
    pct = int(current / limit * 100) if limit > 0 else 0
    result.pd(PerfData(item, current, unit=unit))
    result.pd(PerfData(f"{item}_pct", pct, max(warn, 0), max(crit, 0), "%"))
    if warn != -1 and crit != -1 and warn >= crit:
        result.critical(f"{item}: invalid thresholds")
    elif pct > 100:
        result.critical(f"{item}: exceed server limits")
    elif warn >= 0 and crit >= 0:
        if pct > crit:
            result.critical(f"{pct}% {item}")
        elif pct > warn:
            result.warn(f"{pct}% {item}")


# ---------------------------------------------------------------------- kv


async def check_kv(args: argparse.Namespace, result: CheckResult) -> None:
    import nats.js.errors as jserr

    async with _connected(args, result, "connection failed") as nc:
        if nc is None:
            return
        js = nc.jetstream(timeout=args.timeout)
        try:
            kv = await js.key_value(args.bucket)
        except jserr.BucketNotFoundError:
            result.critical(f"bucket {args.bucket} not found")
            return
        result.ok(f"bucket {args.bucket}")
        status = await kv.status()
        values = int(status.values)
        warn, crit = args.values_warn, args.values_critical
        result.pd(PerfData("values", values, max(warn, 0), max(crit, 0)))
        if args.key:
            try:
                entry = await kv.get(args.key)
                result.ok(f"key {args.key} found")
            except jserr.KeyDeletedError as exc:
                op = "purged" if getattr(exc.entry, "operation", "") == "PURGE" else "deleted"
                result.critical(f"key {args.key} is {op}")
            except jserr.KeyNotFoundError:
                result.critical(f"key {args.key} not found")
            else:
                del entry
        if warn > -1 or crit > -1:
            falling = crit < warn
            if crit > -1 and (values <= crit if falling else values >= crit):
                result.critical(f"{values} values")
            elif warn > -1 and (values <= warn if falling else values >= warn):
                result.warn(f"{values} values")
            else:
                result.ok(f"{values} values")
        state = status.stream_info
        result.pd(
            PerfData("bytes", state.state.bytes, unit="B"),
            PerfData("replicas", state.config.num_replicas or 1),
        )


# ---------------------------------------------------------------------- request


async def check_request(args: argparse.Namespace, result: CheckResult) -> None:
    import re

    import nats.errors

    async with _connected(args, result, "could not load info") as nc:
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
            result.critical(f"response took {_go(round(took, 3))}")
        elif args.response_warn and took > args.response_warn:
            result.warn(f"response took {_go(round(took, 3))}")
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
    async with _connected(args, result, "connection failed") as nc:
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
            level(f"Up {_go(int(up))}")
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


class _connected:
    """`async with _connected(args, result, prefix) as nc`: a connection, or None after
    recording `prefix: <reason>` as critical; a server failure inside becomes critical."""

    def __init__(self, args: argparse.Namespace, result: CheckResult, prefix: str) -> None:
        self.args, self.result, self.prefix = args, result, prefix
        self.nc: Any = None

    async def __aenter__(self) -> Any:
        try:
            self.nc = await connect(self.args)
        except CliError as exc:
            self.result.critical(f"{self.prefix}: {str(exc).split(': ', 1)[-1]}")
        return self.nc

    async def __aexit__(self, kind: Any, exc: BaseException | None, tb: Any) -> bool:
        if self.nc is not None:
            await self.nc.close()
        if exc is not None and isinstance(exc, Exception):
            self.result.critical(f"{self.prefix}: {describe(exc)}")
            return True
        return False


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
