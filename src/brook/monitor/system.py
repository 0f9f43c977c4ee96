"""The system account's services: nats-server's `$SYS` requests, events and STATSZ (ADR 0029).

What nats-server's `initEventTracking` (server/events.go) subscribes in its system account,
answered from the same documents as the monitoring port (`/varz`, `/connz`, `/subsz`,
`/jsz`, `/healthz`, `/accountz`) and in nats-server's envelope, `ServerAPIResponse`:
`{"server": {name, host, id, ver, jetstream, flags, seq, time}, "data": ..., "error": ...}`.

* `$SYS.REQ.SERVER.PING` (STATSZ) and `$SYS.REQ.SERVER.PING.<Z>` ask every server,
  `$SYS.REQ.SERVER.<id>.<Z>` this one, for `<Z>` in STATSZ VARZ CONNZ SUBSZ JSZ HEALTHZ
  IDZ ACCOUNTZ LEAFZ ROUTEZ GATEWAYZ RAFTZ (the last three a server's without routes,
  gateways or Raft groups); a request's body is nats-server's options of that document
  (`{"limit": 2}`) and its filter (`server_name`, `host`, `cluster`, `tags`, `domain`,
  `exact_match`): a server the filter excludes does not answer. PROFILEZ, EXPVARZ and
  IPQUEUESZ are Go's runtime and nats-server's queues: not answered.
* `$SYS.REQ.ACCOUNT.<account>.<Z>` for `<Z>` in SUBSZ CONNZ LEAFZ JSZ STATZ CONNS INFO,
  one account's share; `$SYS.REQ.ACCOUNT.PING.STATZ` every account's.
* `$SYS.REQ.ACCOUNT.NSUBS` and `$SYS.DEBUG.SUBSCRIBERS`: how many clients subscribe to
  a subject (`brook.monitor.nsubs`); `$SYS.REQ.USER.<account>.INFO` asked directly.
* Imported into every other account, as nats-server's `registerSystemImports` does:
  `$SYS.REQ.USER.INFO` (who the requester is), `$SYS.REQ.ACCOUNT.PING.CONNZ` and
  `$SYS.REQ.SERVER.PING.CONNZ` (that account's connections), `$SYS.REQ.ACCOUNT.PING.STATZ`
  (that account's statistics). A client of an ordinary account reaches nothing else.
* Events in the system account: `$SYS.ACCOUNT.<account>.CONNECT` and `.DISCONNECT` for
  every client, `$SYS.SERVER.<id>.STATSZ` every `statsz_interval_s` (first after a
  quarter second, doubling, as nats-server's `startStatszTimer`) while someone listens.

A request nats-server would answer with an error gets its `{"code", "description"}`; one
its filter or `errSkipZreq` drops gets no answer. Timers go through `schedule` (the event
loop's `call_later` unless a test passes its own), so a test can fire STATSZ itself.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Callable
from typing import Any, Protocol

from brook import limits
from brook.config.settings import ConfigError
from brook.monitor.accountz import build_account_info, build_accountz
from brook.monitor.accstatz import account_stat, build_accstatz
from brook.monitor.closed import closed_state
from brook.monitor.connz import HttpError, build_connz
from brook.monitor.durations import rfc3339_nano, seconds_to_ns
from brook.monitor.healthz import build_healthz
from brook.monitor.jsz import JszOptions, build_jsz, build_jsz_account, jetstream_config
from brook.monitor.nsubs import count_subscribers, debug_request, nsubs_request
from brook.monitor.params import BadParameter, NotHere
from brook.monitor.subsz import SubszOptions, build_subsz
from brook.monitor.system_requests import (
    JSZ_NAMES,
    AccountFeed,
    EventFilter,
    Failed,
    connz_query,
    decode,
    gatewayz,
    healthz_query,
    leafz,
    raftz,
    read_options,
    routez,
    text_option,
)
from brook.monitor.varz import CpuSampler, build_varz, rss_bytes
from brook.nuid import random_id
from brook.routing.imports import REQUEST_INFO
from brook.routing.internal import InternalClient
from brook.routing.sublist import MessageHandler
from brook.server.statistics import (
    ConnectionSnapshot,
    ServerFeed,
    SystemBus,
)

__all__ = ["STATSZ_FIRST_S", "STATSZ_INTERVAL_S", "Schedule", "SystemServices", "Timer"]

log = logging.getLogger("brook.system")

STATSZ_FIRST_S = 0.25  # nats-server's first STATSZ after start, doubling from there
STATSZ_INTERVAL_S = 10.0  # nats-server's statsHBInterval: the longest between two

SERVER_REQUESTS = (
    "STATSZ", "VARZ", "CONNZ", "SUBSZ", "JSZ", "HEALTHZ", "IDZ", "ACCOUNTZ",
    "LEAFZ", "ROUTEZ", "GATEWAYZ", "RAFTZ",
)  # fmt: skip
ACCOUNT_REQUESTS = ("SUBSZ", "CONNZ", "LEAFZ", "JSZ", "STATZ", "CONNS", "INFO")
CONNECT_TYPE = "io.nats.server.advisory.v1.client_connect"
DISCONNECT_TYPE = "io.nats.server.advisory.v1.client_disconnect"
FLAG_JETSTREAM = 1  # nats-server's ServerCapability JetStreamEnabled


class Timer(Protocol):
    def cancel(self) -> None: ...


class Schedule(Protocol):
    """`loop.call_later`'s shape: run `callback` after `delay_s`."""

    def __call__(self, delay_s: float, callback: Callable[[], None]) -> Timer: ...


