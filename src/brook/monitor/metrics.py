"""Prometheus `/metrics`: the monitoring documents as metric families (ADR 0040).

Dashboards for NATS are written against prometheus-nats-exporter, which polls a server's
`/varz`, `/connz`, `/accstatz`, `/leafz` and `/jsz` and turns them into metrics; Brook
serves the same names with the same labels itself, so those dashboards work without an
exporter beside each server (docs/monitoring.md lists every name):

* `gnatsd_varz_*` is every number of `/varz`, flattened by the exporter's rule (nested
  keys joined by `_`: `jetstream.stats.memory` is `gnatsd_varz_jetstream_stats_memory`),
  the string of a few keys as a `value` label or, for a time, in Unix milliseconds;
* `gnatsd_connz_*` the client connections' totals, `gnatsd_accstatz_*` each account's
  connections and traffic, `gnatsd_leafz_*` each leafnode connection;
* `jetstream_server_*`, `jetstream_account_*`, `jetstream_stream_*` and
  `jetstream_consumer_*` JetStream's totals, each account's usage and limits, each
  stream's state, limits, mirror and sources, each consumer's progress.

All are gauges, as the exporter reports them: prometheus-client writes a counter `x` as
`x_total`, which is not the name dashboards ask for (PromQL's `rate()` reads a gauge that
only grows the same way). Labels the exporter would send empty are left out, which is
the same to Prometheus (an empty label is an absent one) and keeps a scrape of thousands
of consumers small. prometheus-client's own process, platform and garbage-collector
collectors add the standard `process_*` and `python_*` families.

`BrookCollector` is a custom collector: nothing is counted on the hot path and nothing
kept in sync; each scrape takes fresh snapshots from the `StatisticsFeed`, as the JSON
endpoints do, and builds the families from them. `per_consumer=False` leaves out the
consumers' series (the stream's `consumer_count` stays), for servers with so many
consumers that their series cost more than they tell.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client.exposition import choose_encoder
from prometheus_client.gc_collector import GCCollector
from prometheus_client.metrics_core import Metric
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector, CollectorRegistry

from brook.monitor.accstatz import build_accstatz
from brook.monitor.durations import rfc3339_seconds
from brook.monitor.jsz import jetstream_config
from brook.server.statistics import JetStreamAccountReport, StatisticsFeed, StreamReport

__all__ = ["BrookCollector", "MetricsExporter"]

Labels = dict[str, str]

_UINT64 = 2**64  # Go's uint64 of an account's -1 ("no limit") reservation, as /jsz shows it

# /varz keys left out: maps keyed by account or stream names (metric names without
# bound), and the exporter's own omission of `leaf`.
_VARZ_SKIPPED = frozenset({"brook_accounts", "damaged_streams", "leaf"})
_UNDERSCORES = re.compile("_+")
# The string keys the exporter keeps: a time in Unix milliseconds, else a `value` label.
_VARZ_STRINGS = frozenset(
    {"server_id", "server_name", "version", "domain", "leader", "name", "start"}
    | {"config_load_time"}
)


class _Families:
    """Gauge families by name, filled sample by sample; labels may differ per sample."""

    def __init__(self, prefix: str, helps: dict[str, str]) -> None:
        self._families = {
            name: Metric(prefix + name, text, "gauge") for name, text in helps.items()
        }

    def add(self, name: str, labels: Labels, value: float) -> None:
        family = self._families[name]
        family.add_sample(family.name, labels, value)

    def __iter__(self) -> Iterator[Metric]:
        return iter(self._families.values())


_JS_SERVER = {
    "jetstream_disabled": "1 when JetStream is off",
    "total_streams": "Streams of every account",
    "total_consumers": "Consumers of every account",
    "total_messages": "Messages stored by every account's streams",
    "total_message_bytes": "Bytes stored by every account's streams",
    "max_memory": "JetStream's memory limit in bytes (-1: none)",
    "max_storage": "JetStream's file storage limit in bytes (-1: none)",
}
_JS_ACCOUNT = {
    "max_memory": "The account's JetStream memory reservation in bytes",
    "max_storage": "The account's JetStream storage reservation in bytes",
    "memory_used": "Bytes the account's memory streams hold",
    "storage_used": "Bytes the account's file streams hold",
}
_JS_STREAM = {
    "total_messages": "Messages in the stream",
    "total_bytes": "Bytes of the stream's messages",
    "first_seq": "The stream's first sequence",
    "last_seq": "The stream's last sequence",
    "consumer_count": "The stream's consumers",
    "subject_count": "Distinct subjects in the stream",
    "limit_bytes": "The stream's max_bytes (-1: none)",
    "limit_messages": "The stream's max_msgs (-1: none)",
    "source_lag": "Messages a source of the stream is behind",
    "source_active_duration_ns": "Nanoseconds since a source was last active (-1: inactive)",
    "mirror_lag": "Messages the stream's mirror is behind",
    "mirror_active_duration_ns": "Nanoseconds since the mirror was last active (-1: inactive)",
}
_JS_CONSUMER = {
    "delivered_consumer_seq": "The consumer sequence last delivered",
    "delivered_stream_seq": "The stream sequence last delivered",
    "last_delivery_seconds": "Seconds since the last delivery",
    "last_ack_seconds": "Seconds since the ack floor last moved",
    "num_ack_pending": "Messages delivered and not yet acknowledged",
    "num_redelivered": "Messages delivered more than once and not yet acknowledged",
    "num_waiting": "Pull requests waiting",
    "num_pending": "Messages matching the consumer not yet delivered",
    "ack_floor_stream_seq": "The stream sequence of the ack floor",
    "ack_floor_consumer_seq": "The consumer sequence of the ack floor",
}
_CONNZ = {
    "num_connections": "Client connections",
    "total": "Client connections",
    "pending_bytes": "Bytes queued to clients, all connections",
    "subscriptions": "Subscriptions of all client connections",
    "in_msgs": "Messages received from the connected clients",
    "out_msgs": "Messages sent to the connected clients",
    "in_bytes": "Bytes received from the connected clients",
    "out_bytes": "Bytes sent to the connected clients",
}
_ACCSTATZ = {
    "current_connections": "The account's client connections",
    "total_connections": "The account's client and leafnode connections",
    "subscriptions": "Subscriptions in the account",
    "leaf_nodes": "The account's leafnode connections",
    "sent_messages": "Messages the account's connections were sent",
    "sent_bytes": "Bytes the account's connections were sent",
    "received_messages": "Messages the account's connections sent",
    "received_bytes": "Bytes the account's connections sent",
    "slow_consumers": "The account's slow consumers",
}
_LEAFZ = {
    "info": "1 per leafnode connection",
    "conn_rtt": "Round-trip time of the leafnode connection in seconds",
    "conn_in_msgs": "Messages received over the leafnode connection",
    "conn_out_msgs": "Messages sent over the leafnode connection",
    "conn_in_bytes": "Bytes received over the leafnode connection",
    "conn_out_bytes": "Bytes sent over the leafnode connection",
    "conn_subscriptions_total": "Subscriptions the other side showed interest in",
}


class BrookCollector(Collector):
    """The metric families of one server, built at each scrape from its snapshots.

    `varz` returns the `/varz` document (the monitoring server's own builder, so that
    both agree and neither repeats the other).
    """

    def __init__(
        self,
        feed: StatisticsFeed,
        varz: Callable[[], dict[str, Any]],
        *,
        per_consumer: bool = True,
    ) -> None:
        self.feed = feed
        self.varz = varz
        self.per_consumer = per_consumer

    def collect(self) -> Iterable[Metric]:
        server_id = self.feed.server_id
        varz = self.varz()
        yield from _varz(varz, server_id)
        yield from self._connz(server_id)
        yield from self._accstatz(server_id)
        yield from self._leafz(server_id)
        yield from self._jetstream(varz)

    def _connz(self, server_id: str) -> Iterator[Metric]:
        out = _Families("gnatsd_connz_", _CONNZ)
        labels = {"server_id": server_id}
        conns = self.feed.connections()
        out.add("num_connections", labels, len(conns))
        out.add("total", labels, len(conns))
        out.add("pending_bytes", labels, sum(c.pending_bytes for c in conns))
        out.add("subscriptions", labels, sum(c.subs for c in conns))
        for field in ("in_msgs", "out_msgs", "in_bytes", "out_bytes"):
            out.add(field, labels, sum(getattr(c, field) for c in conns))
        return iter(out)

    def _accstatz(self, server_id: str) -> Iterator[Metric]:
        out = _Families("gnatsd_accstatz_", _ACCSTATZ)
        for stat in build_accstatz(self.feed, [], include_unused=True)["account_statz"]:
            name = stat["acc"]
            labels = {
                "server_id": server_id,
                "account": name,
                "account_id": name,
                "account_name": stat["name"],
            }
            out.add("current_connections", labels, stat["conns"])
            out.add("total_connections", labels, stat["total_conns"])
            out.add("subscriptions", labels, stat["num_subscriptions"])
            out.add("leaf_nodes", labels, stat["leafnodes"])
            out.add("sent_messages", labels, stat["sent"]["msgs"])
            out.add("sent_bytes", labels, stat["sent"]["bytes"])
            out.add("received_messages", labels, stat["received"]["msgs"])
            out.add("received_bytes", labels, stat["received"]["bytes"])
            out.add("slow_consumers", labels, stat["slow_consumers"])
        return iter(out)

    def _leafz(self, server_id: str) -> Iterator[Metric]:
        out = _Families("gnatsd_leafz_", _LEAFZ)
        leafs = self.feed.leaf_connections()
        nodes = Metric("gnatsd_leafz_conn_nodes_total", "Leafnode connections", "gauge")
        nodes.add_sample(nodes.name, {"server_id": server_id}, len(leafs))
        yield nodes
        for leaf in leafs:
            labels = {
                "server_id": server_id,
                "account": leaf.account,
                "account_id": leaf.account,
                "ip": leaf.ip,
                "port": str(leaf.port),
                "name": leaf.name,
            }
            out.add("info", labels, 1)
            out.add("conn_rtt", labels, leaf.rtt_s or 0.0)
            out.add("conn_in_msgs", labels, leaf.in_msgs)
            out.add("conn_out_msgs", labels, leaf.out_msgs)
            out.add("conn_in_bytes", labels, leaf.in_bytes)
            out.add("conn_out_bytes", labels, leaf.out_bytes)
            out.add("conn_subscriptions_total", labels, len(leaf.subscriptions))
        yield from out

    def _jetstream(self, varz: dict[str, Any]) -> Iterator[Metric]:
        server = _Families("jetstream_server_", _JS_SERVER)
        accounts = _Families("jetstream_account_", _JS_ACCOUNT)
        streams = _Families("jetstream_stream_", _JS_STREAM)
        consumers = _Families("jetstream_consumer_", _JS_CONSUMER)
        reports = self.feed.jetstream_accounts(
            streams=True, consumers=self.per_consumer, config=True
        )
        labels = {
            "server_id": self.feed.server_id,
            "server_name": varz["server_name"],
            "is_meta_leader": "true",  # a server is its own meta leader
        }
        config = jetstream_config(self.feed.settings) if reports is not None else {}
        if config.get("domain"):
            labels["domain"] = config["domain"]
        reports = reports or []
        server.add("jetstream_disabled", labels, 0 if config else 1)
        server.add("max_memory", labels, config.get("max_memory", 0))
        server.add("max_storage", labels, config.get("max_storage", 0))
        server.add("total_streams", labels, sum(r.streams for r in reports))
        server.add("total_consumers", labels, sum(r.consumers for r in reports))
        server.add("total_messages", labels, sum(r.messages for r in reports))
        server.add("total_message_bytes", labels, sum(r.bytes for r in reports))
        for report in reports:
            _account(accounts, streams, consumers, report, labels)
        yield from server
        yield from accounts
        yield from streams
        if self.per_consumer:
            yield from consumers


def _account(
    accounts: _Families,
    streams: _Families,
    consumers: _Families,
    report: JetStreamAccountReport,
    server: Labels,
) -> None:
    """One account's series, and its streams' and consumers'."""
    name = report.name
    labels = {**server, "account": name, "account_name": name, "account_id": name}
    accounts.add("max_memory", labels, report.reserved_memory % _UINT64)
    accounts.add("max_storage", labels, report.reserved_storage % _UINT64)
    accounts.add("memory_used", labels, report.memory)
    accounts.add("storage_used", labels, report.storage)
    for stream in report.details:
        _stream(streams, consumers, stream, labels)


