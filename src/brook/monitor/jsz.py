"""The `/jsz` document: JetStream's usage, configuration and limits, and per account its
streams and consumers.

Mirrors nats-server's `JSInfo` (server/monitor.go `Jsz`): the server's usage and API
counters (`JetStreamStats`), its JetStream configuration and the limits configured, the
totals of every account's streams, consumers, messages and bytes; with `accounts` (or
`streams`, `consumers`, which imply it) each account's `AccountDetail`, sorted by name and
paged by `offset` and `limit` (default 1024), or only account `acc`'s; with `streams` each
stream's `StreamDetail`, with `consumers` its consumers' infos, with `config` the
configurations. A server is its own leader: `leader-only` changes nothing, and `raft`
counts every stream and consumer as led here. With JetStream off the document says
`disabled`.

The options come from a query string (`/jsz`) or a JSON body (`$SYS.REQ.*.JSZ`,
nats-server's `JSzOptions`); both build a `JszOptions`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from brook import limits
from brook.config.settings import Settings
from brook.monitor.durations import rfc3339_nano, seconds_to_ns
from brook.monitor.params import BadParameter, NotHere, go_bool, go_int, text
from brook.server.statistics import JetStreamAccountReport, StatisticsFeed

__all__ = [
    "JSZ_LIMIT_DEFAULT",
    "JszOptions",
    "build_jsz",
    "build_jsz_account",
    "jetstream_config",
    "jetstream_limits",
]

JSZ_LIMIT_DEFAULT = 1024  # nats-server's, for the account details
_SYNC_INTERVAL_S = 120.0  # nats-server's default JetStream sync interval
_UINT64 = 2**64  # Go shows an account's -1 ("no limit") reservation as a uint64


@dataclass(slots=True)
class JszOptions:
    account: str = ""
    accounts: bool = False
    streams: bool = False
    consumers: bool = False
    direct_consumers: bool = False
    config: bool = False
    leader_only: bool = False
    offset: int = 0
    limit: int = 0
    raft: bool = False
    stream_leader_only: bool = False

    @classmethod
    def from_query(cls, query: dict[str, list[str]]) -> JszOptions:
        """`/jsz`'s parameters, checked in nats-server's order."""
        accounts = go_bool(query, "accounts")
        streams = go_bool(query, "streams")
        consumers = go_bool(query, "consumers")
        direct = go_bool(query, "direct-consumers")
        config = go_bool(query, "config")
        offset = go_int(query, "offset")
        limit = go_int(query, "limit")
        leader = go_bool(query, "leader-only")
        raft = go_bool(query, "raft")
        stream_leader = go_bool(query, "stream-leader-only")
        return cls(
            text(query, "acc"), accounts, streams, consumers, direct, config,
            leader, offset, limit, raft, stream_leader,
        )  # fmt: skip


def build_jsz(feed: StatisticsFeed, options: JszOptions) -> dict[str, Any]:
    """The `/jsz` body; raises `NotHere` for `leader_only` without JetStream."""
    offset = max(options.offset, 0)
    limit = options.limit or JSZ_LIMIT_DEFAULT
    streams = options.streams or options.consumers
    accounts = options.accounts or (streams and not options.account)
    reports = feed.jetstream_accounts(
        streams=streams, consumers=options.consumers, config=options.config
    )
    now = rfc3339_nano(time.time())
    if reports is None:
        if options.leader_only:
            raise NotHere("filtered response: not leader")
        return {
            **_usage(None),
            "server_id": feed.server_id,
            "now": now,
            "disabled": True,
            "config": {"max_memory": 0, "max_storage": 0},
            **dict.fromkeys(("streams", "consumers", "messages", "bytes", "total"), 0),
        }
    stats = feed.statistics()["jetstream_stats"]
    doc: dict[str, Any] = {
        **_usage(stats),
        "server_id": feed.server_id,
        "now": now,
        "config": jetstream_config(feed.settings),
        "limits": jetstream_limits(feed.settings),
    }
    totals = {
        "streams": sum(r.streams for r in reports),
        "consumers": sum(r.consumers for r in reports),
    }
    doc["streams"] = totals["streams"]
    if options.raft and totals["streams"]:
        doc["streams_leader"] = totals["streams"]
    doc["consumers"] = totals["consumers"]
    if options.raft and totals["consumers"]:
        doc["consumers_leader"] = totals["consumers"]
    doc["messages"] = sum(r.messages for r in reports)
    doc["bytes"] = sum(r.bytes for r in reports)
    chosen = [r for r in reports if r.name == options.account]
    if not chosen and accounts:
        chosen = sorted(reports, key=lambda r: r.name)[offset:][:limit]
    if chosen:
        doc["account_details"] = [_account(r, options) for r in chosen]
    doc["total"] = len(reports)
    return doc


def build_jsz_account(feed: StatisticsFeed, options: JszOptions) -> dict[str, Any]:
    """One account's `AccountDetail` (`$SYS.REQ.ACCOUNT.<account>.JSZ`); raises
    `BadParameter` with nats-server's reason when there is none."""
    streams = options.streams or options.consumers
    reports = feed.jetstream_accounts(
        streams=streams, consumers=options.consumers, config=options.config
    )
    if reports is None:
        raise BadParameter("jetstream not enabled")
    for report in reports:
        if report.name == options.account:
            return _account(report, options)
    raise BadParameter(f"account {_go_quote(options.account)} not found")


