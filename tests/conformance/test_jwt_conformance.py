"""Decentralized (JWT) auth conformance: one operator config, the same logins on Brook
and nats-server.

Each test writes an operator-mode config (`operator` file, `resolver: MEMORY`,
`resolver_preload`) with JWTs made for the test (tests/support/jwts.py), starts
nats-server from it and Brook from the same file, and compares what each login comes to:
the PONG or the exact `-ERR`, and whether the connection is closed. Then nats-py logs in
with a creds file (`user_credentials=`), and the user's permissions, limits and expiry
are compared, and config errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client as NatsClient

import brook
from brook.config.conf import load_conf_file
from brook.config.settings import ConfigError
from tests.conformance.test_account_limits_conformance import SCENARIOS as LIMIT_SCENARIOS
from tests.conformance.test_account_limits_conformance import run as run_limit_steps
from tests.support.config_errors import nats_server_error
from tests.support.jwts import (
    Key,
    account_jwt,
    account_key,
    b64,
    creds,
    encode_v1,
    operator_jwt,
    operator_key,
    user_jwt,
    user_key,
)
from tests.support.natsserver import free_port, run_nats_server, wait_for_port
from tests.support.raw import PONG, Err, RawClient, ServerOp
from tests.support.websocket import WsClient, frame

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(90)]

VIOLATION = Err("Authorization Violation")
IN = ((PONG,), False)
REFUSED = ((VIOLATION,), True)


@dataclass
class Trust:
    """An operator (with a signing key), the accounts the resolver holds, and the keys
    of each; the config that trusts them."""

    operator: Key = field(default_factory=operator_key)
    operator_signer: Key = field(default_factory=operator_key)
    preload: dict[str, str] = field(default_factory=dict)
    operator_claims: dict[str, Any] = field(default_factory=dict)

    def operator_token(self) -> str:
        return operator_jwt(
            self.operator, signing_keys=[self.operator_signer.public], **self.operator_claims
        )

    def account(self, signer: Key | None = None, **nats: Any) -> Key:
        """A new account issued by `signer` (default the operator), preloaded."""
        key = account_key()
        self.preload[key.public] = account_jwt(key, signer or self.operator, **nats)
        return key

    def config(self, directory: Path, extra: str = "") -> Path:
        (directory / "op.jwt").write_text(
            "-----BEGIN NATS OPERATOR JWT-----\n"
            f"{self.operator_token()}\n------END NATS OPERATOR JWT------\n"
        )
        preload = "".join(f'  {key}: "{token}"\n' for key, token in self.preload.items())
        path = directory / "server.conf"
        path.write_text(
            f"operator: {directory / 'op.jwt'}\nresolver: MEMORY\n"
            f"resolver_preload: {{\n{preload}}}\n{extra}"
        )
        return path


@contextlib.asynccontextmanager
async def servers(trust: Trust, extra: str = "") -> AsyncIterator[tuple[str, str]]:
    """(nats-server URL, Brook URL), both started from `trust`'s config."""
    with tempfile.TemporaryDirectory(prefix="brook-jwt-") as tmp:
        path = trust.config(Path(tmp), extra)
        with run_nats_server("-c", str(path), jetstream=False) as reference:
            async with brook.serve(port=0, settings=load_conf_file(str(path))) as srv:
                yield reference, srv.url


def outcome(ops: list[ServerOp], closed: bool) -> tuple[tuple[ServerOp, ...], bool]:
    return tuple(op for op in ops if op == PONG or isinstance(op, Err)), closed


async def login(url: str, token: str | None, signer: Key | None) -> tuple[Any, bool]:
    """CONNECT with `token` as `jwt` and, if `signer`, its signature of the nonce."""
    async with RawClient.connect_url(url) as c:
        options: dict[str, Any] = {}
        if token is not None:
            options["jwt"] = token
        if signer is not None:
            options["sig"] = b64(signer.sign(c.info.get("nonce", "").encode()))
        ops = await c.handshake(protocol=0, **options)
        if PONG not in ops:
            await c.expect_closed(1.0)
        return outcome(ops, c.closed)


Case = Callable[[], tuple[str | None, Key | None]]


