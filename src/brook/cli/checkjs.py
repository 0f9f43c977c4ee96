"""`brook server check` of JetStream assets (servercheck.py runs them): stream, message,
consumer, jetstream and kv, computed as jsm.go's monitor package computes them from the
same API responses, with the `nats` CLI's messages and thresholds."""

from __future__ import annotations

import argparse
import time
from typing import Any

from brook.cli.base import ApiError, CliError
from brook.cli.checkbase import Connected, go_duration, js_api, seconds_since
from brook.cli.checkresult import CheckResult, PerfData

# err_code of "no message found" (JSNoMessageFoundErr).
NO_MESSAGE = 10037


# ---------------------------------------------------------------------- stream


async def check_stream(args: argparse.Namespace, result: CheckResult) -> None:
    async with Connected(args, result, "could not load info") as nc:
        if nc is None:
            return
        info = await js_api(nc, args, f"STREAM.INFO.{args.stream}")
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
            result.critical(f"Mirror Seen {go_duration(active)}")
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
    async with Connected(args, result, "could not load info") as nc:
        if nc is None:
            return
        try:
            reply = await js_api(
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
            age = seconds_since(message.get("time")) or 0.0
        age = round(age, 3)
        result.pd(
            PerfData("age", age, args.age_warn, args.age_critical, "s"),
            PerfData("size", len(data), unit="B"),
        )
        if args.age_critical and age > args.age_critical:
            result.critical(f"{go_duration(age)} old")
        elif args.age_warn and age > args.age_warn:
            result.warn(f"{go_duration(age)} old")
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
    async with Connected(args, result, "could not load info") as nc:
        if nc is None:
            return
        info = await js_api(nc, args, f"CONSUMER.INFO.{args.stream}.{args.consumer}")
        ack_pending = int(info.get("num_ack_pending") or 0)
        waiting = int(info.get("num_waiting") or 0)
        pending = int(info.get("num_pending") or 0)
        redelivered = int(info.get("num_redelivered") or 0)
        last_delivery = seconds_since((info.get("delivered") or {}).get("last_active"))
        last_ack = seconds_since((info.get("ack_floor") or {}).get("last_active"))
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
                result.critical(f"{label} {go_duration(age)} ago")
            else:
                result.ok(f"{label} {go_duration(age)} ago")


# ---------------------------------------------------------------------- jetstream


async def check_jetstream(args: argparse.Namespace, result: CheckResult) -> None:
    async with Connected(args, result, "connection failed") as nc:
        if nc is None:
            return
        try:
            info = await js_api(nc, args, "INFO")
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

    async with Connected(args, result, "connection failed") as nc:
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
