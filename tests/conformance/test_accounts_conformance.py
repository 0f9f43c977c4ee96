"""Accounts conformance: one `accounts {}` config, the same steps on Brook and nats-server.

Each test writes a config with accounts A and B (JetStream enabled in A, or in both) and
users in each and in `$G`, starts nats-server from it and Brook from the same file
(`load_conf_file`), and runs the same nats-py steps against both: who receives a message
published in which account, what the JetStream API answers in each account (streams of
the same name, `$JS.API.INFO`, 10039 where JetStream is off), and which configs both
refuse, in whose words.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client

import brook
from brook.config.conf import load_conf_file
from tests.support.config_errors import brook_conf_error, nats_server_error
from tests.support.natsserver import run_nats_server
from tests.support.raw import PONG

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(60)]

USERS = """
authorization { users: [{user: g, password: g}] }
accounts {
  A: { users: [{user: a, password: a}, {user: a2, password: a2}], jetstream: %(a_js)s }
  B: { users: [{user: b, password: b}], jetstream: %(b_js)s }
}
"""


def accounts_config(*, a_js: str = "enabled", b_js: str = "enabled") -> str:
    return USERS % {"a_js": a_js, "b_js": b_js}


@contextlib.asynccontextmanager
async def servers(config: str) -> AsyncIterator[tuple[str, str]]:
    """(nats-server URL, Brook URL), both started from `config` with JetStream on."""
    with tempfile.TemporaryDirectory(prefix="brook-accounts-") as tmp:
        path = Path(tmp) / "accounts.conf"
        store = Path(tmp) / "brook"
        path.write_text(config + f'jetstream {{ store_dir: "{store}" }}\n')
        with run_nats_server("-c", str(path), jetstream=False) as reference:
            async with brook.serve(port=0, settings=load_conf_file(str(path))) as srv:
                yield reference, srv.url


Steps = Callable[[str], Awaitable[Any]]


async def both(config: str, steps: Steps) -> tuple[Any, Any]:
    async with servers(config) as (reference, ours):
        return await steps(reference), await steps(ours)


async def connect(url: str, user: str) -> Client:
    return await nats.connect(url, user=user, password=user, allow_reconnect=False)


async def received(sub: Any, timeout: float = 0.3) -> list[bytes]:
    out = []
    with contextlib.suppress(nats.errors.TimeoutError):
        while True:
            msg = await sub.next_msg(timeout=timeout)
            out.append(msg.data)
    return out


async def api(nc: Client, subject: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    payload = b"" if body is None else json.dumps(body).encode()
    reply = await nc.request(subject, payload, timeout=2)
    answer: dict[str, Any] = json.loads(reply.data)
    return answer


def shape(answer: dict[str, Any]) -> dict[str, Any]:
    """An API answer without what differs between servers by nature (times, versions)."""
    drop = ("created", "ts", "metadata", "cluster", "config")
    return {k: v for k, v in answer.items() if k not in drop}


# ---------------------------------------------------------------------------- isolation


async def test_core_messages_stay_in_their_account() -> None:
    """The same subject in A, B and $G: a message reaches the subscribers of its own
    account only, and another user of the same account shares it."""

    async def steps(url: str) -> dict[str, list[bytes]]:
        clients = {u: await connect(url, u) for u in ("a", "a2", "b", "g")}
        subs = {u: await nc.subscribe("orders.new") for u, nc in clients.items()}
        for nc in clients.values():
            await nc.flush()
        for user in ("a", "b", "g"):
            await clients[user].publish("orders.new", f"from {user}".encode())
            await clients[user].flush()
        out = {u: await received(sub) for u, sub in subs.items()}
        for nc in clients.values():
            await nc.close()
        return out

    reference, ours = await both(accounts_config(), steps)
    assert reference == {
        "a": [b"from a"],
        "a2": [b"from a"],
        "b": [b"from b"],
        "g": [b"from g"],
    }
    assert ours == reference


async def test_a_request_finds_no_responder_in_another_account() -> None:
    """A service in A does not answer B's requests: B gets no responders."""

    async def steps(url: str) -> tuple[str, str]:
        a, b = await connect(url, "a"), await connect(url, "b")

        async def serve(msg: Any) -> None:
            await msg.respond(b"pong")

        await a.subscribe("svc.ping", cb=serve)
        await a.flush()
        answer = (await a.request("svc.ping", b"", timeout=1)).data.decode()
        try:
            await b.request("svc.ping", b"", timeout=1)
            other = "answered"
        except nats.errors.NoRespondersError:
            other = "no responders"
        await a.close()
        await b.close()
        return answer, other

    reference, ours = await both(accounts_config(), steps)
    assert reference == ("pong", "no responders")
    assert ours == reference


