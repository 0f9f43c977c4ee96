"""Authentication conformance: one config file, the same steps on Brook and nats-server.

Each test writes a config (nkey users, password users, bcrypt, `no_auth_user`,
`authorization { timeout }`), starts nats-server from it and Brook from the same file
(`load_conf_file`), and runs the same raw-socket steps against both (tests/support/raw.py):
who gets in, the exact `-ERR` text, whether the connection is closed, and the INFO fields
that carry auth (`auth_required`, `nonce`). Keys are made per test by the `nkeys` package,
the one nats-py signs with.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import bcrypt
import nats
import pytest
from nats.aio.msg import Msg as NatsMsg

import brook
from brook.config.conf import load_conf_file
from tests.support.config_errors import brook_conf_error, nats_server_error
from tests.support.natsserver import free_port, run_nats_server, wait_for_port
from tests.support.nkeyusers import NkeyUser, new_user
from tests.support.raw import PONG, Err, Info, Msg, RawClient, ServerOp, Simple
from tests.support.websocket import WsClient, frame

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(60)]

VIOLATION = Err("Authorization Violation")
OK = Simple("+OK")
HASH = bcrypt.hashpw(b"pw", bcrypt.gensalt(rounds=4)).decode()


@contextlib.asynccontextmanager
async def servers(config: str) -> AsyncIterator[tuple[str, str]]:
    """(nats-server URL, Brook URL), both started from `config`."""
    with tempfile.TemporaryDirectory(prefix="brook-auth-") as tmp:
        path = Path(tmp) / "auth.conf"
        path.write_text(config)
        with run_nats_server("-c", str(path), jetstream=False) as reference:
            async with brook.serve(port=0, settings=load_conf_file(str(path))) as srv:
                yield reference, srv.url


Step = Callable[[str], Awaitable[Any]]


async def both(config: str, step: Step) -> tuple[Any, Any]:
    async with servers(config) as (reference, ours):
        return await asyncio.gather(step(reference), step(ours))


def outcome(ops: list[ServerOp], closed: bool) -> tuple[tuple[ServerOp, ...], bool]:
    """What a login came to: PONG, or the -ERR; and whether the server closed."""
    return tuple(op for op in ops if not isinstance(op, Info)), closed


async def login(url: str, **options: Any) -> tuple[tuple[ServerOp, ...], bool]:
    """CONNECT with `options` (a callable value is given the INFO's nonce), then PING."""
    async with RawClient.connect_url(url) as c:
        nonce = c.info.get("nonce", "")
        resolved = {k: v(nonce) if callable(v) else v for k, v in options.items()}
        ops = await c.handshake(protocol=0, **resolved)
        if PONG not in ops:
            await c.expect_closed(1.0)
        return outcome(ops, c.closed)


IN = ((PONG,), False)
REFUSED = ((VIOLATION,), True)


def users_config(*nkey_users: NkeyUser, extra: str = "", timeout: str = "") -> str:
    nkeys = "".join(f"    {{nkey: {u.public}}}\n" for u in nkey_users)
    timeout = f"  timeout: {timeout}\n" if timeout else ""
    return (
        f"authorization {{\n{timeout}  users: [\n"
        "    {user: alice, password: secret}\n"
        f'    {{user: bob, password: "{HASH}"}}\n'
        f"{nkeys}  ]\n}}\n{extra}"
    )


# ---------------------------------------------------------------------------- nkey users


async def test_info_carries_a_fresh_nonce_when_nkey_users_exist() -> None:
    async def infos(url: str) -> list[dict[str, Any]]:
        out = []
        for _ in range(2):
            async with RawClient.connect_url(url) as c:
                out.append(c.info)
        return out

    for config, has_nonce in ((users_config(new_user()), True), (users_config(), False)):
        reference, ours = await both(config, infos)
        for first, second in (reference, ours):
            assert first.get("auth_required") is True
            assert ("nonce" in first) is has_nonce
            if has_nonce:
                assert isinstance(first["nonce"], str)
                assert len(first["nonce"]) == 15
                assert first["nonce"] != second["nonce"]
        assert [list(i) for i in ours] == [[k for k in i if k in ours[0]] for i in reference], (
            "INFO keys in nats-server's order"
        )


async def test_the_async_info_after_connect_has_no_nonce() -> None:
    user = new_user()

    async def async_info(url: str) -> list[str]:
        async with RawClient.connect_url(url) as c:
            ops = await c.handshake(nkey=user.public, sig=user.sign(c.info["nonce"]))
            info = next(op for op in ops if isinstance(op, Info))
            return sorted(k for k in ("nonce", "auth_required") if k in info.fields)

    reference, ours = await both(users_config(user), async_info)
    assert ours == reference


def _std_base64(user: NkeyUser) -> Callable[[str], str]:
    import base64

    def sign(nonce: str) -> str:
        raw = user.sign(nonce)
        return base64.b64encode(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))).decode()

    return sign


