"""TLS on the client port: nats-py and raw clients against an in-process Brook, with
certificates the tests make (tests/support/certs.py)."""

from __future__ import annotations

from pathlib import Path

import nats
import pytest

import brook
from brook.config.conf import parse_conf, settings_from_conf
from brook.config.settings import Settings
from tests.support.certs import Certs, make_certs

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def certs(tmp_path: Path) -> Certs:
    return make_certs(tmp_path)


def conf(text: str) -> Settings:
    return settings_from_conf(parse_conf(text))


def tls_block(certs: Certs, extra: str = "") -> str:
    return (
        f'tls {{ cert_file: "{certs.cert_file}", key_file: "{certs.key_file}",'
        f' ca_file: "{certs.ca_file}" {extra} }}'
    )


async def test_nats_py_connects_over_tls_and_messages_flow(certs: Certs) -> None:
    async with brook.serve(settings=conf(tls_block(certs))) as server:
        nc = await nats.connect(server.url, tls=certs.context(), allow_reconnect=False)
        try:
            assert nc._server_info["tls_required"] is True
            assert "tls_verify" not in nc._server_info
            sub = await nc.subscribe("greet")
            await nc.publish("greet", b"hello over tls")
            msg = await sub.next_msg(timeout=2)
            assert msg.data == b"hello over tls"
            assert server.clients[next(iter(server.clients))].tls
        finally:
            await nc.close()