async def test_connect_info_names_the_account() -> None:
    """The INFO after CONNECT (protocol 1) names the client's account."""
    from tests.support.raw import Info, RawClient

    async def steps(url: str) -> list[str]:
        out = []
        for user in ("a", "b", "g"):
            async with RawClient.connect_url(url) as c:
                credentials: dict[str, Any] = {"user": user, "pass": user}
                ops = await c.handshake(protocol=1, **credentials)
                infos = [op for op in ops if isinstance(op, Info)]
                out.append(infos[-1].fields.get("remote_account", "") if infos else "")
        return out

    reference, ours = await both(accounts_config(), steps)
    assert reference == ["A", "B", "$G"]
    assert ours == reference


async def test_only_the_system_account_has_users() -> None:
    """`accounts { $SYS: {users} }` alone: a client without credentials gets in to `$G`
    (nats-server's generated no_auth_user; INFO still says auth_required), the system
    user to `$SYS` (`acc_is_sys`), a wrong password nowhere; `$G` and `$SYS` share no
    subject."""
    from tests.support.raw import Err, Info, RawClient

    config = "accounts { $SYS: { users: [{user: s, password: s}] } }\n"

    async def steps(url: str) -> list[Any]:
        out: list[Any] = []
        logins: list[dict[str, Any]] = [{}, {"user": "s", "pass": "s"}, {"user": "x", "pass": "s"}]
        for credentials in logins:
            async with RawClient.connect_url(url) as c:
                ops = await c.handshake(protocol=1, **credentials)
                infos = [op for op in ops if isinstance(op, Info)]
                out.append(
                    (
                        c.info.get("auth_required"),
                        [e for e in ops if isinstance(e, Err)],
                        {k: infos[-1].fields.get(k) for k in ("remote_account", "acc_is_sys")}
                        if infos
                        else None,
                    )
                )
        anonymous = await nats.connect(url, allow_reconnect=False)
        system = await nats.connect(url, user="s", password="s", allow_reconnect=False)
        subs = [await nc.subscribe("shared") for nc in (anonymous, system)]
        for nc in (anonymous, system):
            await nc.flush()
        await anonymous.publish("shared", b"from $G")
        await anonymous.flush()
        out.append([await received(sub) for sub in subs])
        await anonymous.close()
        await system.close()
        return out

    reference, ours = await both(config, steps)
    assert reference[0][2] == {"remote_account": "$G", "acc_is_sys": None}
    assert reference[1][2] == {"remote_account": "$SYS", "acc_is_sys": True}
    assert reference[2][1] == [Err("Authorization Violation")]
    assert reference[3] == [[b"from $G"], []]
    assert ours == reference


async def test_a_second_connect_to_another_account() -> None:
    """A client of A subscribed to `foo` logs in again as B's user: its subscription
    gets nothing from A nor from B afterwards (nats-server's behaviour), and a new one
    gets B's messages."""
    from tests.support.raw import Msg, RawClient

    async def steps(url: str) -> list[Any]:
        async with RawClient.connect_url(url) as c:
            first: dict[str, Any] = {"user": "a", "pass": "a"}
            second: dict[str, Any] = {"user": "b", "pass": "b"}
            await c.handshake(**first)
            await c.send(b"SUB foo 1\r\n")
            await c.handshake(**second)
            await c.send(b"SUB bar 2\r\nPING\r\n")
            await c.read_ops(until=lambda op: op == PONG)
            pa, pb = await connect(url, "a"), await connect(url, "b")
            for nc, payload in ((pa, b"A"), (pb, b"B")):
                await nc.publish("foo", payload)
                await nc.publish("bar", payload)
                await nc.flush()
            ops = await c.read_ops(timeout=0.5)
            await pa.close()
            await pb.close()
            return [(op.subject, op.sid, op.payload) for op in ops if isinstance(op, Msg)]

    reference, ours = await both(accounts_config(), steps)
    assert reference == [(b"bar", b"2", b"B")]
    assert ours == reference


