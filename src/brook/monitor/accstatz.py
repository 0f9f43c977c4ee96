"""The `/accstatz` document: each account's connections, subscriptions and traffic.

Mirrors nats-server's `AccountStatz` (server/monitor.go): the accounts with client
connections here, or every account with `unused`, or those named (`$SYS` requests); each
an `AccountStat` (no leaf nodes, routes nor gateways in Brook, so those counts are 0), its
`sent` and `received` counted since the server started, closed connections included.
Also the body of `$SYS.REQ.ACCOUNT.<a>.CONNS`.
"""

from __future__ import annotations

import time
from typing import Any

from brook.monitor.durations import rfc3339_nano
from brook.server.statistics import AccountSnapshot, ConnectionSnapshot, StatisticsFeed

__all__ = ["account_stat", "build_accstatz"]


def build_accstatz(
    feed: StatisticsFeed, accounts: list[str], *, include_unused: bool
) -> dict[str, Any]:
    """The statistics of `accounts` (all when empty) that have connections, or of all of
    them with `include_unused`."""
    connections = feed.connections()
    known = {a.name: a for a in feed.account_snapshots()}
    stats = []
    for name in accounts or list(known):
        mine = [c for c in connections if c.account == name]
        if name in known and (mine or include_unused):
            stats.append(account_stat(feed, known[name], mine))
    return {
        "server_id": feed.server_id,
        "now": rfc3339_nano(time.time()),
        "account_statz": stats,
    }


def account_stat(
    feed: StatisticsFeed, account: AccountSnapshot, connections: list[ConnectionSnapshot]
) -> dict[str, Any]:
    """nats-server's `AccountStat` of `account`, whose open connections are these."""
    name = account.name
    subs = sum(s.stats["num_subscriptions"] for s in feed.sublists(name))
    none = {"msgs": 0, "bytes": 0}
    closed = account.closed_traffic
    received = {
        "msgs": closed[0] + sum(c.in_msgs for c in connections),
        "bytes": closed[1] + sum(c.in_bytes for c in connections),
    }
    sent = {
        "msgs": closed[2] + sum(c.out_msgs for c in connections),
        "bytes": closed[3] + sum(c.out_bytes for c in connections),
    }
    return {
        "acc": name,
        "name": name,
        "conns": len(connections),
        "leafnodes": 0,
        "total_conns": len(connections),
        "num_subscriptions": subs,
        "sent": {**sent, "gateways": none, "routes": none, "leafs": none},
        "received": {**received, "gateways": none, "routes": none, "leafs": none},
        "slow_consumers": 0,
    }
