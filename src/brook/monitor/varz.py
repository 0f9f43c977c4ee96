"""The `/varz` document: server identity, configured limits, process figures and counters.

Mirrors nats-server 2.x's `Varz` (server/monitor.go): same field names, same types (durations
configured in options are integer nanoseconds, observed ones are Go duration strings,
timestamps are RFC3339 UTC) and the same omit-when-empty rules, so tools written for
nats-server read Brook. Features Brook lacks show as nats-server shows them when not
configured: `cluster`, `gateway` and `mqtt` are `{}`, the route and remote counts zero,
`stalled_clients` and the disk I/O wait figures zero (Brook neither stalls producers nor
queues for a disk semaphore); nats-server's own `feature_flags` and `git_commit` are left
out. `jetstream.config` and `.limits` are `/jsz`'s. `mem` is the process's resident set
size, `cpu` its CPU percent since the previous request, `gomaxprocs` the CPUs the
process may run on (what Go's default GOMAXPROCS is). `config_load_time` is when the
server was started or its configuration last reloaded, `config_digest` "" (what
nats-server shows without a config file). `brook_max_closed_clients` is Brook's own:
the bound of the closed connections `/connz` keeps.

Only the JSON is built here; `brook.monitor.http` serves it.
"""

from __future__ import annotations

import os
import platform
import time
from typing import Any

from brook import _compiled, limits
from brook.config.settings import LeafNodeSettings, Settings, TLSSettings, WebSocketSettings
from brook.monitor.durations import go_number, rfc3339_nano, seconds_to_ns, uptime_string
from brook.monitor.jsz import jetstream_config, jetstream_limits
from brook.server.statistics import ServerStatistics
from brook.server.tls import certificate_not_after
from brook.version import __version__

__all__ = ["CpuSampler", "build_varz", "rss_bytes"]


def rss_bytes() -> int:
    """Resident set size from /proc (Linux); 0 where that file does not exist."""
    try:
        with open("/proc/self/statm", "rb") as f:
            pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE")


class CpuSampler:
    """Process CPU percent since the previous sample, like `ps` reports for nats-server.

    `time.process_time()` is getrusage's user+system time, without the Unix-only module.
    """

    def __init__(self) -> None:
        self._wall = time.monotonic()
        self._cpu = time.process_time()

    def percent(self) -> float | int:
        wall, cpu = time.monotonic(), time.process_time()
        elapsed = wall - self._wall
        used = cpu - self._cpu
        self._wall, self._cpu = wall, cpu
        if elapsed <= 0:
            return 0
        return go_number(round(100.0 * used / elapsed, 1))


