"""The `/leafz` document: the leafnode connections, either role (ADR 0032).

Mirrors nats-server's `Leafz` (server/monitor.go): each connection's id, the server at
the other end, whether this side dialled (`is_spoke`), its account, address, round-trip
time, traffic and how many subscriptions the other side showed (their subjects with
`subs=1`); `acc` keeps one account's. Brook's connections are never compressed, so
`compression` is "off".
"""

from __future__ import annotations

import time
from typing import Any

from brook.monitor.durations import rfc3339_nano, rtt_string
from brook.server.statistics import LeafSnapshot, StatisticsFeed

__all__ = ["build_leafz"]


def build_leafz(feed: StatisticsFeed, *, subs: bool, account: str) -> dict[str, Any]:
    leafs = [_leaf(c, subs) for c in feed.leaf_connections() if not account or c.account == account]
    return {
        "server_id": feed.server_id,
        "now": rfc3339_nano(time.time()),
        "leafnodes": len(leafs),
        "leafs": leafs,
    }


def _leaf(c: LeafSnapshot, subs: bool) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "id": c.cid,
        "name": c.name,
        "is_spoke": c.is_spoke,
        "account": c.account,
        "ip": c.ip,
        "port": c.port,
        "rtt": rtt_string(c.rtt_s),
        "in_msgs": c.in_msgs,
        "out_msgs": c.out_msgs,
        "in_bytes": c.in_bytes,
        "out_bytes": c.out_bytes,
        "subscriptions": len(c.subscriptions),
    }
    if subs:
        doc["subscriptions_list"] = list(c.subscriptions)
    doc["compression"] = "off"
    return doc
