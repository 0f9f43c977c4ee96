"""The `/subsz` document: the subscription indexes' statistics, and their subscriptions.

Mirrors nats-server's `Subsz` (server/monitor.go): the statistics of every account's index
added up (`SublistStats`: counts, the cache hit rate and the fan-out of cached results),
and with `subs` the subscriptions themselves, every account's (the server's own, such as
JetStream's, included, as nats-server lists its internal clients'), optionally only those
a publish on the literal subject `test` would reach and those of account `acc`, paged by
`offset` and `limit` (default 1024). `total` counts the listed subscriptions before the
page, and is 0 without `subs`.

The options come from a query string (`/subsz`) or a JSON body (`$SYS.REQ.*.SUBSZ`,
nats-server's `SubszOptions`); both build a `SubszOptions`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from brook import subjects
from brook.monitor.durations import go_number, rfc3339_nano
from brook.monitor.params import BadParameter, go_bool, go_int, text
from brook.server.statistics import StatisticsFeed

__all__ = ["SUBSZ_LIMIT_DEFAULT", "SubszOptions", "build_subsz", "sublist_statistics"]

SUBSZ_LIMIT_DEFAULT = 1024  # nats-server's DefaultSubListSize


@dataclass(slots=True)
class SubszOptions:
    subscriptions: bool = False
    offset: int = 0
    limit: int = 0
    account: str = ""
    test: str = ""

    @classmethod
    def from_query(cls, query: dict[str, list[str]]) -> SubszOptions:
        """`?subs=&offset=&limit=&test=&acc=`, checked in nats-server's order."""
        subs = go_bool(query, "subs")
        offset = go_int(query, "offset")
        limit = go_int(query, "limit")
        return cls(subs, offset, limit, text(query, "acc"), text(query, "test"))


def build_subsz(feed: StatisticsFeed, options: SubszOptions) -> dict[str, Any]:
    """The `/subsz` body; raises `BadParameter` for a `test` subject that is not literal."""
    offset = max(options.offset, 0)
    limit = options.limit if options.limit > 0 else SUBSZ_LIMIT_DEFAULT
    test = options.test.encode()
    if options.test and not subjects.is_valid_literal_subject(test):
        raise BadParameter(f"invalid test subject, must be valid publish subject: {options.test}")
    sublists = feed.sublists(options.account, details=options.subscriptions)
    doc: dict[str, Any] = {
        "server_id": feed.server_id,
        "now": rfc3339_nano(time.time()),
        **sublist_statistics([s.stats for s in sublists]),
    }
    details = []
    if options.subscriptions:
        for sublist in sublists:
            for sub in sublist.subscriptions:
                if options.test and not subjects.matches(sub.subject.encode(), test):
                    continue
                detail: dict[str, Any] = {
                    "account": sub.account,
                    "account_tag": sub.account,
                    "subject": sub.subject,
                }
                if sub.queue:
                    detail["qgroup"] = sub.queue
                detail |= {"sid": sub.sid, "msgs": sub.msgs}
                if sub.max:
                    detail["max"] = sub.max
                detail["cid"] = sub.cid
                details.append(detail)
    doc |= {"total": len(details), "offset": offset, "limit": limit}
    page = details[offset : offset + limit]
    if page:
        doc["subscriptions_list"] = page
    return doc


def sublist_statistics(indexes: list[Mapping[str, int]]) -> dict[str, Any]:
    """nats-server's `SublistStats` of subscription indexes added up (`SublistStats.add`):
    counts summed, the largest fan-out, the rates from the summed counts."""
    totals = dict.fromkeys(
        ("num_subscriptions", "num_cache", "num_inserts", "num_removes", "num_matches"), 0
    )
    hits = fanout = max_fanout = 0
    for stats in indexes:
        for key in totals:
            totals[key] += stats[key]
        hits += stats["cache_hits"]
        fanout += stats["total_fanout"]
        max_fanout = max(max_fanout, stats["max_fanout"])
    matches, cached = totals["num_matches"], totals["num_cache"]
    return {
        **totals,
        "cache_hit_rate": go_number(hits / matches if matches else 0),
        "max_fanout": max_fanout,
        "avg_fanout": go_number(fanout / cached if fanout else 0),
    }