def _stream(
    streams: _Families, consumers: _Families, report: StreamReport, account: Labels
) -> None:
    detail = report.detail
    labels = {**account, "stream_name": detail["name"], "is_stream_leader": "true"}
    state, config = detail["state"], detail.get("config", {})
    streams.add("total_messages", labels, state["messages"])
    streams.add("total_bytes", labels, state["bytes"])
    streams.add("first_seq", labels, state["first_seq"])
    streams.add("last_seq", labels, state["last_seq"])
    streams.add("consumer_count", labels, state["consumer_count"])
    streams.add("subject_count", labels, state.get("num_subjects", 0))
    if config:
        streams.add("limit_bytes", labels, config["max_bytes"])
        streams.add("limit_messages", labels, config["max_msgs"])
    origins = [("source", s) for s in detail.get("sources", ())]
    if mirror := detail.get("mirror"):
        origins.append(("mirror", mirror))
    for kind, origin in origins:
        at = dict(labels)
        at[f"{kind}_name"] = origin["name"]
        external = origin.get("external") or {}
        if external.get("api"):
            at[f"{kind}_api"] = external["api"]
        if external.get("deliver"):
            at[f"{kind}_deliver"] = external["deliver"]
        streams.add(f"{kind}_lag", at, origin.get("lag", 0))
        streams.add(f"{kind}_active_duration_ns", at, origin.get("active", -1))
    for info in report.consumers:
        _consumer(consumers, info, labels)


