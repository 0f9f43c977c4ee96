"""What monitoring shows about TLS, logins and the WebSocket listener, against nats-server.

One config file for both servers (certificates made by trustme); the same clients, the
same certificates; `/connz` with and without `auth=true` and `/varz` compared field by
field (the fields that cannot be equal, such as ports and ids, left out by name).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import nats
import pytest

import brook
from brook.config.conf import load_conf_file
from tests.support.certs import Certs, make_certs
from tests.support.natsserver import free_port, run_nats_server, wait_for_port

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(60)]

# Fields of a /connz entry that differ between any two servers or runs.
_VARYING = {"cid", "ip", "port", "start", "last_activity", "rtt", "uptime", "idle"}
# What the server has yet to write to the connection at the moment it answers: nats-server
# may still hold its answer to the client's CONNECT (a few hundred bytes) on a busy machine.
_TRANSIENT = {"pending_bytes"}


@pytest.fixture
def certs(tmp_path: Path) -> Certs:
    return make_certs(tmp_path)


def tls_block(certs: Certs, extra: str = "") -> str:
    return (
        f'tls {{\n  cert_file: "{certs.cert_file}"\n  key_file: "{certs.key_file}"\n'
        f'  ca_file: "{certs.ca_file}"\n{extra}\n}}\n'
    )


@contextlib.asynccontextmanager
async def both(tmp_path: Path, text: str) -> AsyncIterator[dict[str, tuple[str, str]]]:
    """Brook and nats-server started from the config file `text`, each with monitoring:
    (client URL, monitoring URL) by name."""
    path = tmp_path / "server.conf"
    path.write_text(text)
    http_port = free_port()
    with run_nats_server("-c", str(path), "-m", str(http_port), jetstream=False) as nats_url:
        wait_for_port(http_port)
        settings = load_conf_file(str(path)).replace(http_port=-1)
        async with brook.serve(settings=settings) as server:
            assert server.monitor is not None
            yield {
                "brook": (server.url, f"http://127.0.0.1:{server.monitor.port}"),
                "nats-server": (nats_url, f"http://127.0.0.1:{http_port}"),
            }


async def get(url: str) -> dict[str, Any]:
    def fetch() -> dict[str, Any]:
        with urllib.request.urlopen(url, timeout=5) as resp:
            body: dict[str, Any] = json.loads(resp.read())
            return body

    return await asyncio.to_thread(fetch)


async def compare(
    urls: dict[str, tuple[str, str]], scenario: Callable[[str, str], Awaitable[Any]]
) -> Any:
    outcomes = {name: await scenario(*pair) for name, pair in urls.items()}
    assert outcomes["brook"] == outcomes["nats-server"], json.dumps(outcomes, default=str)
    return outcomes["brook"]


def entry(connz: dict[str, Any]) -> dict[str, Any]:
    (conn,) = connz["connections"]
    for k in _TRANSIENT:
        assert isinstance(conn[k], int), conn
        assert conn[k] >= 0, conn
    return {k: v for k, v in conn.items() if k not in _VARYING | _TRANSIENT}


async def test_connz_shows_tls_and_with_auth_the_peer_certificates_and_user(
    tmp_path: Path, certs: Certs
) -> None:
    """A TLS 1.2 client limited to one suite (so that both servers must agree on it)
    presenting a certificate and logging in as alice: /connz shows the version and Go's
    name of the suite; `auth=true` adds the certificate (subject as Go writes it, the
    hashes of its public key and of itself), the user and the account's name tag."""
    alice = certs.client("alice")
    conf = tls_block(certs, "verify: true\ntimeout: 2") + (
        "authorization { users: [{user: alice, password: pw}] }\n"
    )
    context = certs.context(alice)
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers("ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256")

    async def scenario(url: str, monitor: str) -> Any:
        tls_url = url.replace("nats://", "tls://")
        nc = await nats.connect(
            tls_url, tls=context, user="alice", password="pw", allow_reconnect=False
        )
        try:
            plain = entry(await get(f"{monitor}/connz"))
            auth = entry(await get(f"{monitor}/connz?auth=true"))
        finally:
            await nc.close()
        return plain, auth

    async with both(tmp_path, conf) as urls:
        plain, auth = await compare(urls, scenario)
    assert plain["tls_version"] == "1.2"
    assert plain["tls_cipher_suite"].startswith("TLS_ECDHE_")
    assert "tls_peer_certs" not in plain
    assert "authorized_user" not in plain
    peer, ca = auth["tls_peer_certs"]  # trustme's chain file holds the CA too
    assert peer["subject"].startswith("CN=alice,OU=")
    assert ca["subject"].startswith("OU=Testing CA #")
    assert auth["authorized_user"] == "alice"
    assert auth["name_tag"] == "$G"


