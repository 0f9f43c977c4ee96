"""The `/connz` document: a sorted, paged list of client and leafnode connections.

Mirrors nats-server 2.x's `Connz` (server/monitor.go): the query parameters `limit`,
`offset`, `sort`, `subs` (`true` or `detail`), `auth` and `cid`, read by Go's integer and
`strconv.ParseBool` rules and refused with 400 when malformed; the same sort directions; a
`cid` lookup answered as a one-entry page; and per-connection fields with the same names,
types (observed durations are Go duration strings, timestamps RFC3339 UTC) and
omit-when-empty rules (`auth=true` adds whom each client logged in as and the
certificates it presented, and its account). Fields about features Brook lacks (JWTs) are
left out.

Only the JSON is built here; `brook.monitor.http` serves it and turns an `HttpError` into
an error response. `HttpError` lives here because `/connz` is the only endpoint whose
parameters can be refused.
"""

from __future__ import annotations

import time
from typing import Any

from brook import limits, strconv
from brook.monitor.durations import rfc3339_nano, rtt_string, uptime_string
from brook.server.statistics import (
    ConnectionSnapshot,
    LeafSnapshot,
    StatisticsFeed,
    SubscriptionSnapshot,
)

__all__ = ["HttpError", "build_connz"]

GLOBAL_ACCOUNT = "$G"
_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})

# sort option -> (what to compare, descending). Directions follow nats-server: cid and
# start ascending, every counter and age "biggest first"; ties stay in cid order.
_SORTS: dict[str, tuple[str, bool]] = {
    "cid": ("cid", False),
    "start": ("started_at", False),
    "subs": ("subs", True),
    "pending": ("pending_bytes", True),
    "msgs_to": ("out_msgs", True),
    "msgs_from": ("in_msgs", True),
    "bytes_to": ("out_bytes", True),
    "bytes_from": ("in_bytes", True),
    "last": ("last_activity", True),
    "idle": ("idle", True),
    "uptime": ("uptime", True),
    "rtt": ("rtt_s", True),
}


class HttpError(Exception):
    """A request the server refuses; `args` are (status, message) for the JSON error body."""


def _sort_value(c: ConnectionSnapshot, what: str, now: float) -> float:
    if what == "idle":
        return now - c.last_activity
    if what == "uptime":
        return now - c.started_at
    return float(getattr(c, what) or 0)


def _first(query: dict[str, list[str]], name: str) -> str:
    values = query.get(name)
    return values[0] if values else ""


def _int_param(query: dict[str, list[str]], name: str, default: int) -> int:
    raw = _first(query, name)
    if raw == "":
        return default
    if not strconv.INTEGER.fullmatch(raw):
        raise HttpError(400, f"Error decoding int for '{name}': {raw!r} is not an integer")
    return int(raw)


def _bool_param(query: dict[str, list[str]], name: str) -> bool:
    """Go's strconv.ParseBool, which is what nats-server accepts."""
    raw = _first(query, name)
    if raw == "" or raw in _GO_FALSE:
        return False
    if raw in _GO_TRUE:
        return True
    raise HttpError(400, f"Error decoding boolean for '{name}': {raw!r} is not a boolean")


def build_connz(server: StatisticsFeed, query: dict[str, list[str]]) -> dict[str, Any]:
    """The `/connz` body for `server`; raises `HttpError` for a parameter it refuses."""
    limit = _int_param(query, "limit", limits.CONNZ_LIMIT_DEFAULT)
    if limit <= 0:
        limit = limits.CONNZ_LIMIT_DEFAULT
    limit = min(limit, limits.CONNZ_LIMIT_MAX)
    offset = max(0, _int_param(query, "offset", 0))
    subs_raw = _first(query, "subs")
    detail = subs_raw == "detail"
    with_subs = detail or _bool_param(query, "subs")
    auth = _bool_param(query, "auth")  # nats-server shows authorized users only if asked
    sort = _first(query, "sort") or "cid"
    if sort not in _SORTS:
        raise HttpError(400, f"invalid sorting option: {sort}")
    cid = _int_param(query, "cid", 0)
    if cid < 0:
        raise HttpError(400, f"Error decoding uint64 for 'cid': {cid} is negative")

    now = time.time()
    # nats-server lists its leafnode connections with its clients (`maps.Copy(clist,
    # s.leafs)`), counted in `total`, sorted and paged alike.
    leafs = {leaf.cid: leaf for leaf in server.leaf_connections()}
    listed = server.connections() + [_leaf_connection(leaf) for leaf in leafs.values()]
    total = len(listed)
    if cid:
        # nats-server answers a cid lookup as a one-entry page of all connections.
        selected = [c for c in listed if c.cid == cid]
        offset, limit = 0, 1
    else:
        what, descending = _SORTS[sort]
        ordered = sorted(listed, key=lambda c: c.cid)
        if sort != "cid":
            ordered.sort(key=lambda c: _sort_value(c, what, now), reverse=descending)
        selected = ordered[offset : offset + limit]
    conns = [_conn_info(server, c, now, with_subs, detail, auth, leafs) for c in selected]
    return {
        "server_id": server.server_id,
        "now": rfc3339_nano(now),
        "num_connections": len(conns),
        "total": total,
        "offset": offset,
        "limit": limit,
        "connections": conns,
    }


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
    )


def _conn_info(
    server: StatisticsFeed,
    c: ConnectionSnapshot,
    now: float,
    with_subs: bool,
    detail: bool,
    auth: bool,
    leafs: dict[int, LeafSnapshot],
) -> dict[str, Any]:
    last = c.last_activity
    info: dict[str, Any] = {"cid": c.cid, "kind": c.kind}
    if c.kind == "Client":  # nats-server's `clientTypeString`: "" (omitted) for a leaf
        info["type"] = "nats"
    info |= {
        "ip": c.host,
        "port": c.port,
        "start": rfc3339_nano(c.started_at),
        "last_activity": rfc3339_nano(last),
        "rtt": rtt_string(c.rtt_s),
        "uptime": uptime_string(now - c.started_at),
        "idle": uptime_string(now - last),
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
    if not (with_subs and c.subs):
        subs: list[SubscriptionSnapshot] = []
    elif leaf is not None:
        subs = list(leaf.interest)
    else:
        subs = server.subscriptions(c.cid)
    if subs and not detail:
        info["subscriptions_list"] = [s.subject for s in subs]
    elif subs:
        details = []
        for s in subs:
            d: dict[str, Any] = {"subject": s.subject}
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
        info["name_tag"] = c.name_tag or c.account
        if c.tags:
            info["tags"] = list(c.tags)
    return info