def _consumer(consumers: _Families, info: dict[str, Any], stream: Labels) -> None:
    labels = {**stream, "consumer_name": info["name"], "is_consumer_leader": "true"}
    if description := info.get("config", {}).get("description"):
        labels["consumer_desc"] = description
    delivered, floor = info["delivered"], info["ack_floor"]
    now = rfc3339_seconds(info["ts"])
    if "last_active" in delivered:
        consumers.add(
            "last_delivery_seconds", labels, now - rfc3339_seconds(delivered["last_active"])
        )
    if "last_active" in floor:
        consumers.add("last_ack_seconds", labels, now - rfc3339_seconds(floor["last_active"]))
    consumers.add("delivered_consumer_seq", labels, delivered["consumer_seq"])
    consumers.add("delivered_stream_seq", labels, delivered["stream_seq"])
    consumers.add("num_ack_pending", labels, info["num_ack_pending"])
    consumers.add("num_redelivered", labels, info["num_redelivered"])
    consumers.add("num_waiting", labels, info["num_waiting"])
    consumers.add("num_pending", labels, info["num_pending"])
    consumers.add("ack_floor_stream_seq", labels, floor["stream_seq"])
    consumers.add("ack_floor_consumer_seq", labels, floor["consumer_seq"])


def _varz(varz: dict[str, Any], server_id: str) -> Iterator[Metric]:
    """`/varz` flattened as the exporter flattens it: every number a gauge named by its
    path, booleans and lists left out, a few strings kept. Each one's help is its path."""
    labels = {"server_id": server_id}

    def walk(doc: dict[str, Any], name: str, path: str) -> Iterator[Metric]:
        for key, value in doc.items():
            if key in _VARZ_SKIPPED or isinstance(value, bool):
                continue
            # the exporter's fqName: "/" as "_" (http_req_stats' paths), no "__", no "_" at the end
            at = _UNDERSCORES.sub("_", f"{name}_{key}".replace("/", "_")).rstrip("_")
            where = f"{path}.{key}" if path else key
            if isinstance(value, dict):
                yield from walk(value, at, where)
            elif isinstance(value, int | float):
                family = Metric(at, f"/varz {where}", "gauge")
                family.add_sample(at, labels, value)
                yield family
            elif isinstance(value, str) and key in _VARZ_STRINGS:
                yield _varz_string(at, where, value, labels)

    return walk(varz, "gnatsd_varz", "")


