"""`Server.reload` in process (ADR 0042): a TLS certificate renewed in place serves the
handshakes that follow while sessions already up keep theirs; `max_connections`
lowered closes the newest clients; a change Brook does not reload is refused whole, with
its reason, and the running settings stay. The SIGHUP path and what nats-server does
alike are compared in tests/conformance/test_reload_conformance.py."""

from __future__ import annotations

import logging
import shutil
import ssl
from pathlib import Path

import nats
import pytest

import brook
from brook.config.conf import load_conf_file
from brook.config.settings import ConfigError, Settings
from tests.support.certs import make_certs
from tests.support.raw import RawClient

pytestmark = pytest.mark.timeout(30)


async def handshake_ok(url: str, context: ssl.SSLContext, *, first: bool) -> bool:
    """Does a TLS handshake with the server on `url` succeed under `context`?"""
    host, port = url.removeprefix("nats://").rsplit(":", 1)
    try:
        if first:
            async with RawClient.connect(host, int(port), tls=context):
                return True
        async with RawClient.connect(host, int(port)) as client:
            await client.start_tls(context)
            return True
    except ssl.SSLError:
        return False


@pytest.mark.parametrize("first", [False, True], ids=["tls", "handshake_first"])
async def test_a_certificate_renewed_in_place_serves_new_handshakes(
    tmp_path: Path, first: bool, caplog: pytest.LogCaptureFixture
) -> None:
    old_dir, new_dir = tmp_path / "old", tmp_path / "new"
    old_dir.mkdir()
    new_dir.mkdir()
    old, new = make_certs(old_dir), make_certs(new_dir)  # two CAs
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    shutil.copy(old.cert_file, cert)
    shutil.copy(old.key_file, key)
    conf = tmp_path / "server.conf"
    option = ", handshake_first: true" if first else ""
    conf.write_text(f'tls {{ cert_file: "{cert}", key_file: "{key}" {option} }}\n')
    async with brook.serve(settings=load_conf_file(str(conf))) as server:
        nc = await nats.connect(
            server.url, tls=old.context(), tls_handshake_first=first, allow_reconnect=False
        )
        caplog.set_level(logging.INFO, logger="brook")
        try:
            server.reload()  # nothing changed: no new context (nats-server logs none)
            shutil.copy(new.cert_file, cert)
            shutil.copy(new.key_file, key)
            server.reload()
            assert await handshake_ok(server.url, new.context(), first=first)
            assert not await handshake_ok(server.url, old.context(), first=first)
            await nc.flush(timeout=2)  # the session made before goes on
            reloaded = [r.getMessage() for r in caplog.records if "Reloaded" in r.getMessage()]
            assert reloaded == [
                *("Reloaded: authorization users", "Reloaded: accounts"),
                "Reloaded server configuration",
                *("Reloaded: authorization users", "Reloaded: accounts"),
                "Reloaded: tls = enabled",
                "Reloaded server configuration",
            ]
        finally:
            await nc.close()


async def test_lowered_max_connections_closes_the_newest(tmp_path: Path) -> None:
    conf = tmp_path / "server.conf"
    conf.write_text("max_connections: 3\n")
    async with brook.serve(settings=load_conf_file(str(conf))) as server:
        url = server.url
        async with (
            RawClient.connect_url(url) as first,
            RawClient.connect_url(url) as second,
            RawClient.connect_url(url) as third,
        ):
            for client in (first, second, third):
                await client.handshake(verbose=False)
            conf.write_text("max_connections: 1\n")
            server.reload()
            for client in (second, third):
                assert await client.read_raw() == b"-ERR 'maximum connections exceeded'\r\n"
                assert await client.expect_closed()
            assert await first.send(b"PING\r\n")
            assert await first.read_raw() == b"PONG\r\n"
            assert server.settings.max_connections == 1


async def test_a_change_brook_does_not_reload_is_refused_whole(tmp_path: Path) -> None:
    conf = tmp_path / "server.conf"
    base = "accounts { A { users: [{user: a, password: a}] } }\n"
    conf.write_text("max_payload: 1000\n" + base)
    async with brook.serve(settings=load_conf_file(str(conf))) as server:
        conf.write_text(
            "max_payload: 2000\n"
            'accounts { A { users: [{user: a, password: a}], exports: [{stream: "x"}] } }\n'
        )
        with pytest.raises(ConfigError) as refused:
            server.reload()
        assert str(refused.value) == (
            "config reload not supported for Accounts: Brook reloads the accounts' users, "
            "and accounts of users alone added or removed, not their exports, imports, "
            "mappings or JetStream (Brook)"
        )
        assert server.settings.max_payload_bytes == 1000
        async with RawClient.connect_url(server.url) as client:
            assert client.info["max_payload"] == 1000


async def test_without_a_config_file_there_is_nothing_to_reload() -> None:
    async with brook.serve(settings=Settings()) as server:
        with pytest.raises(ConfigError, match="can only reload config when a file is provided"):
            server.reload()