async def test_logins_with_user_jwts() -> None:
    """Every check of the user JWT chain, each login compared; all but the noted ones are
    refused with `Authorization Violation` and the connection closed."""
    trust = Trust()
    account = trust.account()
    plain_signer, scoped_signer = account_key(), account_key()
    revoked = user_key()
    now = int(time.time())
    signed = trust.account(
        signing_keys=[
            plain_signer.public,
            {
                "kind": "user_scope",
                "key": scoped_signer.public,
                "role": "r",
                "template": {"pub": {"allow": ["scoped.>"]}, "subs": -1, "payload": -1},
            },
        ],
        revocations={revoked.public: now + 3600},
    )
    everyone_revoked = trust.account(revocations={"*": now + 3600})
    no_bearer = trust.account(limits={"disallow_bearer": True, "conn": -1})
    by_operator_signer = trust.account(trust.operator_signer)
    expired_account = trust.account(top={"exp": now - 10})
    untrusted = trust.account(operator_key())
    missing = account_key()
    user, other = user_key(), user_key()
    cases: dict[str, tuple[Case, tuple[Any, bool]]] = {
        "valid": (lambda: (user_jwt(user, account), user), IN),
        "no jwt": (lambda: (None, user), REFUSED),
        "no signature": (lambda: (user_jwt(user, account), None), REFUSED),
        "signed by another user key": (lambda: (user_jwt(user, account), other), REFUSED),
        "not a jwt": (lambda: ("abc", user), REFUSED),
        "bad base64": (lambda: ("e30.!!.x", user), REFUSED),
        "tampered": (lambda: (_tampered(user_jwt(user, account)), user), REFUSED),
        "expired": (lambda: (user_jwt(user, account, top={"exp": now - 10}), user), REFUSED),
        "not yet valid": (
            lambda: (user_jwt(user, account, top={"nbf": now + 3600}), user),
            REFUSED,
        ),
        "revoked": (lambda: (user_jwt(revoked, signed), revoked), REFUSED),
        "all revoked": (lambda: (user_jwt(user, everyone_revoked), user), REFUSED),
        "account missing": (lambda: (user_jwt(user, missing), user), REFUSED),
        "account by an untrusted operator": (lambda: (user_jwt(user, untrusted), user), REFUSED),
        "account expired": (lambda: (user_jwt(user, expired_account), user), REFUSED),
        "account by the operator's signing key": (
            lambda: (user_jwt(user, by_operator_signer), user),
            IN,
        ),
        "account signing key": (
            lambda: (user_jwt(user, plain_signer, issuer_account=signed.public), user),
            IN,
        ),
        "unknown signing key": (
            lambda: (user_jwt(user, account_key(), issuer_account=signed.public), user),
            REFUSED,
        ),
        "scoped signing key": (
            lambda: (_scoped_user(user, scoped_signer, signed), user),
            IN,
        ),
        "scoped signing key, user with permissions": (
            lambda: (user_jwt(user, scoped_signer, issuer_account=signed.public), user),
            REFUSED,
        ),
        "bearer without signature": (
            lambda: (user_jwt(user, account, bearer_token=True), None),
            IN,
        ),
        "bearer refused by the account": (
            lambda: (user_jwt(user, no_bearer, bearer_token=True), None),
            REFUSED,
        ),
        "connection type allowed": (
            lambda: (user_jwt(user, account, allowed_connection_types=["STANDARD"]), user),
            IN,
        ),
        "connection type not allowed": (
            lambda: (user_jwt(user, account, allowed_connection_types=["WEBSOCKET"]), user),
            REFUSED,
        ),
        "only unknown connection types": (
            lambda: (user_jwt(user, account, allowed_connection_types=["CARRIER"]), user),
            REFUSED,
        ),
        "unknown and allowed connection types": (
            lambda: (
                user_jwt(user, account, allowed_connection_types=["CARRIER", "standard"]),
                user,
            ),
            IN,
        ),
        "source allowed": (lambda: (user_jwt(user, account, src=["127.0.0.0/8"]), user), IN),
        "source not allowed": (
            lambda: (user_jwt(user, account, src=["10.0.0.0/8"]), user),
            REFUSED,
        ),
        "bad cidr": (lambda: (user_jwt(user, account, src=["127.0.0.1"]), user), REFUSED),
        "outside connect times": (
            lambda: (user_jwt(user, account, times=[_window_not_now()]), user),
            REFUSED,
        ),
        "inside connect times": (
            lambda: (
                user_jwt(user, account, times=[{"start": "00:00:00", "end": "23:59:59"}]),
                user,
            ),
            IN,
        ),
        "bad subject in permissions": (
            lambda: (user_jwt(user, account, pub={"allow": ["a..b"]}), user),
            REFUSED,
        ),
        "user claim issued by a user key": (lambda: (user_jwt(user, other), user), REFUSED),
        "an account jwt as user jwt": (lambda: (trust.preload[account.public], user), REFUSED),
    }
    async with servers(trust) as (reference, ours):
        for name, (case, expected) in cases.items():
            token, signer = case()
            got = await asyncio.gather(login(reference, token, signer), login(ours, token, signer))
            assert got[0] == expected, (name, got)
            assert got[1] == got[0], (name, got)


def _tampered(token: str) -> str:
    header, body, sig = token.split(".")
    middle = len(body) // 2
    flipped = "A" if body[middle] != "A" else "B"
    return f"{header}.{body[:middle]}{flipped}{body[middle + 1 :]}.{sig}"


def _scoped_user(user: Key, signer: Key, account: Key) -> str:
    """A user of a scoped signing key: no permissions or limits of its own."""
    return user_jwt(user, signer, issuer_account=account.public, subs=None, data=None, payload=None)


def _window_not_now() -> dict[str, str]:
    """A one-minute connect window twelve hours from now (local time, as both servers
    read a window without `times_location`)."""
    start = time.localtime(time.time() + 12 * 3600)
    end = time.localtime(time.time() + 12 * 3600 + 60)
    return {"start": time.strftime("%H:%M:%S", start), "end": time.strftime("%H:%M:%S", end)}


async def _raw_login(url: str, options: dict[str, Any]) -> tuple[Any, bool]:
    async with RawClient.connect_url(url) as c:
        ops = await c.handshake(protocol=0, **options)
        if PONG not in ops:
            await c.expect_closed(1.0)
        return outcome(ops, c.closed)


async def test_connect_options_of_the_wrong_type() -> None:
    """A `jwt` or `sig` that is not a string: nats-server cannot read the CONNECT and
    closes without a word; so does Brook."""
    trust = Trust()
    account = trust.account()
    user = user_key()
    cases: list[dict[str, Any]] = [
        {"jwt": 123},
        {"jwt": {"a": 1}},
        {"jwt": ["x"]},
        {"jwt": user_jwt(user, account), "sig": 5},
        {"jwt": "", "sig": ""},
    ]
    async with servers(trust) as (reference, ours):
        for options in cases:
            got = await asyncio.gather(_raw_login(reference, options), _raw_login(ours, options))
            assert got[1] == got[0], (options, got)
            assert got[0][1], options  # closed


