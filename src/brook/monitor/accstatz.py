"""The `/accstatz` document: each account's connections, subscriptions and traffic.

Mirrors nats-server's `AccountStatz` (server/monitor.go): the accounts with client
connections here, or every account with `unused`, or those named (`$SYS` requests); each
an `AccountStat` (no routes nor gateways in Brook, so those counts are 0; its leafnode
connections counted apart and in the totals, as nats-server's), its `sent` and `received`
counted since the server started, closed connections included.
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
        if name in known and (mine or known[name].leafnodes or include_unused):
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
    closed, leaf = account.closed_traffic, account.leaf_traffic
    received = {
        "msgs": closed[0] + leaf[0] + sum(c.in_msgs for c in connections),
        "bytes": closed[1] + leaf[1] + sum(c.in_bytes for c in connections),
    }
    sent = {
        "msgs": closed[2] + leaf[2] + sum(c.out_msgs for c in connections),
        "bytes": closed[3] + leaf[3] + sum(c.out_bytes for c in connections),
    }
    leafs_in = {"msgs": leaf[0], "bytes": leaf[1]}
    leafs_out = {"msgs": leaf[2], "bytes": leaf[3]}
    return {
        "acc": name,
        "name": name,
        "conns": len(connections),
        "leafnodes": account.leafnodes,
        "total_conns": len(connections) + account.leafnodes,
        "num_subscriptions": subs,
        "sent": {**sent, "gateways": none, "routes": none, "leafs": leafs_out},
        "received": {**received, "gateways": none, "routes": none, "leafs": leafs_in},
        "slow_consumers": 0,
    }