class SystemServices:
    """The `$SYS` services of one server (a `SystemFactory`); started and stopped by it."""

    def __init__(
        self,
        feed: ServerFeed,
        bus: SystemBus,
        *,
        schedule: Schedule | None = None,
        statsz_interval_s: float = STATSZ_INTERVAL_S,
    ) -> None:
        self.feed = feed
        self.bus = bus
        self._schedule = schedule
        self.statsz_interval_s = statsz_interval_s
        self._statsz_delay_s = min(STATSZ_FIRST_S, statsz_interval_s)
        self._timer: Timer | None = None
        self._running = False
        self._seq = 0
        self._cpu = CpuSampler()
        settings = feed.settings
        self.host = settings.host or limits.DEFAULT_HOST
        self.name = settings.server_name or feed.server_id
        self.jetstream = settings.jetstream.enabled
        self.domain = settings.jetstream.domain
        self.statsz_subject = f"$SYS.SERVER.{feed.server_id}.STATSZ"

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        system = self.bus.system
        server_id = self.feed.server_id
        system.subscribe("$SYS.REQ.SERVER.PING", self._on_statsz)
        for name in SERVER_REQUESTS:
            handler = self._on_statsz if name == "STATSZ" else self._server_handler(name)
            system.subscribe(f"$SYS.REQ.SERVER.PING.{name}", handler)
            system.subscribe(f"$SYS.REQ.SERVER.{server_id}.{name}", handler)
        system.subscribe(f"$SYS.REQ.SERVER.{server_id}.RELOAD", self._on_reload)
        system.subscribe(f"$SYS.REQ.SERVER.{server_id}.KICK", self._connection_handler("KICK"))
        system.subscribe(f"$SYS.REQ.SERVER.{server_id}.LDM", self._connection_handler("LDM"))
        for name in ACCOUNT_REQUESTS:
            system.subscribe(f"$SYS.REQ.ACCOUNT.*.{name}", self._account_handler(name))
        system.subscribe("$SYS.REQ.ACCOUNT.PING.STATZ", self._on_accounts_statz)
        system.subscribe("$SYS.REQ.ACCOUNT.NSUBS", self._on_nsubs)
        system.subscribe("$SYS.DEBUG.SUBSCRIBERS", self._on_debug_subscribers)
        system.subscribe("$SYS.REQ.USER.INFO", self._user_handler(system, self.bus.system_account))
        system.subscribe("$SYS.REQ.USER.*.INFO", self._on_user_direct)
        for account, client in self.bus.imports.items():
            self._import(account, client)
        self._running = True
        self._arm(self._statsz_delay_s)

    def add_account(self, name: str, client: InternalClient) -> None:
        if name in self.bus.imports:
            client.close()
            return
        self.bus.imports[name] = client
        self._import(name, client)

    def _import(self, account: str, client: InternalClient) -> None:
        """nats-server's `registerSystemImports` for one account."""
        connz = self._account_handler("CONNZ", account)
        client.subscribe("$SYS.REQ.SERVER.PING.CONNZ", connz)
        client.subscribe("$SYS.REQ.ACCOUNT.PING.CONNZ", connz)
        client.subscribe("$SYS.REQ.ACCOUNT.PING.STATZ", self._account_handler("STATZ", account))
        client.subscribe("$SYS.REQ.USER.INFO", self._user_handler(client, account))

    def stop(self) -> None:
        self._running = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.bus.system.close()
        for client in self.bus.imports.values():
            client.close()

    def _arm(self, delay_s: float) -> None:
        schedule = self._schedule or asyncio.get_running_loop().call_later
        self._timer = schedule(delay_s, self._heartbeat)

    def _heartbeat(self) -> None:
        """nats-server's `heartbeatStatsz`: the delay doubles up to the interval."""
        if not self._running:
            return
        self._statsz_delay_s = min(self._statsz_delay_s * 2, self.statsz_interval_s)
        self._arm(self._statsz_delay_s)
        system = self.bus.system
        # As nats-server standalone: only when someone but this server listens.
        if system.router.has_interest(self.statsz_subject.encode()):
            self._send(self.statsz_subject, self._statsz())

    # ------------------------------------------------------------------ events

    def client_connected(self, client: ConnectionSnapshot) -> None:
        subject = f"$SYS.ACCOUNT.{client.account}.CONNECT".encode()
        if not self.bus.system.router.has_interest(subject):
            return  # built only for a listener: a connection storm costs nothing more
        event = {
            "type": CONNECT_TYPE,
            "id": random_id(),
            "timestamp": rfc3339_nano(time.time()),
            "server": self._server_info(),
            "client": self._client_info(client, None),
        }
        self.bus.system.publish(subject, _json(event))

    def client_closed(self, client: ConnectionSnapshot) -> None:
        subject = f"$SYS.ACCOUNT.{client.account}.DISCONNECT".encode()
        if not self.bus.system.router.has_interest(subject):
            return
        now = time.time()
        event = {
            "type": DISCONNECT_TYPE,
            "id": random_id(),
            "timestamp": rfc3339_nano(now),
            "server": self._server_info(),
            "client": self._client_info(client, now),
            # nats-server's names, seen from the client: what it sent, what it received
            "sent": {"msgs": client.in_msgs, "bytes": client.in_bytes},
            "received": {"msgs": client.out_msgs, "bytes": client.out_bytes},
            "reason": closed_state(client.close_reason),
        }
        self.bus.system.publish(subject, _json(event))

    def _client_info(self, client: ConnectionSnapshot, stop: float | None) -> dict[str, Any]:
        """nats-server's `ClientInfo` of an event, its empty fields left out."""
        info: dict[str, Any] = {
            "start": rfc3339_nano(client.started_at),
            "host": client.host,
            "id": client.cid,
            "acc": client.account,
        }
        for key, value in (
            ("user", client.authorized_user),
            ("name", client.name),
            ("lang", client.lang),
            ("ver", client.version),
        ):
            if value:
                info[key] = value
        if stop is not None:
            if client.rtt_s:
                info["rtt"] = seconds_to_ns(client.rtt_s)
            info["stop"] = rfc3339_nano(stop)
        if client.jwt:
            info["jwt"] = client.jwt
        if client.issuer_key:
            info["issuer_key"] = client.issuer_key
        info["name_tag"] = client.name_tag or client.account
        if client.tags:
            info["tags"] = list(client.tags)
        info |= {"kind": "Client", "client_type": "nats"}
        return info

    # ------------------------------------------------------------------ requests

    def server_info(self) -> dict[str, Any]:
        return self._server_info()

    def _server_info(self) -> dict[str, Any]:
        """nats-server's `ServerInfo`, stamped with the next sequence number and the time."""
        self._seq += 1
        return {
            "name": self.name,
            "host": self.host,
            "id": self.feed.server_id,
            **({"domain": self.domain} if self.domain else {}),
            "ver": limits.NATS_COMPAT_VERSION,
            "jetstream": self.jetstream,
            "flags": FLAG_JETSTREAM if self.jetstream else 0,
            "seq": self._seq,
            "time": rfc3339_nano(time.time()),
        }

    def _excluded(self, body: dict[str, Any]) -> bool:
        """The request's filter leaves this server out."""
        filter_ = read_options(EventFilter, body, {})
        return filter_.excludes(self.name, self.host, body.get("tags"), self.domain)

    def _send(
        self, subject: str, body: dict[str, Any], client: InternalClient | None = None
    ) -> None:
        (client or self.bus.system).publish(subject.encode(), _json(body))

    def _respond(
        self,
        reply: bytes | None,
        payload: bytes,
        build: Callable[[dict[str, Any]], Any],
        client: InternalClient | None = None,
    ) -> None:
        """nats-server's `zReq`: options, filter, the document in its envelope."""
        if not reply:
            return
        response: dict[str, Any] = {}
        try:
            body = decode(payload)
            if self._excluded(body):
                return
            data = build(body)
        except NotHere:
            return
        except Failed as exc:
            response = {"error": {"code": exc.code, "description": exc.description}}
        except (BadParameter, HttpError) as exc:
            description = exc.args[1] if isinstance(exc, HttpError) else str(exc)
            response = {"data": None, "error": {"code": 500, "description": description}}
        else:
            response = {"data": data} if data is not None else {}  # Go's omitempty
        self._send(reply.decode(), {"server": self._server_info(), **response}, client)

    def _on_statsz(
        self, subject: bytes, reply: bytes | None, header: bytes | None, payload: bytes
    ) -> None:
        """nats-server's `statszReq`: no envelope but `{"server", "statsz"}`; without a
        reply, on the broadcast subject."""
        try:
            body = decode(payload)
        except Failed as exc:
            if reply:
                error = {"code": exc.code, "description": exc.description}
                self._send(reply.decode(), {"server": self._server_info(), "error": error})
            return
        if self._excluded(body):
            return
        self._send(reply.decode() if reply else self.statsz_subject, self._statsz())

    def _on_reload(
        self, subject: bytes, reply: bytes | None, header: bytes | None, payload: bytes
    ) -> None:
        """nats-server's `reloadConfig` (ADR 0042): a config reload, answered with the
        envelope alone, or its refusal as a 500. Run after this delivery, as nats-server
        runs it off the delivering loop: the reload closes and changes connections."""

        def build(body: dict[str, Any]) -> None:
            try:
                self.feed.reload()
            except ConfigError as exc:
                raise Failed(500, str(exc)) from None

        asyncio.get_running_loop().call_soon(self._respond, reply, payload, build)

    def _connection_handler(self, name: str) -> MessageHandler:
        """nats-server's `kickClient` and `ldmClient`: `{"cid": N}` closes that connection
        or tells it of lame-duck mode; answered with the envelope alone, or a 500 naming
        what is wrong. A body that is no such request is logged and not answered."""
        act = self.feed.kick if name == "KICK" else self.feed.lame_duck_client

        def handler(
            subject: bytes, reply: bytes | None, header: bytes | None, payload: bytes
        ) -> None:
            try:
                request = json.loads(payload)
                cid = request.get("cid")
                if cid is None:  # absent or null: Go's zero value
                    cid = 0
                if not isinstance(cid, int) or isinstance(cid, bool) or cid < 0:
                    raise TypeError(cid)
            except (ValueError, AttributeError, TypeError) as exc:
                log.error("Error unmarshalling kick client request: %r", exc)
                return

            def build(body: dict[str, Any]) -> None:
                try:
                    act(cid)
                except LookupError as exc:
                    raise Failed(500, str(exc.args[0])) from None

            asyncio.get_running_loop().call_soon(self._respond, reply, payload, build)

        return handler

    def server_event(self, kind: str) -> None:
        self._send(f"$SYS.SERVER.{self.feed.server_id}.{kind}", self._server_info())

    def _server_handler(self, name: str) -> MessageHandler:
        if name == "IDZ":

            def idz(
                subject: bytes, reply: bytes | None, header: bytes | None, payload: bytes
            ) -> None:
                if reply:
                    identity = {"name": self.name, "host": self.host, "id": self.feed.server_id}
                    self._send(reply.decode(), identity)

            return idz
        build = self._documents()[name]

        def handler(
            subject: bytes, reply: bytes | None, header: bytes | None, payload: bytes
        ) -> None:
            self._respond(reply, payload, lambda body: build(self.feed, body))

        return handler

    def _documents(self) -> dict[str, Callable[[Any, dict[str, Any]], Any]]:
        return {
            "VARZ": lambda feed, body: self._varz(),
            "CONNZ": lambda feed, body: build_connz(feed, connz_query(body)),
            "SUBSZ": lambda feed, body: build_subsz(
                feed, read_options(SubszOptions, body, {"subscriptions": "subscriptions"})
            ),
            "JSZ": lambda feed, body: build_jsz(feed, read_options(JszOptions, body, JSZ_NAMES)),
            "HEALTHZ": lambda feed, body: self._healthz(body),
            "ACCOUNTZ": lambda feed, body: build_accountz(feed, text_option(body, "account")),
            "LEAFZ": lambda feed, body: leafz(feed, body, None),
            "ROUTEZ": routez,
            "GATEWAYZ": gatewayz,
            "RAFTZ": raftz,
        }

    def _account_handler(self, name: str, account: str | None = None) -> MessageHandler:
        """`$SYS.REQ.ACCOUNT.<account>.<name>`; with `account`, the import of it into that
        account (whose requests name no account)."""
        client = self.bus.system if account is None else self.bus.imports[account]

        def handler(
            subject: bytes, reply: bytes | None, header: bytes | None, payload: bytes
        ) -> None:
            target = account or subject.decode().split(".")[3]
            feed = AccountFeed(self.feed, target)
            if name == "CONNS":
                return self._conns(target, reply)
            builders: dict[str, Callable[[dict[str, Any]], Any]] = {
                "SUBSZ": lambda body: build_subsz(
                    feed,
                    read_options(SubszOptions, {**body, "subscriptions": True}, {}),
                ),
                "CONNZ": lambda body: build_connz(feed, connz_query(body)),
                "LEAFZ": lambda body: leafz(self.feed, body, target),
                "JSZ": lambda body: build_jsz_account(
                    self.feed, read_options(JszOptions, {**body, "account": target}, JSZ_NAMES)
                ),
                "STATZ": lambda body: self._accounts_statz([target], body),
                "INFO": lambda body: build_account_info(self.feed, target),
            }
            if target == "PING" and name == "STATZ":
                return None  # nats-server filters PING out of the account wildcard
            self._respond(reply, payload, builders[name], client)
            return None

        return handler

    def _on_accounts_statz(
        self, subject: bytes, reply: bytes | None, header: bytes | None, payload: bytes
    ) -> None:
        self._respond(
            reply, payload, lambda body: self._accounts_statz(body.get("accounts") or [], body)
        )

    def _on_nsubs(
        self, subject: bytes, reply: bytes | None, header: bytes | None, payload: bytes
    ) -> None:
        """nats-server's `nsubsRequest` (which the server asked `$SYS.DEBUG.SUBSCRIBERS`
        sends the others of a cluster; a system user may ask too): the count as a JSON
        number, only while the account has client or leafnode connections here. A body
        that is no such request is logged and not answered."""
        try:
            request = nsubs_request(payload)
        except (ValueError, RecursionError) as exc:
            log.error("Error unmarshalling account nsubs request message: %s", exc)
            return
        account = request.account
        here = any(c.account == account for c in self.feed.connections()) or any(
            c.account == account for c in self.feed.leaf_connections()
        )
        if reply and account and here:
            count = count_subscribers(self.feed, account, request.subject, request.queue)
            self.bus.system.publish(reply, str(count).encode())

    def _on_debug_subscribers(
        self, subject: bytes, reply: bytes | None, header: bytes | None, payload: bytes
    ) -> None:
        """nats-server's `debugSubscribers`: how many clients subscribe to the body's
        subject (and queue group) in the requester's account, the system account for its
        own users, an importer's as its `Nats-Request-Info` names it (an import)."""
        try:
            account = _requesting_account(header) or self.bus.system_account
        except (ValueError, RecursionError):
            return
        if not reply or not self.feed.sublists(account):
            return  # no such account: not answered, as nats-server
        wanted, queue = debug_request(payload)
        count = count_subscribers(self.feed, account, wanted, queue)
        self.bus.system.publish(reply, str(count).encode())

    def _on_user_direct(
        self, subject: bytes, reply: bytes | None, header: bytes | None, payload: bytes
    ) -> None:
        """`$SYS.REQ.USER.<account>.INFO` asked directly (not through the import of
        `$SYS.REQ.USER.INFO`, which says who asks): nats-server's `UserInfo` of nobody."""
        if reply:
            data = {"user": "", "account": ""}
            self._send(reply.decode(), {"server": self._server_info(), "data": data})

    def _user_handler(self, client: InternalClient, account: str) -> MessageHandler:
        """`$SYS.REQ.USER.INFO`: the requester's own user, account and permissions, sent
        to it alone (the client awaiting the reply; nobody's when several are)."""

        def handler(
            subject: bytes, reply: bytes | None, header: bytes | None, payload: bytes
        ) -> None:
            if not reply:
                return
            user = self.feed.requester(account, reply)
            if user is None:
                response: dict[str, Any] = {"error": {"code": 400, "description": ""}}
            else:
                data: dict[str, Any] = {
                    "user": user.user,
                    "account": user.account,
                    "account_name": user.account_name,
                }
                if user.user_name:
                    data["user_name"] = user.user_name
                if user.permissions is not None:
                    data["permissions"] = user.permissions
                if user.expires_ns:
                    data["expires"] = user.expires_ns
                response = {"data": data}
            self._send(reply.decode(), {"server": self._server_info(), **response}, client)

        return handler

    # ------------------------------------------------------------------ documents

    def _statsz(self) -> dict[str, Any]:
        """nats-server's `ServerStatsMsg`."""
        stats = self.feed.statistics()
        leaf = stats["leaf_traffic"]
        connections = self.feed.connections()
        statsz: dict[str, Any] = {
            "start": rfc3339_nano(stats["started_at"]),
            "mem": rss_bytes(),
            "cores": os.cpu_count() or 1,
            "cpu": self._cpu.percent(),
            "connections": stats["connections"],
            "total_connections": stats["total_connections"],
            "active_accounts": len({c.account for c in connections}),
            "subscriptions": stats["subscriptions"],
            # nats-server's totals count leafnode traffic too, the `_clients` ones do not
            "sent": {"msgs": stats["out_msgs"] + leaf[2], "bytes": stats["out_bytes"] + leaf[3]},
            "sent_to_clients": {"msgs": stats["out_msgs"], "bytes": stats["out_bytes"]},
            "received": {"msgs": stats["in_msgs"] + leaf[0], "bytes": stats["in_bytes"] + leaf[1]},
            "received_from_clients": {"msgs": stats["in_msgs"], "bytes": stats["in_bytes"]},
            "slow_consumers": stats["slow_consumers"],
        }
        if stats["slow_consumers"]:
            statsz["slow_consumer_stats"] = {
                "clients": stats["slow_consumers"], "routes": 0, "gateways": 0, "leafs": 0,
            }  # fmt: skip
        statsz["active_servers"] = 1
        if stats["jetstream_stats"] is not None:
            config = jetstream_config(self.feed.settings)
            config.pop("store_dir", None)  # as nats-server's STATSZ
            statsz["jetstream"] = {
                "config": config,
                "stats": stats["jetstream_stats"],
                "limits": {},
            }
        return {"server": self._server_info(), "statsz": statsz}

    def _varz(self) -> dict[str, Any]:
        settings = self.feed.settings
        return build_varz(
            self.feed.statistics(),
            settings,
            http_host=settings.http_host or settings.host,
            http_port=max(settings.http_port, 0),
            https_port=max(settings.https_port, 0),
            request_counts={},
            cpu=self._cpu,
        )

    def _healthz(self, body: dict[str, Any]) -> dict[str, Any]:
        code, doc = build_healthz(self.feed.jetstream_assets(), healthz_query(body))
        status = {"status": doc.pop("status"), "status_code": code}
        return status | doc

    def _accounts_statz(self, accounts: list[str], body: dict[str, Any]) -> dict[str, Any]:
        """nats-server's `AccountStatz` over `$SYS`: no answer when no account qualifies."""
        include_unused = body.get("include_unused") is True
        doc = build_accstatz(self.feed, accounts, include_unused=include_unused)
        if not doc["account_statz"] and not include_unused:
            raise NotHere("no account with connections")
        return doc

    def _conns(self, account: str, reply: bytes | None) -> None:
        """`$SYS.REQ.ACCOUNT.<account>.CONNS`: nats-server's `AccountNumConns`, sent only
        while the account has connections here."""
        connections = [c for c in self.feed.connections() if c.account == account]
        snapshot = next((a for a in self.feed.account_snapshots() if a.name == account), None)
        if not reply or not connections or snapshot is None:
            return
        event = {
            "type": "io.nats.server.advisory.v1.account_connections",
            "id": random_id(),
            "timestamp": rfc3339_nano(time.time()),
            "server": self._server_info(),
            **account_stat(self.feed, snapshot, connections),
        }
        self._send(reply.decode(), event)


def _requesting_account(header: bytes | None) -> str:
    """The account a service import's `Nats-Request-Info` names ("" without one);
    ValueError when it is no JSON object (nats-server then does not answer)."""
    for line in (header or b"").split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == REQUEST_INFO.lower().encode():
            info = json.loads(value)
            if not isinstance(info, dict):
                raise ValueError(info)
            return str(info.get("service") or info.get("acc") or "")
    return ""


def _json(body: dict[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