async def test_connz_shows_the_whole_chain_the_client_presented(
    tmp_path: Path, certs: Certs
) -> None:
    """A client whose certificate an intermediate CA issued presents both: `auth=true`
    lists them in the order sent (nats-server's `PeerCertificates`), on every Python
    Brook runs on (3.13's `get_unverified_chain`, the same call of `_ssl` before it)."""
    intermediate = certs.ca.create_child_ca()
    carol = certs.client("carol", ca=intermediate)
    conf = tls_block(certs, "verify: true\ntimeout: 2")

    async def scenario(url: str, monitor: str) -> Any:
        nc = await nats.connect(
            url.replace("nats://", "tls://"), tls=certs.context(carol), allow_reconnect=False
        )
        try:
            return entry(await get(f"{monitor}/connz?auth=true"))["tls_peer_certs"]
        finally:
            await nc.close()

    async with both(tmp_path, conf) as urls:
        peers = await compare(urls, scenario)
    subjects = [peer["subject"].split(",")[0] for peer in peers]
    assert subjects[0] == "CN=carol"
    assert len(subjects) == 2  # carol's, then the intermediate's that issued it
    assert subjects[1].startswith("OU=Testing CA #")


async def test_tls_13_connz_fields(tmp_path: Path, certs: Certs) -> None:
    """TLS 1.3: the same version and the same kind of suite name. Which suite is chosen
    differs (Go prefers AES-128-GCM; OpenSSL's order, which Python's `ssl` cannot change
    for TLS 1.3, prefers AES-256-GCM: docs/compatibility.md)."""
    conf = tls_block(certs, "timeout: 2")

    async def scenario(url: str, monitor: str) -> Any:
        nc = await nats.connect(url.replace("nats://", "tls://"), tls=certs.context())
        try:
            conn = entry(await get(f"{monitor}/connz?auth=1"))
        finally:
            await nc.close()
        suite = conn.pop("tls_cipher_suite")
        return conn, suite.split("_")[:2]

    async with both(tmp_path, conf) as urls:
        conn, suite = await compare(urls, scenario)
    assert conn["tls_version"] == "1.3"
    assert suite == ["TLS", "AES"]
    assert "tls_peer_certs" not in conn  # no client certificate was asked for


@pytest.mark.parametrize(
    ("conf", "login", "shown"),
    [
        ("authorization { token: s3cret }", {"token": "s3cret"}, "[REDACTED]"),
        ("", {"user": "bob", "password": "anything"}, "bob"),
        ("", {}, None),
    ],
    ids=["token", "no-auth-with-a-user", "no-auth"],
)
async def test_connz_authorized_user_as_nats_server(
    tmp_path: Path, conf: str, login: dict[str, str], shown: str | None
) -> None:
    """nats-server's `getRawAuthUser`: a token is never shown, and a name a client gives
    is shown even where the server asks for no credentials."""

    async def scenario(url: str, monitor: str) -> Any:
        nc = await nats.connect(url, allow_reconnect=False, **login)
        try:
            return (
                entry(await get(f"{monitor}/connz")).get("authorized_user"),
                entry(await get(f"{monitor}/connz?auth=true")).get("authorized_user"),
            )
        finally:
            await nc.close()

    async with both(tmp_path, conf) as urls:
        assert await compare(urls, scenario) == (None, shown)