async def test_an_oversized_jwt_is_refused_and_others_carry_on() -> None:
    """A CONNECT carrying a huge JWT is refused by both; a client logged in before is not
    affected."""
    trust = Trust()
    account = trust.account()
    user = user_key()
    huge = user_jwt(user, account, tags=["x" * 70_000])
    async with servers(trust) as (reference, ours):
        for url in (reference, ours):
            async with RawClient.connect_url(url) as bystander:
                nonce = bystander.info["nonce"]
                ok = await bystander.handshake(
                    protocol=0, jwt=user_jwt(user, account), sig=b64(user.sign(nonce.encode()))
                )
                assert PONG in ok
                refused = await login(url, huge, user)
                assert refused[1], refused
                await bystander.send(b"PING\r\n")
                assert PONG in await bystander.read_ops(until=lambda op: op == PONG)
        assert await login(reference, huge, user) == await login(ours, huge, user)


# ------------------------------------------------------------------ nats-py with creds files


async def _connect(url: str, creds_file: Path, errors: list[str]) -> NatsClient:
    async def on_error(exc: Exception) -> None:
        errors.append(str(exc))

    return await nats.connect(
        url,
        user_credentials=str(creds_file),
        error_cb=on_error,
        allow_reconnect=False,
        connect_timeout=2,
    )


async def _permissions_outcome(url: str, creds_file: Path) -> tuple[list[str], list[bytes]]:
    errors: list[str] = []
    nc = await _connect(url, creds_file, errors)
    got: list[bytes] = []
    try:
        sub = await nc.subscribe("allowed.>")
        await nc.subscribe("secret.>")  # denied: an async error, the connection stays
        await nc.publish("allowed.one", b"1")
        await nc.publish("denied.one", b"2")  # not allowed to publish
        await nc.flush()
        with contextlib.suppress(TimeoutError):
            while True:
                got.append((await sub.next_msg(timeout=0.3)).data)
        await nc.flush()
        assert nc.is_connected
    finally:
        await nc.close()
    return sorted(errors), got


async def test_nats_py_creds_login_with_permissions(tmp_path: Path) -> None:
    trust = Trust()
    account = trust.account()
    user = user_key()
    token = user_jwt(
        user,
        account,
        pub={"allow": ["allowed.>"]},
        sub={"allow": ["allowed.>"], "deny": ["secret.>"]},
    )
    creds_file = tmp_path / "user.creds"
    creds_file.write_text(creds(token, user))
    async with servers(trust) as (reference, ours):
        theirs = await _permissions_outcome(reference, creds_file)
        mine = await _permissions_outcome(ours, creds_file)
    assert theirs[1] == [b"1"]
    assert any("permissions violation for publish" in e for e in theirs[0]), theirs
    assert mine == theirs


async def test_account_default_permissions_apply_to_users_without_their_own(
    tmp_path: Path,
) -> None:
    trust = Trust()
    account = trust.account(default_permissions={"pub": {"allow": ["allowed.>"]}})
    user = user_key()
    creds_file = tmp_path / "user.creds"
    creds_file.write_text(creds(user_jwt(user, account), user))
    async with servers(trust) as (reference, ours):
        theirs = await _permissions_outcome(reference, creds_file)
        mine = await _permissions_outcome(ours, creds_file)
    assert any("permissions violation for publish" in e for e in theirs[0]), theirs
    assert mine == theirs


async def _session(url: str, token: str, user: Key, commands: bytes) -> tuple[Any, bool]:
    """Log in with `token`, send `commands` and a PING: the -ERRs and the PONG that came
    back, and whether the connection was closed."""
    async with RawClient.connect_url(url) as c:
        nonce = c.info["nonce"]
        assert PONG in await c.handshake(protocol=0, jwt=token, sig=b64(user.sign(nonce.encode())))
        await c.send(commands + b"PING\r\n")
        ops = await c.read_ops(timeout=2.0, until=lambda op: op == PONG, allow_eof=True)
        if PONG not in ops:
            await c.expect_closed(1.0)
        return outcome(ops, c.closed)


async def test_user_and_account_payload_limits() -> None:
    """The smaller of the user's and its account's `payload` bounds a publish: beyond
    it, `Maximum Payload Violation` and the connection closed."""
    trust = Trust()
    account = trust.account(limits={"payload": 64, "subs": -1, "conn": -1})
    user = user_key()
    token = user_jwt(user, account, payload=1000)
    async with servers(trust) as (reference, ours):
        for size, expected in ((64, IN), (65, ((Err("Maximum Payload Violation"),), True))):
            pub = f"PUB big {size}\r\n".encode() + b"x" * size + b"\r\n"
            got = await asyncio.gather(
                _session(reference, token, user, pub), _session(ours, token, user, pub)
            )
            assert got[0] == expected, (size, got)
            assert got[1] == got[0], (size, got)


async def test_user_and_account_subscription_limits() -> None:
    """The smaller of the user's and its account's `subs`: one more subscription is
    refused with nats-server's error, the connection stays."""
    trust = Trust()
    account = trust.account(limits={"subs": 2, "payload": -1, "conn": -1})
    user = user_key()
    subs = b"SUB s.1 1\r\nSUB s.2 2\r\nSUB s.3 3\r\n"
    async with servers(trust) as (reference, ours):
        for user_subs, expected in (
            (5, ((Err("maximum subscriptions exceeded"), PONG), False)),
            (1, ((Err("maximum subscriptions exceeded"),) * 2 + (PONG,), False)),
            (-1, ((Err("maximum subscriptions exceeded"), PONG), False)),
        ):
            token = user_jwt(user, account, subs=user_subs)
            got = await asyncio.gather(
                _session(reference, token, user, subs), _session(ours, token, user, subs)
            )
            assert got[0] == expected, (user_subs, got)
            assert got[1] == got[0], (user_subs, got)