def _varz_string(name: str, where: str, value: str, labels: Labels) -> Metric:
    """A time (RFC3339) as Unix milliseconds, as the exporter has it; else 1 with the
    string in a `value` label."""
    try:
        ms = round(rfc3339_seconds(value) * 1000)
    except ValueError:
        family = Metric(name, f"/varz {where}, in the value label", "gauge")
        family.add_sample(name, {**labels, "value": value}, 1)
    else:
        family = Metric(name, f"/varz {where}, Unix milliseconds", "gauge")
        family.add_sample(name, labels, ms)
    return family


class MetricsExporter:
    """What `/metrics` serves: Brook's collector and prometheus-client's process,
    platform and garbage-collector ones, in a registry of this server's own (two
    servers in one process each have theirs)."""

    def __init__(
        self,
        feed: StatisticsFeed,
        varz: Callable[[], dict[str, Any]],
        *,
        per_consumer: bool = True,
    ) -> None:
        # No auto-describe: registering would otherwise collect once to learn the names.
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(BrookCollector(feed, varz, per_consumer=per_consumer))
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)

    def render(self, accept: str = "") -> tuple[bytes, str]:
        """The exposition and its content type: Prometheus text 0.0.4, or OpenMetrics
        when the `Accept` header asks for it."""
        encoder, content_type = choose_encoder(accept)
        return encoder(self.registry), content_type
