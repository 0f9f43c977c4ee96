"""The `/connz` document: a sorted, paged list of client and leafnode connections, open,
closed or both.

Mirrors nats-server 2.x's `Connz` (server/monitor.go): the query parameters `limit`,
`offset`, `sort`, `subs` (`true` or `detail`), `auth`, `cid`, `state` (`open`, `closed`,
`any` or `all`), `acc`, `user` and `mqtt_client`, read by Go's rules and refused with nats-server's
plain-text 400 (`BadParameter`) when malformed; the same sort directions (`stop` and
`reason` for closed connections only); a `cid` lookup answered as a one-entry page; and
per-connection fields with the same names, types (observed durations are Go duration
strings, timestamps RFC3339 UTC) and omit-when-empty rules (`auth=true` adds whom each
client logged in as and the certificates it presented, and its account). Closed
connections come from the server's ring of the last `max_closed_clients`
(`StatisticsFeed.closed_connections`), with their `stop`, `reason` and the
subscriptions they had. nats-server's quirks are kept where a tool could see them: an
unknown `acc` answers an empty document with no server id and `connections: null`, and
closed connections of the global account do not match `acc=$G` (nats-server keeps no
account name for them).

Only the JSON is built here; `brook.monitor.http` serves it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from brook import limits
from brook.monitor.closed import closed_state
from brook.monitor.durations import rfc3339_nano, rtt_string, uptime_string
from brook.monitor.params import BadParameter, decode_subs, go_bool, go_int, go_uint64, text
from brook.server.statistics import (
    ConnectionSnapshot,
    LeafSnapshot,
    StatisticsFeed,
    SubscriptionSnapshot,
)

__all__ = ["HttpError", "build_connz"]

GLOBAL_ACCOUNT = "$G"

# sort option -> (what to compare, descending). Directions follow nats-server: cid and
# start ascending, uptime youngest first, reason alphabetical, every counter and time
# "biggest first"; ties stay in cid order.
_SORTS: dict[str, tuple[str, bool]] = {
    "cid": ("cid", False),
    "start": ("cid", False),
    "subs": ("subs", True),
    "pending": ("pending_bytes", True),
    "msgs_to": ("out_msgs", True),
    "msgs_from": ("in_msgs", True),
    "bytes_to": ("out_bytes", True),
    "bytes_from": ("in_bytes", True),
    "last": ("last_activity", True),
    "idle": ("idle", True),
    "uptime": ("uptime", False),
    "rtt": ("rtt_s", True),
    "stop": ("stop", True),
    "reason": ("reason", False),
}
_CLOSED_ONLY = ("stop", "reason")
_STATES = {"": (True, False), "open": (True, False), "closed": (False, True)}
_STATES |= {"any": (True, True), "all": (True, True)}


class HttpError(Exception):
    """A request the server refuses; `args` are (status, message) for the JSON error body."""


@dataclass(frozen=True, slots=True)
class _Row:
    """One connection to list: open (`stop` None) or closed."""

    conn: ConnectionSnapshot
    stop: float | None = None
    subs: tuple[SubscriptionSnapshot, ...] = ()

    def sort_value(self, what: str, now: float) -> float | str:
        c = self.conn
        end = now if self.stop is None else self.stop
        if what == "idle":
            return end - c.last_activity
        if what == "uptime":
            return end - c.started_at
        if what == "stop":
            return self.stop or 0.0
        if what == "reason":
            return closed_state(c.close_reason) if self.stop is not None else ""
        return float(getattr(c, what) or 0)


def build_connz(server: StatisticsFeed, query: dict[str, list[str]]) -> dict[str, Any]:
    """The `/connz` body for `server`; raises `BadParameter` for a parameter nats-server
    refuses, in its order and words."""
    sort = text(query, "sort") or "cid"
    auth = go_bool(query, "auth")  # nats-server shows authorized users only if asked
    with_subs, detail = decode_subs(query)
    offset = max(0, go_int(query, "offset"))
    limit = go_int(query, "limit")
    if limit <= 0:
        limit = limits.CONNZ_LIMIT_DEFAULT
    limit = min(limit, limits.CONNZ_LIMIT_MAX)
    cid = go_uint64(query, "cid")
    state = text(query, "state")
    if state.lower() not in _STATES:
        raise BadParameter(f"Error decoding state for {state}")
    want_open, want_closed = _STATES[state.lower()]
    user, account = text(query, "user"), text(query, "acc")
    # Brook has no MQTT clients: a filter on an MQTT client id matches no connection.
    mqtt_client = text(query, "mqtt_client")
    if sort not in _SORTS:
        raise BadParameter(f"invalid sorting option: {sort}")
    if sort in _CLOSED_ONLY and want_open:
        raise BadParameter(f"sort by {sort} only valid on closed connections")

    now = time.time()
    if cid:
        limit = 1
    if account and account not in {a.name for a in server.account_snapshots()}:
        # nats-server's lookup failed: the document as it stood, nothing filled in.
        return _document("", now, [], 0, offset, limit, connections=None)
    # nats-server lists its leafnode connections with its clients (`maps.Copy(clist,
    # s.leafs)`), counted in `total`, sorted and paged alike.
    leafs = {leaf.cid: leaf for leaf in server.leaf_connections()}
    opened: list[_Row] = []
    closed: list[_Row] = []
    if want_open:
        listed = server.connections() + [_leaf_connection(leaf) for leaf in leafs.values()]
        opened = [_Row(c) for c in listed if not account or c.account == account]
    if want_closed:
        closed = [
            _Row(_as_connection(cc.connection), cc.stopped_at, cc.subscriptions)
            for cc in server.closed_connections()
            # nats-server keeps no account name for the global account's closed clients
            if not account or _closed_account(cc.connection.account) == account
        ]
    total = len(opened) + len(closed)
    if cid:
        # Open first, then closed: a one-entry page of all connections.
        found = [r for r in opened if r.conn.cid == cid] or [r for r in closed if r.conn.cid == cid]
        rows = found[:1]
        offset = 0
    else:
        rows = [
            r
            for r in opened + closed
            if (not user or r.conn.authorized_user == user) and not mqtt_client
        ]
        what, descending = _SORTS[sort]
        rows.sort(key=lambda r: r.conn.cid)
        if what != "cid":
            rows.sort(key=lambda r: r.sort_value(what, now), reverse=descending)
        rows = rows[offset : offset + limit]
    conns = [_conn_info(server, r, now, with_subs, detail, auth, leafs) for r in rows]
    return _document(server.server_id, now, conns, total, offset, limit, connections=conns)


def _document(
    server_id: str,
    now: float,
    conns: list[dict[str, Any]],
    total: int,
    offset: int,
    limit: int,
    *,
    connections: list[dict[str, Any]] | None,
) -> dict[str, Any]:
    return {
        "server_id": server_id,
        "now": rfc3339_nano(now),
        "num_connections": len(conns),
        "total": total,
        "offset": offset,
        "limit": limit,
        "connections": connections,
    }


def _closed_account(account: str) -> str:
    return "" if account == GLOBAL_ACCOUNT else account


def _as_connection(c: ConnectionSnapshot | LeafSnapshot) -> ConnectionSnapshot:
    return _leaf_connection(c) if isinstance(c, LeafSnapshot) else c


def _leaf_connection(leaf: LeafSnapshot) -> ConnectionSnapshot:
    """A leafnode connection as the client entry nats-server's `ConnInfo.fill` makes of
    it: kind `Leafnode` and no `type`, the CONNECT's `name` and `version` (the accepting
    side's only), no `lang`, its interest as its subscriptions."""
    return ConnectionSnapshot(
        cid=leaf.cid,
        host=leaf.ip,
        port=leaf.port,
        started_at=leaf.started_at,
        last_activity=leaf.last_activity,
        rtt_s=leaf.rtt_s,
        pending_bytes=leaf.pending_bytes,
        in_msgs=leaf.in_msgs,
        in_bytes=leaf.in_bytes,
        out_msgs=leaf.out_msgs,
        out_bytes=leaf.out_bytes,
        subs=len(leaf.interest),
        name=leaf.connect_name,
        lang="",
        version=leaf.connect_version,
        authorized_user=leaf.connect_user,
        account=leaf.account,
        kind="Leafnode",
        name_tag=leaf.account,
        tls_version=leaf.tls_version,
        tls_cipher_suite=leaf.tls_cipher_suite,
        tls_peer_certs=leaf.tls_peer_certs,
        close_reason=leaf.close_reason,
    )