async def _zero_subs(url: str, token: str, user: Key) -> tuple[bool, bool]:
    async with RawClient.connect_url(url) as c:
        nonce = c.info["nonce"]
        ops = await c.handshake(protocol=0, jwt=token, sig=b64(user.sign(nonce.encode())))
        ops += await c.read_ops(
            timeout=1.0, until=lambda op: isinstance(op, Err), allow_eof=True, allow_timeout=True
        )
        closed = await c.expect_closed(2.0)
        return Err("maximum subscriptions exceeded") in ops, closed


async def test_a_user_jwt_allowing_no_subscriptions_is_told_and_closed() -> None:
    """`subs: 0` is a limit of none (nsc writes -1 for no limit): nats-server tells the
    client at once and closes it (its PONG may come first, from another goroutine)."""
    trust = Trust()
    account = trust.account()
    user = user_key()
    token = user_jwt(user, account, subs=0)
    async with servers(trust) as (reference, ours):
        got = await asyncio.gather(
            _zero_subs(reference, token, user), _zero_subs(ours, token, user)
        )
    assert list(got) == [(True, True), (True, True)]


async def _expiry_outcome(url: str, token: str, user: Key) -> tuple[Any, ...]:
    async with RawClient.connect_url(url) as c:
        ops = await c.handshake(protocol=0, jwt=token, sig=b64(user.sign(c.info["nonce"].encode())))
        assert PONG in ops
        later = await c.read_ops(timeout=4.0, until=lambda op: isinstance(op, Err))
        closed = await c.expect_closed(2.0)
        return tuple(op for op in later if isinstance(op, Err)), closed


async def test_a_login_ends_when_the_user_jwt_expires() -> None:
    trust = Trust()
    account = trust.account()
    user = user_key()
    token = user_jwt(user, account, top={"exp": int(time.time()) + 2})
    async with servers(trust) as (reference, ours):
        got = await asyncio.gather(
            _expiry_outcome(reference, token, user), _expiry_outcome(ours, token, user)
        )
    assert got[0] == ((Err("User Authentication Expired"),), True)
    assert got[1] == got[0]


async def test_clients_are_closed_when_their_account_jwt_expires() -> None:
    trust = Trust()
    account = trust.account(top={"exp": int(time.time()) + 2})
    user = user_key()
    token = user_jwt(user, account)
    async with servers(trust) as (reference, ours):
        got = await asyncio.gather(
            _expiry_outcome(reference, token, user), _expiry_outcome(ours, token, user)
        )
    assert got[0] == ((Err("Account Authentication Expired"),), True)
    assert got[1] == got[0]


# ------------------------------------------------------------------ config errors


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (
            "authorization { users: [{user: a, password: b}] }\n",
            "operators do not allow users to be configured directly",
        ),
        ("no_auth_user: a\n", "no_auth_user not compatible with Trusted Operator"),
        ("resolver: NONSENSE\n", "error parsing account resolver, should be MEM or"),
    ],
    ids=["users", "no-auth-user", "bad-resolver"],
)
def test_config_errors(tmp_path: Path, extra: str, words: str) -> None:
    trust = Trust()
    trust.account()
    path = trust.config(tmp_path, extra)
    assert words in nats_server_error(path)
    with pytest.raises(ConfigError, match=words):
        load_conf_file(str(path))


def test_operator_without_resolver_and_bad_files(tmp_path: Path) -> None:
    trust = Trust()
    (tmp_path / "op.jwt").write_text(trust.operator_token())
    # nats-server falls back on the operator's account server URL (none here: it cannot
    # fetch from ""); Brook says what is missing.
    path = tmp_path / "c.conf"
    path.write_text(f"operator: {tmp_path / 'op.jwt'}\n")
    assert "could not fetch" in nats_server_error(path)
    with pytest.raises(ConfigError, match="operators require an account resolver"):
        load_conf_file(str(path))
    cases = {
        f"operator: {tmp_path / 'none.jwt'}\nresolver: MEMORY\n": "error parsing operator JWT",
        "operator: eyJnot.a.jwt\nresolver: MEMORY\n": "error parsing operator JWT",
        (
            f"operator: {tmp_path / 'op.jwt'}\nresolver: MEMORY\n"
            f"resolver_preload: {{ {account_key().public}: nonsense }}\n"
        ): "invalid account JWT",
    }
    for config, words in cases.items():
        path.write_text(config)
        assert words in nats_server_error(path), config
        with pytest.raises(ConfigError, match=words):
            load_conf_file(str(path))


async def _nats_py_login(url: str, creds_file: Path) -> str:
    """'in', or the error nats-py's connect ended in."""
    try:
        nc = await nats.connect(
            url, user_credentials=str(creds_file), allow_reconnect=False, connect_timeout=2
        )
    except Exception as exc:  # nats-py raises its own error types for a refused login
        return type(exc).__name__
    await nc.close()
    return "in"


async def test_connection_types_over_websocket(tmp_path: Path) -> None:
    """`allowed_connection_types` tells WebSocket clients from plain ones."""
    trust = Trust()
    account = trust.account()
    user = user_key()
    ports = {"nats-server": free_port(), "brook": free_port()}
    paths = {}
    for name, port in ports.items():
        (tmp_path / name).mkdir()
        paths[name] = trust.config(
            tmp_path / name, f"websocket {{\n  port: {port}\n  no_tls: true\n}}\n"
        )
    results: dict[str, list[str]] = {}
    with run_nats_server("-c", str(paths["nats-server"]), jetstream=False) as reference:
        wait_for_port(ports["nats-server"])
        settings = load_conf_file(str(paths["brook"]))
        async with brook.serve(port=0, settings=settings) as srv:
            for name, tcp in (("nats-server", reference), ("brook", srv.url)):
                ws = f"ws://127.0.0.1:{ports[name]}"
                results[name] = []
                for types in (["WEBSOCKET"], ["STANDARD"], ["STANDARD", "WEBSOCKET"]):
                    creds_file = tmp_path / "user.creds"
                    token = user_jwt(user, account, allowed_connection_types=types)
                    creds_file.write_text(creds(token, user))
                    results[name] += [
                        await _nats_py_login(ws, creds_file),
                        await _nats_py_login(tcp, creds_file),
                    ]
    assert results["nats-server"][:2] == ["in", results["nats-server"][1]]
    assert results["nats-server"][1] != "in"
    assert results["brook"] == results["nats-server"]