# ---------------------------------------------------------------------------- JetStream


async def test_streams_of_the_same_name_in_two_accounts() -> None:
    """A and B each create stream S on subject x: two streams, each storing its own
    account's messages; INFO counts each account's own."""

    async def steps(url: str) -> list[Any]:
        a, b = await connect(url, "a"), await connect(url, "b")
        out: list[Any] = []
        for nc in (a, b):
            created = await api(nc, "$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["x"]})
            out.append(shape(created))
        for _ in range(3):
            await a.request("x", b"in a", timeout=2)
        await b.request("x", b"in b", timeout=2)
        for nc in (a, b):
            info = await api(nc, "$JS.API.STREAM.INFO.S")
            out.append(info["state"]["messages"])
            msg = await api(nc, "$JS.API.STREAM.MSG.GET.S", {"seq": 1})
            out.append(msg["message"]["data"])
            account = await api(nc, "$JS.API.INFO")
            out.append({k: account[k] for k in ("type", "streams", "consumers")})
        await a.close()
        await b.close()
        return out

    reference, ours = await both(accounts_config(), steps)
    assert reference[2:] == [
        3,
        "aW4gYQ==",
        {"type": "io.nats.jetstream.api.v1.account_info_response", "streams": 1, "consumers": 0},
        1,
        "aW4gYg==",
        {"type": "io.nats.jetstream.api.v1.account_info_response", "streams": 1, "consumers": 0},
    ]
    assert ours == reference


REFUSED_SUBJECTS = [
    "INFO",
    "STREAM.CREATE.S",
    "STREAM.UPDATE.S",
    "STREAM.INFO.S",
    "STREAM.DELETE.S",
    "STREAM.NAMES",
    "STREAM.LIST",
    "STREAM.PURGE.S",
    "STREAM.MSG.GET.S",
    "STREAM.MSG.DELETE.S",
    "STREAM.SNAPSHOT.S",
    "STREAM.RESTORE.S",
    "CONSUMER.CREATE.S",
    "CONSUMER.CREATE.S.C",
    "CONSUMER.DURABLE.CREATE.S.C",
    "CONSUMER.INFO.S.C",
    "CONSUMER.DELETE.S.C",
    "CONSUMER.NAMES.S",
    "CONSUMER.LIST.S",
    "CONSUMER.PAUSE.S.C",
]


async def test_jetstream_api_in_an_account_without_jetstream() -> None:
    """B has no JetStream: each endpoint answers 10039 in its own response type (with the
    endpoint's other fields), while A's API serves A."""

    async def steps(url: str) -> list[Any]:
        a, b = await connect(url, "a"), await connect(url, "b")
        out = [await api(b, f"$JS.API.{subject}", {}) for subject in REFUSED_SUBJECTS]
        out.append(shape(await api(a, "$JS.API.STREAM.NAMES")))
        await a.close()
        await b.close()
        return out

    reference, ours = await both(accounts_config(b_js="disabled"), steps)
    refused = {"code": 503, "err_code": 10039, "description": "JetStream not enabled for account"}
    assert reference[0] == {
        "type": "io.nats.jetstream.api.v1.account_info_response",
        "error": refused,
    }
    assert all(answer["error"] == refused for answer in reference[:-1])
    for subject, mine, theirs in zip(REFUSED_SUBJECTS, ours[:-1], reference[:-1], strict=True):
        assert (subject, mine) == (subject, theirs)
    assert ours == reference


async def test_jetstream_api_where_no_account_has_jetstream() -> None:
    """JetStream is on but no account has it: every account's endpoints answer 10039,
    as where some other account has it."""

    async def steps(url: str) -> list[Any]:
        out = []
        for user in ("a", "b", "g"):
            nc = await connect(url, user)
            out += [await api(nc, f"$JS.API.{subject}", {}) for subject in REFUSED_SUBJECTS]
            await nc.close()
        return out

    reference, ours = await both(accounts_config(a_js="disabled", b_js="disabled"), steps)
    assert {answer["error"]["err_code"] for answer in reference} == {10039}
    assert ours == reference


async def test_global_account_has_no_jetstream_once_accounts_are_configured() -> None:
    """As nats-server: with accounts configured, `$G` gets JetStream only if no other
    account is there; here its API answers 10039."""

    async def steps(url: str) -> dict[str, Any]:
        g = await connect(url, "g")
        out = await api(g, "$JS.API.INFO")
        await g.close()
        return out

    reference, ours = await both(accounts_config(), steps)
    assert reference["error"]["err_code"] == 10039
    assert ours == reference


async def test_only_a_system_account_leaves_jetstream_to_the_global_account() -> None:
    """`accounts { $SYS {...} }` alone: `$G` keeps JetStream, as without accounts."""
    config = (
        "authorization { users: [{user: g, password: g}] }\n"
        "accounts { $SYS: { users: [{user: s, password: s}] } }\n"
    )

    async def steps(url: str) -> tuple[Any, ...]:
        g = await connect(url, "g")
        created = await api(g, "$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["x"]})
        info = await api(g, "$JS.API.INFO")
        await g.close()
        return "error" in created, info["streams"]

    reference, ours = await both(config, steps)
    assert reference == (False, 1)
    assert ours == reference


# ---------------------------------------------------------------------------- config errors


@pytest.mark.parametrize(
    ("config", "words"),
    [
        (
            "accounts { A: { users: [{user: a, password: a}] }\n"
            "  B: { users: [{user: a, password: b}] } }\n",
            'Duplicate user "a" detected',
        ),
        (
            "authorization { users: [{user: a, password: a}] }\n"
            "accounts { A: { users: [{user: a, password: b}] } }\n",
            'Duplicate user "a" detected',
        ),
        ("accounts { $G: { users: [{user: a, password: a}] } }\n", '"$G" is a Reserved Account'),
        ("accounts { A: 1 }\n", "Expected map entries for accounts"),
        ("accounts [A, A]\n", "Duplicate Account Entry: A"),
        (
            "authorization { token: t }\naccounts { A: { users: [{user: a, password: a}] } }\n",
            # nats-server's ends in "accounts" or "a users array", by its map's order
            "Can not have a token and ",
        ),
        (
            "authorization { user: u, password: p }\n"
            "accounts { A: { users: [{user: a, password: a}] } }\n",
            "Can not have a single user/pass and ",
        ),
        (
            "accounts { A: { jetstream: maybe } }\n",
            "Expected 'enabled' or 'disabled' for string value, got 'maybe'",
        ),
        ("system_account: NOPE\naccounts { A: {} }\n", "error resolving system account"),
        (
            "jetstream: enabled\naccounts { $SYS: { jetstream: enabled } }\n",
            "Not allowed to enable JetStream on the system account",
        ),
    ],
    ids=[
        "user-in-two-accounts",
        "user-in-authorization-and-account",
        "reserved-global",
        "not-a-block",
        "duplicate-entry",
        "token-and-accounts",
        "single-user-and-accounts",
        "jetstream-string",
        "unknown-system-account",
        "jetstream-in-system-account",
    ],
)
def test_config_errors(config: str, words: str) -> None:
    assert words in nats_server_error(config)
    assert words in brook_conf_error(config)


def test_unknown_account_keys_are_refused_with_their_line() -> None:
    """nats-server refuses an unknown key in an account ("unknown field"); Brook too, and
    refuses the keys it does not honour yet in the same way, naming key and line."""
    config = "accounts {\n  A: {\n    users: []\n    frobnicate: 1\n  }\n}\n"
    assert 'unknown field "frobnicate"' in nats_server_error(config)
    assert "'accounts.A.frobnicate' (line 4)" in brook_conf_error(config)
    for key in ("limits: {}", "nkey: x"):
        refused = brook_conf_error(f"accounts {{\n  A: {{\n    {key}\n  }}\n}}\n")
        assert f"'accounts.A.{key.split(':')[0]}' (line 3)" in refused
