"""The `/routez` and `/gatewayz` documents of a server that has neither routes nor gateways.

Brook runs alone (no `cluster {}` or `gateway {}` block), so these are nats-server's
answers for such a server (server/monitor.go `Routez`, `Gatewayz`): the same keys and
types, with no route and no gateway in them, so that tools that poll every endpoint
(nats-top, prometheus-nats-exporter, `nats server report`) read them as they read
nats-server's. The options are read and refused as nats-server reads them (`subs`,
`subs=detail`; `/gatewayz`'s `accs`, `gw_name`, `acc_name`), though with nothing to list
they change nothing.
"""

from __future__ import annotations

import time
from typing import Any

from brook.monitor.durations import rfc3339_nano
from brook.monitor.params import decode_subs, go_bool, text
from brook.server.statistics import StatisticsFeed

__all__ = ["build_gatewayz", "build_routez"]


def build_routez(feed: StatisticsFeed, query: dict[str, list[str]]) -> dict[str, Any]:
    decode_subs(query)
    return {
        "server_id": feed.server_id,
        "server_name": feed.settings.server_name or feed.server_id,
        "now": rfc3339_nano(time.time()),
        "num_routes": 0,
        "routes": [],
    }


def build_gatewayz(feed: StatisticsFeed, query: dict[str, list[str]]) -> dict[str, Any]:
    decode_subs(query)
    go_bool(query, "accs")
    text(query, "gw_name")
    text(query, "acc_name")
    return {
        "server_id": feed.server_id,
        "now": rfc3339_nano(time.time()),
        "outbound_gateways": {},
        "inbound_gateways": {},
    }