async def _cookie_login(port: int, cookie: str, token: str | None, signer: Key | None) -> Any:
    """Over WebSocket with `cookie` in the upgrade request: CONNECT with `token` as `jwt`
    (if given) and `signer`'s signature of the nonce (if given), then PING; the NATS lines
    the server sent up to PONG but INFOs, and the CLOSE frame's payload if it closed."""
    async with WsClient.connect(port, {"Cookie": cookie}) as ws:
        info = json.loads((await ws.read_nats(b"\r\n"))[5:])
        options: dict[str, Any] = {"verbose": False, "protocol": 1}
        if token is not None:
            options["jwt"] = token
        if signer is not None:
            options["sig"] = b64(signer.sign(info["nonce"].encode()))
        await ws.send(frame(b"CONNECT %s\r\nPING\r\n" % json.dumps(options).encode()))
        data, closed = b"", None
        while b"PONG\r\n" not in data and closed is None:
            opcode, payload = await ws.read_frame()
            closed = payload if opcode == 8 else None
            data += payload if opcode == 2 else b""
        return [line for line in data.splitlines() if not line.startswith(b"INFO ")], closed


async def test_jwt_cookie_stands_in_for_connects_jwt(tmp_path: Path) -> None:
    """`jwt_cookie` in operator mode: the named cookie of the upgrade request is the user
    JWT when CONNECT has none (a bearer token alone, else with CONNECT's signature of the
    nonce); CONNECT's own `jwt` wins over it; other cookies are not looked at."""
    trust = Trust()
    account = trust.account()
    user, stranger = user_key(), user_key()
    token = user_jwt(user, account)
    bearer = user_jwt(user, account, bearer_token=True)
    cases = {
        "bearer cookie": (f"jwt={bearer}", None, None),
        "cookie and signature": (f"other=x; jwt={token}", None, user),
        "cookie without signature": (f"jwt={token}", None, None),
        "signature of another key": (f"jwt={token}", None, stranger),
        "connect's jwt wins": (f"jwt={_tampered(token)}", token, user),
        "connect's jwt wins, refused": (f"jwt={bearer}", user_jwt(stranger, account), None),
        "another cookie's name": (f"jwt2={bearer}", None, None),
        "tampered cookie": (f"jwt={_tampered(bearer)}", None, None),
    }
    ports = {"nats-server": free_port(), "brook": free_port()}
    paths = {}
    for name, port in ports.items():
        (tmp_path / name).mkdir()
        block = f"websocket {{\n  port: {port}\n  no_tls: true\n  jwt_cookie: jwt\n}}\n"
        paths[name] = trust.config(tmp_path / name, block)
    results: dict[str, dict[str, Any]] = {}
    with run_nats_server("-c", str(paths["nats-server"]), jetstream=False):
        wait_for_port(ports["nats-server"])
        async with brook.serve(port=0, settings=load_conf_file(str(paths["brook"]))):
            for name, port in ports.items():
                results[name] = {
                    case: await _cookie_login(port, *args) for case, args in cases.items()
                }
    assert results["brook"] == results["nats-server"]
    admitted = [case for case, (lines, _) in results["brook"].items() if lines == [b"PONG"]]
    assert admitted == ["bearer cookie", "cookie and signature", "connect's jwt wins"]


async def test_account_connection_limit() -> None:
    """An account's `conn`: one client more is told and closed; once one leaves, another
    gets in. Other accounts are not affected."""
    trust = Trust()
    limited = trust.account(limits={"conn": 2, "subs": -1, "payload": -1})
    other = trust.account()
    user = user_key()

    async def steps(url: str) -> list[Any]:
        seen = []
        async with contextlib.AsyncExitStack() as stack:
            clients = []
            for _ in range(2):
                c = await stack.enter_async_context(RawClient.connect_url(url))
                nonce = c.info["nonce"]
                ops = await c.handshake(
                    protocol=0, jwt=user_jwt(user, limited), sig=b64(user.sign(nonce.encode()))
                )
                seen.append(outcome(ops, c.closed))
                clients.append(c)
            seen.append(await login(url, user_jwt(user, limited), user))
            seen.append(await login(url, user_jwt(user, other), user))
            clients[0].abort()
            await asyncio.sleep(0.3)
            seen.append(await login(url, user_jwt(user, limited), user))
        return seen

    async with servers(trust) as (reference, ours):
        theirs = await steps(reference)
        mine = await steps(ours)
    assert theirs[2] == ((Err("maximum account active connections exceeded"),), True), theirs
    assert theirs[4] == IN
    assert mine == theirs