def _conn_info(
    server: StatisticsFeed,
    row: _Row,
    now: float,
    with_subs: bool,
    detail: bool,
    auth: bool,
    leafs: dict[int, LeafSnapshot],
) -> dict[str, Any]:
    c = row.conn
    last = c.last_activity
    end = now if row.stop is None else row.stop  # a closed one's figures stop at its close
    info: dict[str, Any] = {"cid": c.cid, "kind": c.kind}
    if c.kind == "Client":  # nats-server's `clientTypeString`: "" (omitted) for a leaf
        info["type"] = "nats"
    info |= {
        "ip": c.host,
        "port": c.port,
        "start": rfc3339_nano(c.started_at),
        "last_activity": rfc3339_nano(last),
    }
    if row.stop is not None:
        info["stop"] = rfc3339_nano(row.stop)
        info["reason"] = closed_state(c.close_reason)
    info |= {
        "rtt": rtt_string(c.rtt_s),
        "uptime": uptime_string(end - c.started_at),
        "idle": uptime_string(end - last),
        "pending_bytes": c.pending_bytes,
        "in_msgs": c.in_msgs,
        "out_msgs": c.out_msgs,
        "in_bytes": c.in_bytes,
        "out_bytes": c.out_bytes,
        "subscriptions": c.subs,
    }
    # nats-server omits empty strings (Go `omitempty`).
    for field in ("name", "lang", "version"):
        value = getattr(c, field)
        if value:
            info[field] = value
    if c.tls_version:
        info["tls_version"] = c.tls_version
        info["tls_cipher_suite"] = c.tls_cipher_suite
        if auth and c.tls_peer_certs:
            info["tls_peer_certs"] = [
                {"subject": p.subject, "spki_sha256": p.spki_sha256, "cert_sha256": p.cert_sha256}
                for p in c.tls_peer_certs
            ]
        if c.tls_first:
            info["tls_first"] = True
    if auth:  # nats-server names whom a client logged in as, and its account, only then
        if c.authorized_user:
            info["authorized_user"] = c.authorized_user
        if c.account != GLOBAL_ACCOUNT:
            info["account"] = c.account
    leaf = leafs.get(c.cid) if c.kind == "Leafnode" else None
    if not ((with_subs or detail) and c.subs):
        subs: list[SubscriptionSnapshot] = []
    elif row.stop is not None:
        subs = list(row.subs)
    elif leaf is not None:
        subs = list(leaf.interest)
    else:
        subs = server.subscriptions(c.cid)
    if subs and not detail:
        info["subscriptions_list"] = [s.subject for s in subs]
    elif subs:
        details = []
        # A closed connection's were kept with their account (nats-server's `newSubDetail`).
        owner = {"account": c.account, "account_tag": c.name_tag or c.account}
        for s in subs:
            d: dict[str, Any] = dict(owner) if row.stop is not None else {}
            d["subject"] = s.subject
            if s.queue:
                d["qgroup"] = s.queue
            d |= {"sid": s.sid, "msgs": s.msgs}
            if s.max:
                d["max"] = s.max
            d["cid"] = c.cid
            details.append(d)
        info["subscriptions_list_detail"] = details
    if auth:
        if c.jwt and not c.bearer:  # nats-server's `redactBearerJWT`
            info["jwt"] = c.jwt
        if c.issuer_key:
            info["issuer_key"] = c.issuer_key
        # nats-server names a closed connection's tag only outside the global account
        if row.stop is None or c.account != GLOBAL_ACCOUNT:
            info["name_tag"] = c.name_tag or c.account
        if c.tags:
            info["tags"] = list(c.tags)
    return info