def _go_quote(value: str) -> str:
    """Go's `%q` of a plain string."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _usage(stats: dict[str, Any] | None) -> dict[str, Any]:
    """`JetStreamStats`: zeros when JetStream is off."""
    if stats is None:
        return {
            **dict.fromkeys(("memory", "storage", "reserved_memory", "reserved_storage"), 0),
            "accounts": 0,
            "ha_assets": 0,
            "api": {"level": 0, "total": 0, "errors": 0},
        }
    return dict(stats)


def jetstream_config(settings: Settings) -> dict[str, Any]:
    """`JetStreamConfig`: the limits, the store, how it syncs; Brook's API decoding is
    strict as nats-server's."""
    js = settings.jetstream
    config: dict[str, Any] = {
        "max_memory": js.max_memory_store_bytes,
        "max_storage": js.max_file_store_bytes,
        "store_dir": js.store_path,
    }
    # nats-server shows its interval (2 min unless set) in "always" mode too.
    config["sync_interval"] = seconds_to_ns(js.sync_interval_s or _SYNC_INTERVAL_S)
    if not js.sync_interval_s:  # every PubAck waits for its fsync (ADR 0004)
        config["sync_always"] = True
    if js.domain:
        config["domain"] = js.domain
    config["strict"] = True
    return config


def jetstream_limits(settings: Settings) -> dict[str, Any]:
    """`JSLimitOpts`: the batch limits that were configured under `jetstream { limits {
    batch {} } }` (nats-server omits the others)."""
    js = settings.jetstream
    out: dict[str, Any] = {}
    if js.batch_max_inflight_per_stream is not None:
        out["max_batch_inflight_per_stream"] = js.batch_max_inflight_per_stream
    if js.batch_max_inflight_total is not None:
        out["max_batch_inflight_total"] = js.batch_max_inflight_total
    if js.batch_max_msgs != limits.ATOMIC_BATCH_SIZE_MAX:
        out["max_batch_size"] = js.batch_max_msgs
    if js.batch_timeout_s != limits.ATOMIC_BATCH_TIMEOUT_NS / 1e9:
        out["max_batch_timeout"] = seconds_to_ns(js.batch_timeout_s)
    return out


def _account(report: JetStreamAccountReport, options: JszOptions) -> dict[str, Any]:
    """nats-server's `AccountDetail`; an account's own API level is not kept (0)."""
    detail: dict[str, Any] = {
        "name": report.name,
        "id": report.name,
        "memory": report.memory,
        "storage": report.storage,
        "reserved_memory": report.reserved_memory % _UINT64,
        "reserved_storage": report.reserved_storage % _UINT64,
        "accounts": 0,
        "ha_assets": 0,
        "api": {"level": 0, "total": report.api_total, "errors": report.api_errors},
    }
    streams = []
    for stream in report.details:
        out = dict(stream.detail)
        if stream.consumers:
            out["consumer_detail"] = stream.consumers
        if options.direct_consumers and stream.direct_consumers:
            out["direct_consumer_detail"] = stream.direct_consumers
        # nats-server's order: mirror and sources after the consumers
        for key in ("mirror", "sources"):
            if key in out:
                out[key] = out.pop(key)
        streams.append(out)
    if streams:
        detail["stream_detail"] = streams
    return detail