async def test_nkey_logins() -> None:
    user, stranger = new_user(), new_user()
    old_nonce = "AAAAAAAAAAAAAAA"
    cases: dict[str, tuple[dict[str, Any], Any]] = {
        "signed": ({"nkey": user.public, "sig": user.sign}, IN),
        "signed-std-base64": ({"nkey": user.public, "sig": _std_base64(user)}, IN),
        "no-sig": ({"nkey": user.public}, REFUSED),
        "empty-sig": ({"nkey": user.public, "sig": ""}, REFUSED),
        "replayed-nonce": ({"nkey": user.public, "sig": user.sign(old_nonce)}, REFUSED),
        "signed-by-another-key": ({"nkey": user.public, "sig": stranger.sign}, REFUSED),
        "unknown-nkey": ({"nkey": stranger.public, "sig": stranger.sign}, REFUSED),
        "sig-not-base64": ({"nkey": user.public, "sig": "!!not base64!!"}, REFUSED),
        "sig-not-ascii": ({"nkey": user.public, "sig": "\u00e9\u00e9\u00e9\u00e9"}, REFUSED),
        "sig-too-short": ({"nkey": user.public, "sig": "AAAA"}, REFUSED),
        "nkey-malformed": ({"nkey": "UNOTAKEY", "sig": user.sign}, REFUSED),
        "nkey-lowercase": ({"nkey": user.public.lower(), "sig": user.sign}, REFUSED),
        "seed-as-nkey": ({"nkey": user.seed.decode(), "sig": user.sign}, REFUSED),
        "nkey-wins-over-password": (
            {"nkey": user.public, "sig": stranger.sign, "user": "alice", "pass": "secret"},
            REFUSED,
        ),
        "password-user": ({"user": "alice", "pass": "secret"}, IN),
        "bcrypt-user": ({"user": "bob", "pass": "pw"}, IN),
        "wrong-password": ({"user": "alice", "pass": "nope"}, REFUSED),
        "nothing": ({}, REFUSED),
        "sig-not-a-string": ({"nkey": user.public, "sig": 5}, None),
        "nkey-not-a-string": ({"nkey": 5, "sig": user.sign}, None),
    }
    async with servers(users_config(user)) as (reference, ours):
        for name, (options, expected) in cases.items():
            got = await asyncio.gather(login(reference, **options), login(ours, **options))
            if expected is not None:
                assert got[0] == expected, (name, got[0])
            assert got[1] == got[0], name


async def test_a_replayed_signature_is_refused() -> None:
    """A client that records another's CONNECT and sends it again signs an old nonce."""
    user = new_user()

    async def replay(url: str) -> tuple[Any, ...]:
        async with RawClient.connect_url(url) as first:
            sig = user.sign(first.info["nonce"])
            assert PONG in await first.handshake(nkey=user.public, sig=sig)
        return await login(url, nkey=user.public, sig=sig)

    reference, ours = await both(users_config(user), replay)
    assert reference == REFUSED
    assert ours == reference


# ---------------------------------------------------------------------------- no_auth_user


async def test_no_auth_user_logs_in_clients_without_credentials() -> None:
    user = new_user()
    config = users_config(user, extra="no_auth_user: alice\n")
    cases: dict[str, tuple[dict[str, Any], Any]] = {
        "nothing": ({}, IN),
        "empty-strings": ({"user": "", "pass": "", "auth_token": ""}, IN),
        "other-user": ({"user": "bob", "pass": "pw"}, IN),
        "wrong-password": ({"user": "alice", "pass": "nope"}, REFUSED),
        "password-only": ({"pass": "secret"}, REFUSED),
        "unknown-user": ({"user": "carol"}, REFUSED),
        "token-only": ({"auth_token": "secret"}, REFUSED),
        "nkey": ({"nkey": user.public, "sig": user.sign}, IN),
        "nkey-unsigned": ({"nkey": user.public}, REFUSED),
    }
    async with servers(config) as (reference, ours):
        for name, (options, expected) in cases.items():
            got = await asyncio.gather(login(reference, **options), login(ours, **options))
            assert got[0] == expected, (name, got[0])
            assert got[1] == got[0], name