async def test_scoped_signing_key_permission_templates() -> None:
    """A scoped key's template expanded per user: names, keys and tags (one subject per
    tag value); a tag the user lacks drops an allow entry and refuses the login in a deny
    entry."""
    trust = Trust()
    scoped = account_key()
    template = {
        "pub": {
            "allow": [
                "n.{{name()}}.>",
                "s.{{subject()}}",
                "a.{{account-name()}}.{{account-subject()}}",
                "t.{{tag(dept)}}",
                "missing.{{tag(nope)}}",
            ]
        },
        "subs": -1,
        "payload": -1,
    }
    scope = {"kind": "user_scope", "key": scoped.public, "role": "r", "template": template}
    account = trust.account(signing_keys=[scope])
    user = user_key()
    token = user_jwt(
        user,
        scoped,
        issuer_account=account.public,
        subs=None,
        data=None,
        payload=None,
        tags=["dept:eng", "dept:ops", "other:x"],
    )
    subjects = [
        "n.user.x",
        f"s.{user.public}",
        f"a.acc.{account.public}",
        "t.eng",
        "t.ops",
        "t.other",
        "missing.nope",
        "elsewhere",
    ]
    pubs = b"".join(f"PUB {subject} 0\r\n\r\n".encode() for subject in subjects)
    denied = user_jwt(
        user,
        account_key(),
        issuer_account=account.public,
    )
    bad_deny = {"pub": {"deny": ["d.{{tag(nope)}}"]}, "subs": -1, "payload": -1}
    strict_key = account_key()
    strict_scope = {
        "kind": "user_scope",
        "key": strict_key.public,
        "role": "r",
        "template": bad_deny,
    }
    strict_account = trust.account(signing_keys=[strict_scope])
    strict_user = user_jwt(
        user, strict_key, issuer_account=strict_account.public, subs=None, data=None, payload=None
    )
    async with servers(trust) as (reference, ours):
        got = await asyncio.gather(
            _session(reference, token, user, pubs), _session(ours, token, user, pubs)
        )
        refused = await asyncio.gather(login(reference, denied, user), login(ours, denied, user))
        strict = await asyncio.gather(
            login(reference, strict_user, user), login(ours, strict_user, user)
        )
    errors = [op for op in got[0][0] if isinstance(op, Err)]
    assert len(errors) == 3, got[0]  # t.other, missing.nope, elsewhere
    assert got[1] == got[0]
    assert list(refused) == [REFUSED, REFUSED]
    assert list(strict) == [REFUSED, REFUSED]


# ------------------------------------------------------------------ JWT accounts


async def _isolation(url: str, a: Path, a_too: Path, b: Path) -> list[Any]:
    """Two users of account A and one of B on the same subject: who hears whom."""
    clients = [await _connect(url, path, []) for path in (a, a_too, b)]
    try:
        subs = [await c.subscribe("shared.subject") for c in clients]
        for c in clients:
            await c.flush()
        for i, c in enumerate(clients):
            await c.publish("shared.subject", f"from {i}".encode())
            await c.flush()
        heard: list[Any] = []
        for sub in subs:
            got = []
            with contextlib.suppress(TimeoutError):
                while True:
                    got.append((await sub.next_msg(timeout=0.3)).data)
            heard.append(sorted(got))
        return heard
    finally:
        for c in clients:
            await c.close()


async def test_users_of_different_accounts_are_isolated(tmp_path: Path) -> None:
    trust = Trust()
    account_a, account_b = trust.account(), trust.account()
    paths = []
    for name, account in (("a", account_a), ("a_too", account_a), ("b", account_b)):
        user = user_key()
        path = tmp_path / f"{name}.creds"
        path.write_text(creds(user_jwt(user, account), user))
        paths.append(path)
    async with servers(trust) as (reference, ours):
        theirs = await _isolation(reference, *paths)
        mine = await _isolation(ours, *paths)
    assert theirs == [[b"from 0", b"from 1"], [b"from 0", b"from 1"], [b"from 2"]]
    assert mine == theirs


@contextlib.asynccontextmanager
async def js_servers(trust: Trust, extra: str = "") -> AsyncIterator[tuple[str, str]]:
    """Both servers from `trust`'s config, with JetStream in a temporary directory."""
    with tempfile.TemporaryDirectory(prefix="brook-jwt-js-") as tmp:
        path = trust.config(Path(tmp), extra)
        with run_nats_server("-c", str(path), jetstream=True) as reference:
            settings = load_conf_file(str(path))
            settings.jetstream.enabled = True
            settings.jetstream.store_dir = str(Path(tmp) / "brook")
            async with brook.serve(port=0, settings=settings) as srv:
                yield reference, srv.url


async def _account_info(url: str, creds_file: Path) -> tuple[str, Any]:
    nc = await _connect(url, creds_file, [])
    try:
        reply = await nc.request("$JS.API.INFO", b"", timeout=2)
        info = json.loads(reply.data)
        if "error" in info:
            return "error", info["error"]
        js = nc.jetstream()
        await js.add_stream(name="S", subjects=["s.>"])
        ack = await js.publish("s.1", b"x")
        return "ok", (ack.stream, ack.seq)
    finally:
        await nc.close()


async def test_jetstream_follows_the_account_jwt(tmp_path: Path) -> None:
    """An account JWT whose limits allow storage has JetStream; one without is answered
    10039 (JetStream not enabled for account)."""
    trust = Trust()
    system = trust.account()  # nats-server's JetStream in operator mode needs one
    trust.operator_claims = {"system_account": system.public}
    with_js = trust.account(
        limits={"subs": -1, "payload": -1, "conn": -1, "mem_storage": -1, "disk_storage": -1}
    )
    without = trust.account()
    paths = {}
    for name, account in (("with", with_js), ("without", without)):
        user = user_key()
        paths[name] = tmp_path / f"{name}.creds"
        paths[name].write_text(creds(user_jwt(user, account), user))
    async with js_servers(trust) as (reference, ours):
        theirs = [await _account_info(reference, p) for p in paths.values()]
        mine = [await _account_info(ours, p) for p in paths.values()]
    assert theirs[0] == ("ok", ("S", 1))
    assert theirs[1][0] == "error"
    assert theirs[1][1]["err_code"] == 10039
    assert mine == theirs