def build_varz(
    srv: ServerStatistics,
    st: Settings,
    *,
    http_host: str,
    http_port: int,
    https_port: int = 0,
    request_counts: dict[str, int],
    cpu: CpuSampler,
) -> dict[str, Any]:
    """The `/varz` body for a server's statistics `srv` and settings `st`, whose
    monitoring listens on `http_host:http_port`."""
    now = time.time()
    v: dict[str, Any] = {
        "server_id": srv["server_id"],
        "server_name": srv["server_name"],
        "version": limits.NATS_COMPAT_VERSION,
        "brook_version": __version__,
        "proto": limits.PROTOCOL_VERSION,
        "go": f"brook{__version__}/python{platform.python_version()}",
        "host": st.host,
        "port": srv["port"],
    }
    if srv["auth_required"]:
        v["auth_required"] = True
    if st.tls is not None:  # as nats-server's: the port's, whatever handshake_first says
        if not st.allow_non_tls:
            v["tls_required"] = True
        if st.tls.verify:
            v["tls_verify"] = True
    v["max_connections"] = st.max_connections
    if st.max_subscriptions:
        v["max_subscriptions"] = st.max_subscriptions
    v |= {
        "ping_interval": seconds_to_ns(st.ping_interval_s),
        "ping_max": st.max_pings_out,
        "http_host": http_host,
        "http_port": http_port,
        "https_port": https_port,
        "http_base_path": "",
        "auth_timeout": go_number(st.client_auth_timeout_s),
        "max_control_line": st.max_control_line_bytes,
        "max_payload": st.max_payload_bytes,
        "max_pending": st.max_pending_bytes,
        "brook_max_closed_clients": st.max_closed_clients or limits.MAX_CLOSED_CLIENTS,
        # Brook's own: the hot-path modules running compiled, or why none (ADR 0045)
        "brook_compiled": _compiled.status(),
    }
    if st.jetstream.enabled:
        v["jetstream"] = {
            "config": jetstream_config(st),
        }
        if srv["jetstream_stats"] is not None:
            v["jetstream"]["stats"] = srv["jetstream_stats"]
        if srv["jetstream_accounts"] is not None:  # Brook's own: each account's limits, usage
            v["jetstream"]["brook_accounts"] = srv["jetstream_accounts"]
        if srv["transfers"] is not None:  # Brook's own: snapshot and restore limits
            v["jetstream"]["brook_transfers"] = srv["transfers"]
        if srv["store"] is not None:  # Brook's own (docs/compatibility.md)
            v["jetstream"]["brook_store"] = srv["store"]
        if srv["commits"] is not None:  # Brook's own: PubAcks awaiting their fsync, the bound
            v["jetstream"]["brook_commits"] = srv["commits"]
        if srv["batches"] is not None:  # Brook's own: atomic batches staged, their limits
            v["jetstream"]["brook_batches"] = srv["batches"]
        if js_limits := jetstream_limits(st):
            v["jetstream"]["limits"] = js_limits
    v["cluster"] = {}
    v["gateway"] = {}
    v["leaf"] = _leaf(st.leafnodes, srv["leafnode_port"])
    v["mqtt"] = {}
    v["websocket"] = _websocket(st.websocket, srv["websocket_port"])
    leaf = srv["leaf_traffic"]
    v |= {
        "tls_timeout": go_number(st.tls.timeout_s if st.tls else limits.TLS_TIMEOUT_S),
        "write_deadline": seconds_to_ns(st.write_deadline_s),
        "start": rfc3339_nano(srv["started_at"]),
        "now": rfc3339_nano(now),
        "uptime": uptime_string(now - srv["started_at"]),
        "mem": rss_bytes(),
        "cores": os.cpu_count() or 1,
        "gomaxprocs": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1,
        "cpu": cpu.percent(),
        "connections": srv["connections"],
        "total_connections": srv["total_connections"],
        "routes": 0,
        "remotes": 0,
        "leafnodes": srv["leafnodes"],
        "in_msgs": srv["in_msgs"] + leaf[0],
        "in_bytes": srv["in_bytes"] + leaf[1],
        # nats-server's totals count leafnode traffic too; the client-only ones do not.
        "in_client_msgs": srv["in_msgs"],
        "in_client_bytes": srv["in_bytes"],
        "out_msgs": srv["out_msgs"] + leaf[2],
        "out_bytes": srv["out_bytes"] + leaf[3],
        "out_client_msgs": srv["out_msgs"],
        "out_client_bytes": srv["out_bytes"],
        "slow_consumers": srv["slow_consumers"],
        "stale_connections": srv["stale_connections"],
        "stalled_clients": 0,
        "subscriptions": srv["subscriptions"],
        "http_req_stats": dict(request_counts),
        "config_load_time": rfc3339_nano(srv["config_loaded_at"]),
        "config_digest": "",
        "system_account": st.system_account_name,
        "slow_consumer_stats": dict(clients=srv["slow_consumers"], routes=0, gateways=0, leafs=0),
        "stale_connection_stats": dict(
            clients=srv["stale_connections"], routes=0, gateways=0, leafs=0
        ),
        "disk_io_wait_stats": {"waiters": 0, "waits": 0, "wait_time": 0, "max_wait_time": 0},
    }
    if srv["pinned_account_fails"]:  # omitempty
        v["pinned_account_fails"] = srv["pinned_account_fails"]
    _put_not_after(v, st.tls)
    return v


def _leaf(leaf: LeafNodeSettings, port: int) -> dict[str, Any]:
    """nats-server's `LeafNodeOptsVarz`: the listener's address and timeouts, and each
    remote's account and URLs (`host:port`); `{}` without either (ADR 0032)."""
    doc: dict[str, Any] = {}
    if port:
        doc |= {
            "host": leaf.host,
            "port": port,
            "auth_timeout": go_number(leaf.login_timeout_s),
            "tls_timeout": go_number(limits.TLS_TIMEOUT_S),
        }
    if leaf.remotes:
        doc["remotes"] = [
            {
                "local_account": r.account,
                "urls": [u.split("://", 1)[1].rpartition("@")[2] for u in r.urls],
            }
            for r in leaf.remotes
        ]
    return doc


def _websocket(ws: WebSocketSettings, port: int) -> dict[str, Any]:
    """nats-server's `WebsocketOptsVarz`: the `websocket {}` block as configured (each
    field omitted when empty, `{}` without a listener), with the port it listens on."""
    if not ws.port:
        return {}
    tls = ws.tls
    out: dict[str, Any] = {
        "host": ws.host,
        "port": port,
        "advertise": ws.advertise,
        "no_auth_user": ws.no_auth_user,
        "handshake_timeout": seconds_to_ns(ws.handshake_timeout_s),
        "auth_timeout": go_number(ws.auth_timeout_s or 0),
        "no_tls": ws.no_tls,
        "tls_map": tls is not None and tls.verify_and_map,
        "tls_pinned_certs": sorted(tls.pinned_certs) if tls is not None else [],
        "same_origin": ws.same_origin,
        "allowed_origins": list(ws.allowed_origins),
        "compression": ws.compression,
    }
    out = {k: value for k, value in out.items() if value}
    _put_not_after(out, tls)
    return out


def _put_not_after(out: dict[str, Any], tls: TLSSettings | None) -> None:
    """`tls_cert_not_after`: when the listener's certificate expires (Go's `omitzero`)."""
    not_after = certificate_not_after(tls.cert_file) if tls is not None else None
    if not_after is not None:
        out["tls_cert_not_after"] = rfc3339_nano(not_after.timestamp())