async def test_users_without_a_password_log_in_by_name() -> None:
    """A user without a password (nats.py's AccountLimitsTest config has one) logs in with
    its name and no (or an empty) password, as the no_auth_user, and with nothing else."""
    config = (
        "authorization { users: [{user: nopass}, {user: bob, password: pw}] }\n"
        "no_auth_user: nopass\n"
    )
    cases: dict[str, tuple[dict[str, Any], Any]] = {
        "name": ({"user": "nopass"}, IN),
        "name-empty-password": ({"user": "nopass", "pass": ""}, IN),
        "name-wrong-password": ({"user": "nopass", "pass": "x"}, REFUSED),
        "nothing": ({}, IN),
        "bob": ({"user": "bob", "pass": "pw"}, IN),
    }
    async with servers(config) as (reference, ours):
        for name, (options, expected) in cases.items():
            got = await asyncio.gather(login(reference, **options), login(ours, **options))
            assert got[0] == expected, (name, got[0])
            assert got[1] == got[0], name
    async with servers(config.replace("no_auth_user: nopass", "")) as (reference, ours):
        got = await asyncio.gather(login(reference, user="nopass"), login(ours, user="nopass"))
        assert got[0] == IN
        assert got[1] == got[0]


async def test_no_auth_user_info_and_operations_before_connect() -> None:
    """INFO says auth is not required; an operation before CONNECT logs the client in as
    the no_auth_user when that is a password user that needs no bcrypt check (as after an
    empty CONNECT: verbose, so SUB gets +OK), and is an authorization violation when not;
    a client that sends nothing is closed when auth_timeout is up."""
    user = new_user()

    async def steps(url: str) -> tuple[Any, ...]:
        async with RawClient.connect_url(url) as c:
            await c.send(b"SUB foo 1\r\nPUB foo 2\r\nhi\r\nPING\r\n")
            ops = await c.read_ops(until=lambda op: op in (PONG, VIOLATION), timeout=2.0)
            first = (c.info.get("auth_required"), "nonce" in c.info, tuple(ops))
        async with RawClient.connect_url(url) as c:
            started = time.monotonic()
            closed = await c.expect_closed(3.0)
            elapsed = time.monotonic() - started
            timeout = (tuple(await c.read_ops(timeout=0.3)), closed, 0.3 < elapsed < 1.5)
        return first, timeout

    timed_out = ((Err("Authentication Timeout"),), True, True)
    for no_auth_user, expected in (
        ("alice", (None, True, (OK, OK, Msg(b"foo", b"1", None, None, b"hi"), PONG))),
        ("bob", (None, True, (VIOLATION,))),
        (user.public, (None, True, (VIOLATION,))),
    ):
        config = users_config(user, extra=f"no_auth_user: {no_auth_user}\n", timeout="0.5")
        reference, ours = await both(config, steps)
        assert reference == (expected, timed_out), no_auth_user
        assert ours == reference, no_auth_user


async def test_no_auth_user_may_be_an_nkey_user_without_a_signature() -> None:
    user = new_user()
    config = users_config(user, extra=f"no_auth_user: {user.public}\n")

    async def steps(url: str) -> tuple[Any, ...]:
        return await login(url), await login(url, nkey=user.public)

    reference, ours = await both(config, steps)
    assert reference == (IN, IN)
    assert ours == reference


async def test_no_auth_user_with_a_bcrypt_password_lets_nobody_in() -> None:
    """nats-server hands the user's stored hash to bcrypt as the password: nobody gets in
    without credentials. Brook does the same rather than admit whom nats-server refuses."""
    config = users_config(extra="no_auth_user: bob\n")

    async def steps(url: str) -> tuple[Any, ...]:
        return await login(url), await login(url, user="bob", **{"pass": "pw"})

    reference, ours = await both(config, steps)
    assert reference == (REFUSED, IN)
    assert ours == reference


async def test_no_auth_user_with_a_token_config_is_refused_by_both() -> None:
    await _both_refuse_config("authorization { token: t }\nno_auth_user: alice\n", "users/nkeys")