def test_the_system_account_comes_from_the_operator_jwt(tmp_path: Path) -> None:
    trust = Trust()
    system = trust.account()
    trust.operator_claims = {"system_account": system.public}
    settings = load_conf_file(str(trust.config(tmp_path)))
    assert settings.system_account == system.public
    other = trust.account()
    path = trust.config(tmp_path, f"system_account: {other.public}\n")
    words = "system_account in config and operator JWT must be identical"
    assert words in nats_server_error(path)
    with pytest.raises(ConfigError, match=words):
        load_conf_file(str(path))


def test_accounts_beside_operators_are_refused(tmp_path: Path) -> None:
    trust = Trust()
    trust.account()
    path = trust.config(tmp_path, "accounts { A: { users: [{user: a, password: b}] } }\n")
    words = "operators do not allow Accounts to be configured directly"
    assert words in nats_server_error(path)
    with pytest.raises(ConfigError, match=words):
        load_conf_file(str(path))


async def _responder_outcome(url: str, responder: Path, requester: Path) -> list[Any]:
    """The responder (allowed only to reply) answers a request, then publishes
    elsewhere: what the requester got and the responder's errors."""
    errors: list[str] = []
    server_side = await _connect(url, responder, errors)
    client_side = await _connect(url, requester, [])
    try:

        async def answer(msg: Any) -> None:
            await msg.respond(b"pong:" + msg.data)

        await server_side.subscribe("svc", cb=answer)
        await server_side.flush()
        # nats-server has once answered "no responders" to a request made right after
        # the responder's flushed SUB (seen in a loaded run): ask again for up to 2 s.
        for _ in range(20):
            with contextlib.suppress(nats.errors.NoRespondersError):
                reply = await client_side.request("svc", b"1", timeout=2)
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"no responders on {url}")
        await server_side.publish("elsewhere", b"x")
        await server_side.flush()
        await asyncio.sleep(0.2)
        return [reply.data, sorted(errors)]
    finally:
        await server_side.close()
        await client_side.close()


async def test_resp_permission_allows_replies_only(tmp_path: Path) -> None:
    """A user JWT's `resp` is allow_responses: publishing to the reply subject of a
    request it received, and nothing else without a publish allow."""
    trust = Trust()
    account = trust.account()
    responder, requester = user_key(), user_key()
    paths = {}
    for name, user, nats_fields in (
        ("responder", responder, {"resp": {"max": 1, "ttl": 0}}),
        ("requester", requester, {}),
    ):
        paths[name] = tmp_path / f"{name}.creds"
        paths[name].write_text(creds(user_jwt(user, account, **nats_fields), user))
    async with servers(trust) as (reference, ours):
        theirs = await _responder_outcome(reference, paths["responder"], paths["requester"])
        mine = await _responder_outcome(ours, paths["responder"], paths["requester"])
    assert theirs[0] == b"pong:1"
    assert any("elsewhere" in e for e in theirs[1]), theirs
    assert mine == theirs


async def test_info_in_operator_mode_asks_for_auth_and_carries_a_nonce() -> None:
    trust = Trust()
    trust.account()
    async with servers(trust) as (reference, ours):
        infos = []
        for url in (reference, ours):
            async with RawClient.connect_url(url) as c:
                infos.append((c.info.get("auth_required"), len(c.info.get("nonce", ""))))
    assert infos[0] == (True, 15)
    assert infos[1] == infos[0]


async def test_version_1_jwts_log_in_as_on_nats_server(tmp_path: Path) -> None:
    """Tokens nsc wrote before jwt v2 (nats.py's own test config has them): a version 1
    operator, accounts and users, each login and publish compared, and a nats-py creds
    login doing a request."""
    operator, signer = operator_key(), account_key()
    account, other = account_key(), account_key()
    now = int(time.time())
    revoked, plain, small, signed = user_key(), user_key(), user_key(), user_key()
    preload = {
        account.public: encode_v1(
            "account",
            account,
            operator,
            limits={"payload": 100, "subs": -1, "conn": -1},
            signing_keys=[signer.public],
            revocations={revoked.public: now + 60},
        ),
        other.public: encode_v1("account", other, operator),
    }
    (tmp_path / "op.jwt").write_text(encode_v1("operator", operator, operator))
    entries = "".join(f'  {key}: "{token}"\n' for key, token in preload.items())
    path = tmp_path / "server.conf"
    path.write_text(
        f"operator: {tmp_path / 'op.jwt'}\nresolver: MEMORY\nresolver_preload: {{\n{entries}}}\n"
    )
    header, claims, _ = encode_v1("user", plain, account).split(".")
    cases: list[tuple[str, Key]] = [
        (encode_v1("user", plain, account), plain),
        (encode_v1("user", small, account, payload=10), small),
        (encode_v1("user", signed, signer, top={"issuer_account": account.public}), signed),
        (encode_v1("user", signed, signer), signed),  # no issuer_account: unknown account
        (encode_v1("user", revoked, account), revoked),
        (f"{header}.{claims}.{b64(account.sign(f'{header}.{claims}'.encode()))}", plain),
        (encode_v1("user", plain, other), plain),  # no `limits`: `conn` 0, nobody in
    ]
    pub = b"PUB big 50\r\n" + b"x" * 50 + b"\r\nPUB big 101\r\n" + b"x" * 101 + b"\r\n"
    creds_file = tmp_path / "user.creds"
    creds_file.write_text(creds(cases[0][0], plain))
    results = []
    with run_nats_server("-c", str(path), jetstream=False) as reference:
        async with brook.serve(port=0, settings=load_conf_file(str(path))) as srv:
            for url in (reference, srv.url):
                logins = [await login(url, token, key) for token, key in cases]
                sessions = [await _session(url, token, key, pub) for token, key in cases[:3]]
                results.append((logins, sessions, await _request_reply(url, creds_file)))
    theirs, mine = results
    assert [closed for _, closed in theirs[0]] == [False, False, False, True, True, True, True]
    assert theirs[1][0] == ((Err("Maximum Payload Violation"),), True)
    assert theirs[1][1] == ((Err("Maximum Payload Violation"),), True)
    assert theirs[0][6] == ((Err("maximum account active connections exceeded"),), True)
    assert theirs[2] == b"OK!"
    assert mine == theirs


