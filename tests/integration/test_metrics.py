"""Prometheus `/metrics` (ADR 0040): scraped over HTTP after real nats-py traffic, read
with prometheus-client's own parser, its figures checked against the traffic and against
the JSON endpoints they come from, under prometheus-nats-exporter's names."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.api import StreamSource
from prometheus_client.parser import text_string_to_metric_families

import brook
from brook.config.conf import parse_conf, settings_from_conf
from brook.monitor.metrics import MetricsExporter
from tests.support import leafnodes
from tests.support.monitor import get, get_json
from tests.support.natsserver import free_port

pytestmark = pytest.mark.timeout(20)

Series = dict[str, list[tuple[dict[str, str], float]]]


async def scrape(srv: Any) -> Series:
    resp = await get(srv, "/metrics")
    assert resp.status == 200
    assert resp.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    series: Series = {}
    for family in text_string_to_metric_families(resp.body.decode()):
        for sample in family.samples:
            series.setdefault(sample.name, []).append((sample.labels, sample.value))
    return series


def value(series: Series, metric: str, **labels: str) -> float:
    """The one sample of `metric` whose labels include `labels`."""
    found = [v for got, v in series.get(metric, []) if labels.items() <= got.items()]
    assert len(found) == 1, (metric, labels, series.get(metric))
    return found[0]


async def test_metrics_follow_traffic_streams_and_consumers(tmp_path: Path) -> None:
    async with brook.serve(port=0, http_port=-1, store_dir=str(tmp_path)) as srv:
        nc = await nats.connect(srv.url)
        try:
            before = await scrape(srv)
            got: list[Any] = []

            async def keep(msg: Any) -> None:
                got.append(msg)

            await nc.subscribe("m.core", cb=keep)
            for _ in range(4):
                await nc.publish("m.core", b"0123456789")
            await nc.flush()

            js = nc.jetstream()
            await js.add_stream(name="ORDERS", subjects=["orders.>"])
            await js.add_stream(name="GONE", subjects=["gone.>"])
            for i in range(5):
                await js.publish(f"orders.{i % 2}", b"x" * 10)
            await js.add_consumer("ORDERS", durable_name="IDLE", description="never read")
            sub = await js.pull_subscribe("orders.>", durable="WORK", stream="ORDERS")
            fetched = await sub.fetch(3, timeout=2)
            await fetched[0].ack()
            await fetched[1].ack_sync()
            gone = await scrape(srv)
            assert value(gone, "jetstream_stream_total_messages", stream_name="GONE") == 0
            await js.delete_stream("GONE")
            await js.add_stream(name="COPY", mirror=StreamSource(name="ORDERS"))
            m = await scrape(srv)
            while value(m, "jetstream_stream_total_messages", stream_name="COPY") < 5:
                await asyncio.sleep(0.02)
                m = await scrape(srv)

            varz = await get_json(srv, "/varz")
            m = await scrape(srv)
        finally:
            await nc.close()

    sid = srv.server_id
    # the server's counters, under the exporter's /varz names and equal to /varz
    assert value(m, "gnatsd_varz_connections", server_id=sid) == 1
    assert value(m, "gnatsd_varz_in_msgs") - value(before, "gnatsd_varz_in_msgs") >= 4 + 5
    for name in ("in_msgs", "out_msgs", "in_bytes", "subscriptions", "total_connections"):
        assert value(m, f"gnatsd_varz_{name}") == varz[name], name
    assert value(m, "gnatsd_varz_jetstream_stats_storage") == varz["jetstream"]["stats"]["storage"]
    assert value(m, "gnatsd_varz_version", value=varz["version"]) == 1
    assert len(got) == 4
    assert value(m, "gnatsd_connz_num_connections") == 1
    assert value(m, "gnatsd_accstatz_current_connections", account="$G") == 1

    # JetStream: the totals, the stream, its consumers; the deleted stream's series gone
    assert value(m, "jetstream_server_jetstream_disabled") == 0
    assert value(m, "jetstream_server_total_streams") == 2
    assert value(m, "jetstream_server_total_consumers") == 2
    assert value(m, "jetstream_server_total_messages") == 10
    orders = {"stream_name": "ORDERS", "account": "$G", "is_stream_leader": "true"}
    assert value(m, "jetstream_stream_total_messages", **orders) == 5
    assert value(m, "jetstream_stream_first_seq", **orders) == 1
    assert value(m, "jetstream_stream_last_seq", **orders) == 5
    assert value(m, "jetstream_stream_consumer_count", **orders) == 2
    assert value(m, "jetstream_stream_subject_count", **orders) == 2
    assert value(m, "jetstream_stream_limit_messages", **orders) == -1
    stored = sum(v for _, v in m["jetstream_stream_total_bytes"])
    assert value(m, "jetstream_server_total_message_bytes") == stored > 0
    assert not [
        labels
        for labels, _ in m["jetstream_stream_total_messages"]
        if labels["stream_name"] == "GONE"
    ]
    assert value(m, "jetstream_stream_mirror_lag", stream_name="COPY", mirror_name="ORDERS") == 0
    assert "jetstream_stream_source_lag" not in m
    work = {"stream_name": "ORDERS", "consumer_name": "WORK"}
    assert value(m, "jetstream_consumer_delivered_stream_seq", **work) == 3
    assert value(m, "jetstream_consumer_num_pending", **work) == 2
    assert value(m, "jetstream_consumer_num_ack_pending", **work) == 1
    assert value(m, "jetstream_consumer_ack_floor_stream_seq", **work) == 2
    assert value(m, "jetstream_consumer_num_redelivered", **work) == 0
    assert value(m, "jetstream_consumer_last_delivery_seconds", **work) >= 0
    idle = {"consumer_name": "IDLE", "consumer_desc": "never read"}
    assert value(m, "jetstream_consumer_num_pending", **idle) == 5
    assert "jetstream_consumer_last_delivery_seconds" not in {
        name
        for name, samples in m.items()
        for labels, _ in samples
        if labels.get("consumer_name") == "IDLE"
    }
    assert value(m, "jetstream_account_storage_used", account="$G") == stored
    assert value(m, "process_resident_memory_bytes") > 0


async def test_consumer_series_off_and_jetstream_off(tmp_path: Path) -> None:
    settings = settings_from_conf(parse_conf("metrics_consumers: false\nhttp_port: -1"))
    async with brook.serve(port=0, store_dir=str(tmp_path), settings=settings) as srv:
        nc = await nats.connect(srv.url)
        try:
            js = nc.jetstream()
            await js.add_stream(name="S", subjects=["s"])
            await js.add_consumer("S", durable_name="C")
            m = await scrape(srv)
        finally:
            await nc.close()
    assert value(m, "jetstream_stream_consumer_count", stream_name="S") == 1
    assert not [name for name in m if name.startswith("jetstream_consumer_")]

    async with brook.serve(port=0, http_port=-1) as srv:
        m = await scrape(srv)
        # OpenMetrics when the client asks for it (prometheus-client's negotiation)
        exporter = MetricsExporter(srv.monitor.feed, lambda: srv.monitor.varz({}))
        body, content_type = exporter.render("application/openmetrics-text; version=1.0.0")
    assert value(m, "jetstream_server_jetstream_disabled") == 1
    assert value(m, "jetstream_server_total_streams") == 0
    assert "jetstream_stream_total_messages" not in m
    assert content_type.startswith("application/openmetrics-text; version=1.0.0")
    assert body.endswith(b"# EOF\n")


async def test_leafnode_connections() -> None:
    leaf_port = free_port()
    hub_conf = f"http_port: -1\n{leafnodes.hub_conf(leaf_port)}"
    async with (
        leafnodes.brook_hub(hub_conf) as hub,
        leafnodes.brook_spoke(leafnodes.spoke_conf(leaf_port)) as spoke,
    ):
        await leafnodes.wait_leaf(spoke)
        await leafnodes.wait_leaf(hub)
        m = await scrape(hub)
    assert value(m, "gnatsd_varz_leafnodes") == 1
    assert value(m, "gnatsd_leafz_conn_nodes_total") == 1
    assert value(m, "gnatsd_leafz_info", account="$G", name=spoke.server_name) == 1
    assert value(m, "gnatsd_accstatz_leaf_nodes", account="$G") == 1