# ---------------------------------------------------------------------------- auth_timeout


async def test_default_auth_timeout_is_two_seconds() -> None:
    async def wait(url: str) -> tuple[Any, ...]:
        async with RawClient.connect_url(url) as c:
            started = time.monotonic()
            closed = await c.expect_closed(4.0)
            elapsed = time.monotonic() - started
            return tuple(await c.read_ops(timeout=0.3)), closed, 1.6 < elapsed < 3.0

    reference, ours = await both(users_config(), wait)
    assert reference == ((Err("Authentication Timeout"),), True, True)
    assert ours == reference


async def test_auth_timeout_counts_from_the_connection_not_from_each_byte() -> None:
    """A client that trickles a partial CONNECT is still closed when the time is up."""

    async def trickle(url: str) -> tuple[Any, ...]:
        async with RawClient.connect_url(url) as c:
            started = time.monotonic()
            for byte in b'CONNECT {"user":"alice"':
                if not await c.send(bytes([byte])):
                    break
                await asyncio.sleep(0.05)
                if c.closed or await c.expect_closed(0.0):
                    break
            closed = await c.expect_closed(2.0)
            elapsed = time.monotonic() - started
            return tuple(await c.read_ops(timeout=0.3)), closed, elapsed < 1.2

    config = users_config(timeout="0.5")
    reference, ours = await both(config, trickle)
    assert reference == ((Err("Authentication Timeout"),), True, True)
    assert ours == reference


# ---------------------------------------------------------------------------- config errors


async def _both_refuse_config(config: str, words: str) -> None:
    """nats-server will not start with `config`, and Brook refuses it; both say `words`."""
    assert words in nats_server_error(config)
    assert words in brook_conf_error(config)


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ("no_auth_user: alice\n", 'no_auth_user: "alice" present, but users/nkeys are not defined'),
        (
            users_config(extra="no_auth_user: carol\n"),
            'no_auth_user: "carol" not present as user or nkey in authorization block',
        ),
        ("authorization { users: [{nkey: UNOTAKEY}] }\n", "Not a valid public nkey for a user"),
        (
            "authorization { users: [{nkey: " + new_user().seed.decode() + "}] }\n",
            "Not a valid public nkey for a user",
        ),
        (
            "authorization { users: [{nkey: " + new_user().public + ", user: a}] }\n",
            "Nkey users do not take usernames or passwords",
        ),
    ],
    ids=["no-users", "unknown-user", "malformed-nkey", "seed-as-nkey", "nkey-with-user"],
)
async def test_config_errors(config: str, words: str) -> None:
    await _both_refuse_config(config, words)


async def _ws_login(port: int, **options: Any) -> tuple[list[bytes], bytes | None]:
    """Over WebSocket: CONNECT with `options` (a callable value is given the nonce), then
    PING; the NATS lines up to PONG but INFOs, and the CLOSE frame's payload if closed."""
    async with WsClient.connect(port) as ws:
        info = json.loads((await ws.read_nats(b"\r\n"))[5:])
        nonce = info.get("nonce", "")
        resolved = {k: v(nonce) if callable(v) else v for k, v in options.items()}
        connect = {"verbose": False, "protocol": 1, **resolved}
        await ws.send(frame(b"CONNECT %s\r\nPING\r\n" % json.dumps(connect).encode()))
        data, closed = b"", None
        while b"PONG\r\n" not in data and closed is None:
            opcode, payload = await ws.read_frame()
            closed = payload if opcode == 8 else None
            data += payload if opcode == 2 else b""
        return [line for line in data.splitlines() if not line.startswith(b"INFO ")], closed