_VARZ_TLS = ("tls_required", "tls_verify", "tls_timeout", "auth_timeout", "tls_cert_not_after")


async def varz_fields(url: str, monitor: str) -> dict[str, Any]:
    varz = await get(f"{monitor}/varz")
    out = {k: varz.get(k) for k in _VARZ_TLS}
    websocket = dict(varz["websocket"])
    out["websocket_has_port"] = bool(websocket.pop("port", 0))
    out["websocket"] = websocket
    return out


async def test_varz_tls_fields_and_websocket_section(tmp_path: Path, certs: Certs) -> None:
    """The client port's TLS settings, its auth timeout (nats-server's default with TLS:
    the TLS timeout plus one second), the certificate's expiry, and the `websocket {}`
    block as nats-server shows it."""
    pin = certs.server_pin()
    conf = (
        tls_block(certs, "verify: true\ntimeout: 3")
        + "authorization { users: [{user: alice, password: pw}] }\n"
        + "websocket {\n  port: -1\n"
        + tls_block(certs, f'verify_and_map: true\npinned_certs: ["{pin}"]')
        + '  handshake_timeout: "1500ms"\n  same_origin: true\n  compression: true\n'
        + '  advertise: "ws.example.com:8443"\n  allowed_origins: ["http://a.example.com"]\n'
        + "  no_auth_user: alice\n  authorization { timeout: 4 }\n}\n"
    )
    async with both(tmp_path, conf) as urls:
        got = await compare(urls, varz_fields)
    assert got["auth_timeout"] == 4  # 3 + 1
    assert (got["tls_required"], got["tls_verify"], got["tls_timeout"]) == (True, True, 3)
    assert got["tls_cert_not_after"]
    assert got["websocket_has_port"]
    assert got["websocket"] == {
        "host": "0.0.0.0",
        "advertise": "ws.example.com:8443",
        "no_auth_user": "alice",
        "handshake_timeout": 1_500_000_000,
        "auth_timeout": 4,
        "tls_map": True,
        "tls_pinned_certs": [pin],
        "same_origin": True,
        "allowed_origins": ["http://a.example.com"],
        "compression": True,
        "tls_cert_not_after": got["tls_cert_not_after"],
    }


async def test_varz_without_tls_or_websocket(tmp_path: Path) -> None:
    async with both(tmp_path, "port: -1\n") as urls:
        got = await compare(urls, varz_fields)
    assert got["websocket"] == {}
    assert not got["websocket_has_port"]
    assert got["auth_timeout"] == 2
    assert got["tls_cert_not_after"] is None


async def test_connz_with_auth_names_the_account(tmp_path: Path) -> None:
    """`auth=true`: a client of a configured account has `account` and `name_tag`; one of
    `$G` only the name tag."""
    conf = (
        "accounts {\n  A: { users: [{user: a, password: a}] }\n}\n"
        "authorization { users: [{user: g, password: g}] }\n"
    )

    async def scenario(url: str, monitor: str) -> Any:
        seen = []
        for user in ("a", "g"):
            nc = await nats.connect(url, user=user, password=user, allow_reconnect=False)
            try:
                conn = entry(await get(f"{monitor}/connz?auth=true"))
            finally:
                await nc.close()
            seen.append({k: conn.get(k) for k in ("authorized_user", "account", "name_tag")})
        return seen

    async with both(tmp_path, conf) as urls:
        got = await compare(urls, scenario)
    assert got == [
        {"authorized_user": "a", "account": "A", "name_tag": "A"},
        {"authorized_user": "g", "account": None, "name_tag": "$G"},
    ]