async def _request_reply(url: str, creds_file: Path) -> bytes:
    nc = await nats.connect(url, user_credentials=str(creds_file), allow_reconnect=False)
    try:

        async def reply(msg: Any) -> None:
            await nc.publish(msg.reply, b"OK!")

        await nc.subscribe("help", cb=reply)
        await nc.flush()
        return (await nc.request("help", b"I need help", timeout=2)).data
    finally:
        await nc.close()


@pytest.mark.parametrize("tiered", [False, True], ids=["plain", "tiered"])
@pytest.mark.parametrize("name", sorted(LIMIT_SCENARIOS))
async def test_jetstream_limits_of_account_jwts(name: str, tiered: bool, tmp_path: Path) -> None:
    """The accounts of test_account_limits_conformance.py, their limits in their JWTs
    (`mem_storage`, `disk_storage`, `streams`, `consumer`, `max_ack_pending`,
    `max_bytes_required`, `mem_max_stream_bytes`), plain or as the R1 tier of
    `tiered_limits` (ADR 0034), the same steps, replies compared."""
    trust = Trust()
    system = trust.account()
    trust.operator_claims = {"system_account": system.public}
    base = {"subs": -1, "payload": -1, "conn": -1}

    def limits(**jetstream: Any) -> dict[str, Any]:
        return {**base, **({"tiered_limits": {"R1": jetstream}} if tiered else jetstream)}

    accounts = {
        "a": trust.account(limits=limits(mem_storage=1000, disk_storage=2000, streams=2)),
        "b": trust.account(
            limits=limits(
                **{"mem_storage": 600, "disk_storage": 1024, "consumer": 1},
                **{"max_ack_pending": 5, "max_bytes_required": True},
                **{"mem_max_stream_bytes": 300, "disk_max_stream_bytes": -1},
            )
        ),
    }
    logins = {}
    for who, account in accounts.items():
        user = user_key()
        path = tmp_path / f"{who}.creds"
        path.write_text(creds(user_jwt(user, account), user))
        logins[who] = {"user_credentials": str(path)}
    steps = LIMIT_SCENARIOS[name]
    extra = "jetstream { max_memory_store: 2000, max_file_store: 5000 }\n"
    async with js_servers(trust, extra) as (reference, ours):
        expected = await run_limit_steps(reference, steps, logins)
        actual = await run_limit_steps(ours, steps, logins)
    for i, ((who, step), want, got) in enumerate(zip(steps, expected, actual, strict=True)):
        assert got == want, f"step {i} {who} {step[:3]}"


async def _tier_steps(url: str, creds_file: Path) -> list[Any]:
    nc = await nats.connect(url, user_credentials=str(creds_file), allow_reconnect=False)
    try:
        replies = []
        requests: list[tuple[str, dict[str, Any]]] = [("$JS.API.INFO", {})]
        for name, replicas in (("R1", 1), ("ZERO", 0), ("R3", 3), ("R2", 2)):
            config = {"name": name, "subjects": [name.lower()], "num_replicas": replicas}
            requests.append((f"$JS.API.STREAM.CREATE.{name}", config))
        requests.append(("$JS.API.INFO", {}))
        for subject, body in requests:
            msg = await nc.request(subject, json.dumps(body).encode(), timeout=2)
            reply = json.loads(msg.data)
            if "config" in reply:
                reply = {"created": reply["config"]["name"]}
            reply.pop("api", None)
            replies.append(reply)
        return replies
    finally:
        await nc.close()


async def test_tiered_jetstream_limits_select_a_tier_by_replicas(tmp_path: Path) -> None:
    """An account JWT with `tiered_limits` R1 and R3: `$JS.API.INFO` shows no
    account-wide limits and each tier's usage and limits under `tiers`; a stream asking
    for replicas no tier has gets 10120 before anything else, one with a tier but more
    than one replica the single server's 10074."""
    trust = Trust()
    system = trust.account()
    trust.operator_claims = {"system_account": system.public}
    tiers = {
        "R1": {"mem_storage": -1, "disk_storage": 100000, "streams": 3, "consumer": 4},
        "R3": {"mem_storage": 5000, "disk_storage": 9000, "streams": 1},
    }
    account = trust.account(limits={"subs": -1, "payload": -1, "conn": -1, "tiered_limits": tiers})
    user = user_key()
    creds_file = tmp_path / "u.creds"
    creds_file.write_text(creds(user_jwt(user, account), user))
    async with js_servers(trust, "") as (reference, ours):
        theirs = await _tier_steps(reference, creds_file)
        mine = await _tier_steps(ours, creds_file)
    assert theirs[0]["limits"]["max_storage"] == 0
    assert theirs[0]["tiers"]["R1"]["limits"]["max_storage"] == 100000
    assert theirs[1:3] == [{"created": "R1"}, {"created": "ZERO"}]
    assert theirs[3]["error"]["err_code"] == 10074  # R3: a tier, but one server
    assert theirs[4]["error"]["err_code"] == 10120  # R2: no tier
    assert theirs[5]["tiers"]["R1"]["streams"] == 2
    assert mine == theirs