async def test_allowed_connection_types_of_users(tmp_path: Path) -> None:
    """`allowed_connection_types` (and its aliases, any case): a password or nkey user
    logs in only through a listed kind of connection, over TCP (STANDARD) or WebSocket;
    a user without the key anywhere; the no_auth_user is held to its own list."""
    nkey_user = new_user()
    users = (
        "{user: tcp, password: pw, allowed_connection_types: [STANDARD]}, "
        "{user: web, password: pw, connection_types: websocket}, "
        "{user: both, password: pw, clients: [STANDARD, WEBSOCKET]}, "
        "{user: mqtt, password: pw, allowed_connection_types: [MQTT]}, "
        "{user: any, password: pw}, "
        f"{{nkey: {nkey_user.public}, allowed_connection_types: [WEBSOCKET]}}"
    )
    logins: dict[str, dict[str, Any]] = {
        name: {"user": name, "pass": "pw"} for name in ("tcp", "web", "both", "mqtt", "any")
    }
    logins["nkey"] = {"nkey": nkey_user.public, "sig": nkey_user.sign}
    logins["no_auth_user"] = {}
    results: dict[str, dict[str, Any]] = {}
    ports = {"nats-server": free_port(), "brook": free_port()}
    paths = {}
    for name, port in ports.items():
        paths[name] = tmp_path / f"{name}.conf"
        paths[name].write_text(
            f"authorization {{ users: [{users}] }}\nno_auth_user: web\n"
            f"websocket {{ port: {port}, no_tls: true }}\n"
        )
    with run_nats_server("-c", str(paths["nats-server"]), jetstream=False) as reference:
        wait_for_port(ports["nats-server"])
        async with brook.serve(port=0, settings=load_conf_file(str(paths["brook"]))) as srv:
            for name, url in (("nats-server", reference), ("brook", srv.url)):
                results[name] = {}
                for who, options in logins.items():
                    results[name][f"{who} tcp"] = await login(url, **options)
                    results[name][f"{who} ws"] = await _ws_login(ports[name], **options)
    assert results["brook"] == results["nats-server"]
    admitted = sorted(
        case for case, (ops, _) in results["brook"].items() if ops in ((PONG,), [b"PONG"])
    )
    assert admitted == sorted(
        [
            "tcp tcp",
            "web ws",
            "both tcp",
            "both ws",
            "any tcp",
            "any ws",
            "nkey ws",
            "no_auth_user ws",
        ]
    )


async def test_an_unknown_connection_type_is_refused_as_by_nats_server() -> None:
    users = "[{user: a, password: b, allowed_connection_types: [foo, STANDARD, Bar]}]"
    await _both_refuse_config(
        f"authorization {{ users: {users} }}\n", 'invalid connection types ["FOO" "BAR"]'
    )


async def _publish_outcome(url: str, subject: str, **options: Any) -> tuple[ServerOp, ...]:
    """Log in with `options`, publish to `subject`, PING: what came back (a violation or
    not), the connection still open."""
    async with RawClient.connect_url(url) as c:
        nonce = c.info.get("nonce", "")
        resolved = {k: v(nonce) if callable(v) else v for k, v in options.items()}
        assert PONG in await c.handshake(protocol=0, **resolved)
        await c.send(f"PUB {subject} 0\r\n\r\nPING\r\n".encode())
        ops = await c.read_ops(until=lambda op: op == PONG)
        assert not c.closed
        return tuple(ops)


async def test_permissions_follow_the_login_of_nkey_users_and_the_no_auth_user() -> None:
    """Each login has its own entry's permissions, whichever way it logged in: an nkey
    user's, and the no_auth_user's for a client without credentials (as nats-server)."""
    user = new_user()
    config = (
        "authorization {\n  users: [\n"
        '    {user: alice, password: secret, permissions: {publish: "a.>"}}\n'
        f'    {{nkey: {user.public}, permissions: {{publish: "n.>"}}}}\n'
        "  ]\n}\nno_auth_user: alice\n"
    )
    nkey = {"nkey": user.public, "sig": user.sign}
    cases: list[tuple[str, dict[str, Any], bool]] = [
        ("n.x", nkey, True),
        ("a.x", nkey, False),
        ("a.x", {}, True),
        ("n.x", {}, False),
        ("n.x", {"user": "alice", "pass": "secret"}, False),
    ]
    async with servers(config) as (reference, ours):
        for subject, options, allowed in cases:
            got = await asyncio.gather(
                _publish_outcome(reference, subject, **options),
                _publish_outcome(ours, subject, **options),
            )
            violation = Err(f'Permissions Violation for Publish to "{subject}"')
            assert got[0] == ((PONG,) if allowed else (violation, PONG)), (subject, options)
            assert got[1] == got[0], (subject, options)


# ---------------------------------------------------------------------------- nats-py


