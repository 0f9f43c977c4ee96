"""The request side of the system account's services (system.py): a `$SYS` request's
body read as nats-server reads it (Go's JSON errors for a body of the wrong shape, its
options structs, its event filter), and the documents only requests ask for (`LEAFZ`,
`ROUTEZ`, `GATEWAYZ`, `RAFTZ`) built from those options. Apart from system.py so that
the services there are about subscribing, answering and events."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import Any, TypeVar

from brook.monitor.clusterz import build_gatewayz, build_routez
from brook.monitor.leafz import build_leafz
from brook.server.statistics import (
    AccountSnapshot,
    ClosedConnection,
    ConnectionSnapshot,
    JetStreamAccountReport,
    JetStreamAssets,
    LeafSnapshot,
    ServerStatistics,
    StatisticsFeed,
    SublistSnapshot,
    SubscriptionSnapshot,
    UserSnapshot,
)

T = TypeVar("T")


class Failed(Exception):
    """A request nats-server answers with `{"code", "description"}` in its envelope."""

    def __init__(self, code: int, description: str) -> None:
        super().__init__(description)
        self.code = code
        self.description = description


def decode(payload: bytes) -> dict[str, Any]:
    """A request's options: none for an empty body, else a JSON object (Go's error text
    for the commonest mistake, a body that is not JSON at all)."""
    text = payload.decode("utf-8", "replace").strip()
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        if text[0] not in '{["-0123456789tfn':
            error = f"invalid character {text[0]!r} looking for beginning of value"
            raise Failed(400, error) from None
        raise Failed(400, "unexpected end of JSON input") from None
    if not isinstance(value, dict):
        kind = {list: "array", str: "string", bool: "bool"}.get(type(value), "number")
        raise Failed(400, f"json: cannot unmarshal {kind} into Go value of type struct")
    return value


def read_options(cls: type[T], body: dict[str, Any], names: dict[str, str]) -> T:
    """A dataclass of options from nats-server's JSON names (`names`: field -> JSON key)."""
    values: dict[str, Any] = {}
    for field in fields(cls):  # type: ignore[arg-type]
        key = names.get(field.name, field.name)
        if key in body:
            value = body[key]
            expected = type(field.default)
            whole = expected is int and type(value) is float and value.is_integer()
            if type(value) is not expected and not whole:
                raise Failed(400, f"json: cannot unmarshal into Go struct field .{key}")
            values[field.name] = int(value) if whole else value
    return cls(**values)


JSZ_NAMES = {"consumers": "consumer", "direct_consumers": "direct_consumer"}


def text_option(body: dict[str, Any], key: str) -> str:
    value = body.get(key, "")
    if not isinstance(value, str):
        raise Failed(400, f"json: cannot unmarshal into Go struct field .{key} of type string")
    return value


def connz_query(body: dict[str, Any]) -> dict[str, list[str]]:
    """nats-server's `ConnzOptions` JSON as the `/connz` query `build_connz` reads."""
    query: dict[str, list[str]] = {}
    for key in ("sort", "offset", "limit", "cid", "auth", "user", "acc"):
        if key in body and body[key] not in ("", None):
            query[key] = [str(body[key])]
    # nats-server's `ConnState`: 0 open, 1 closed, 2 all
    state = body.get("state")
    if isinstance(state, int) and not isinstance(state, bool) and state in (1, 2):
        query["state"] = ["closed" if state == 1 else "all"]
    if body.get("subscriptions_detail"):
        query["subs"] = ["detail"]
    elif body.get("subscriptions"):
        query["subs"] = ["true"]
    return query


def healthz_query(body: dict[str, Any]) -> dict[str, list[str]]:
    """nats-server's `HealthzOptions` JSON as the `/healthz` query."""
    query: dict[str, list[str]] = {}
    for key, value in body.items():
        if isinstance(value, bool):
            query[key] = ["true" if value else "false"]
        elif isinstance(value, str) and value:
            query[key] = [value]
    return query


class AccountFeed:
    """A feed that shows one account's connections and subscriptions only."""

    def __init__(self, feed: StatisticsFeed, account: str) -> None:
        self._feed = feed
        self.account = account
        self.settings = feed.settings
        self.server_id = feed.server_id

    def statistics(self) -> ServerStatistics:
        return self._feed.statistics()

    def connections(self) -> list[ConnectionSnapshot]:
        return [c for c in self._feed.connections() if c.account == self.account]

    def subscriptions(self, cid: int) -> list[SubscriptionSnapshot]:
        return self._feed.subscriptions(cid)

    def leaf_connections(self) -> list[LeafSnapshot]:
        return [c for c in self._feed.leaf_connections() if c.account == self.account]

    def closed_connections(self) -> list[ClosedConnection]:
        return [c for c in self._feed.closed_connections() if c.connection.account == self.account]

    def jetstream_assets(self) -> list[JetStreamAssets] | None:
        return self._feed.jetstream_assets()

    def jetstream_accounts(
        self, *, streams: bool = False, consumers: bool = False, config: bool = False
    ) -> list[JetStreamAccountReport] | None:
        return self._feed.jetstream_accounts(streams=streams, consumers=consumers, config=config)

    def requester(self, account: str, reply: bytes) -> UserSnapshot | None:
        return self._feed.requester(account, reply)

    def account_snapshots(self) -> list[AccountSnapshot]:
        return self._feed.account_snapshots()

    def sublists(self, account: str = "", *, details: bool = False) -> list[SublistSnapshot]:
        return self._feed.sublists(self.account, details=details)


@dataclass(slots=True)
class LeafzOptions:
    subscriptions: bool = False
    account: str = ""


@dataclass(slots=True)
class RoutezOptions:
    subscriptions: bool = False
    subscriptions_detail: bool = False


@dataclass(slots=True)
class GatewayzOptions:
    name: str = ""
    accounts: bool = False
    account_name: str = ""
    subscriptions: bool = False


@dataclass(slots=True)
class RaftzOptions:
    account: str = ""
    group: str = ""


def leafz(feed: StatisticsFeed, body: dict[str, Any], account: str | None) -> dict[str, Any]:
    """`/leafz` from nats-server's `LeafzOptions`; the account form's account replaces
    the body's."""
    options = read_options(LeafzOptions, body, {})
    account = options.account if account is None else account
    return build_leafz(feed, subs=options.subscriptions, account=account)


def routez(feed: StatisticsFeed, body: dict[str, Any]) -> dict[str, Any]:
    read_options(RoutezOptions, body, {})  # read and refused as nats-server's; none to apply
    return build_routez(feed, {})


def gatewayz(feed: StatisticsFeed, body: dict[str, Any]) -> dict[str, Any]:
    read_options(GatewayzOptions, body, {})
    return build_gatewayz(feed, {})


def raftz(feed: StatisticsFeed, body: dict[str, Any]) -> dict[str, Any]:
    """nats-server's `Raftz` of a server without Raft groups, as Brook always is."""
    read_options(RaftzOptions, body, {})
    return {}


@dataclass(slots=True)
class EventFilter:
    """nats-server's `EventFilterOptions`: which servers a request is for."""

    server_name: str = ""
    cluster: str = ""
    host: str = ""
    exact_match: bool = False
    domain: str = ""

    def excludes(self, name: str, host: str, tags: object, domain: str) -> bool:
        mine = {"server_name": name, "host": host, "cluster": ""}
        for key, value in mine.items():
            wanted = getattr(self, key)
            if wanted and (wanted != value if self.exact_match else wanted not in value):
                return True
        # Brook has no tags; the domain is matched exactly, as in nats-server.
        return bool(tags) or bool(self.domain and self.domain != domain)