async def _nats_py_outcome(url: str, **options: Any) -> tuple[str, ...]:
    """What nats-py makes of a login: a request answered, or the error connect raised."""
    try:
        nc = await nats.connect(url, allow_reconnect=False, connect_timeout=2, **options)
    except Exception as exc:
        return ("refused", type(exc).__name__, str(exc))

    async def help_handler(msg: NatsMsg) -> None:
        await msg.respond(b"OK!")

    try:
        await nc.subscribe("help", cb=help_handler)
        reply = await nc.request("help", b"?", timeout=2)
        return ("in", reply.data.decode())
    finally:
        await nc.close()


async def test_nats_py_logs_in_nkey_users_from_a_seed(tmp_path: Path) -> None:
    user, stranger = new_user(), new_user()
    seed_file = tmp_path / "user.nk"
    seed_file.write_bytes(user.seed + b"\n")
    cases: list[tuple[dict[str, Any], tuple[str, ...] | None]] = [
        ({"nkeys_seed": str(seed_file)}, ("in", "OK!")),
        ({"nkeys_seed_str": user.seed.decode()}, ("in", "OK!")),
        ({"nkeys_seed_str": stranger.seed.decode()}, None),
        ({"user": "alice", "password": "secret"}, ("in", "OK!")),
        ({}, None),
    ]
    async with servers(users_config(user)) as (reference, ours):
        for options, expected in cases:
            got = await asyncio.gather(
                _nats_py_outcome(reference, **options), _nats_py_outcome(ours, **options)
            )
            if expected is not None:
                assert got[0] == expected, options
            else:
                assert got[0][0] == "refused", got[0]
            assert got[1] == got[0], options


async def test_nats_py_and_no_auth_user() -> None:
    config = users_config(extra="no_auth_user: alice\n")
    cases: list[tuple[dict[str, Any], tuple[str, ...] | None]] = [
        ({}, ("in", "OK!")),
        ({"user": "bob", "password": "pw"}, ("in", "OK!")),
        ({"user": "alice", "password": "nope"}, None),
    ]
    async with servers(config) as (reference, ours):
        for options, expected in cases:
            got = await asyncio.gather(
                _nats_py_outcome(reference, **options), _nats_py_outcome(ours, **options)
            )
            if expected is not None:
                assert got[0] == expected, options
            else:
                assert got[0][0] == "refused", got[0]
            assert got[1] == got[0], options


async def test_no_auth_user_naming_the_single_user_is_a_known_difference() -> None:
    """nats-server refuses it (its single user is not a `users` entry); Brook accepts it
    and admits whom nats-server admits with that user in `users` (docs/compatibility.md)."""
    config = "authorization { user: alice, password: secret }\nno_auth_user: alice\n"
    assert "users/nkeys are not defined" in nats_server_error(config)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "single.conf"
        path.write_text(config)
        async with brook.serve(port=0, settings=load_conf_file(str(path))) as srv:
            assert await login(srv.url) == IN


# ---------------------------------------------------------------------------- monitoring


async def test_connz_names_whom_each_client_logged_in_as(tmp_path: Path) -> None:
    """`/connz?auth=1`: the nkey of an nkey user, the no_auth_user for a client without
    credentials, the name of a password user."""
    user = new_user()
    path = tmp_path / "auth.conf"
    path.write_text(users_config(user, extra="no_auth_user: alice\n"))
    http_port = free_port()
    logins: list[dict[str, Any]] = [
        {"nkeys_seed_str": user.seed.decode()},
        {},
        {"user": "bob", "password": "pw"},
    ]

    async def authorized_users(url: str, monitor: str) -> list[str]:
        clients = [await nats.connect(url, allow_reconnect=False, **o) for o in logins]
        try:
            loop = asyncio.get_running_loop()
            body = await loop.run_in_executor(None, _fetch, f"{monitor}/connz?auth=1")
            return sorted(c.get("authorized_user", "") for c in json.loads(body)["connections"])
        finally:
            for nc in clients:
                await nc.close()

    with run_nats_server("-c", str(path), "-m", str(http_port), jetstream=False) as reference:
        wait_for_port(http_port)
        settings = load_conf_file(str(path)).replace(http_port=-1)
        async with brook.serve(port=0, settings=settings) as srv:
            theirs = await authorized_users(reference, f"http://127.0.0.1:{http_port}")
            ours = await authorized_users(srv.url, f"http://127.0.0.1:{srv.monitor.port}")
    assert theirs == sorted(["alice", "bob", user.public])
    assert ours == theirs


def _fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as resp:
        body: bytes = resp.read()
        return body
