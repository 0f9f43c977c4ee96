"""The directory account resolvers (`resolver { type: full|cache, dir }`, ADR 0033) on
Brook and nats-server: each server gets its own copy of one resolver directory, laid out
as nats-server lays it out (`<account>.jwt`), and the same logins, `$SYS` claim requests
and JetStream requests are compared."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest

import brook
from brook.config.conf import load_conf_file
from brook.config.settings import ConfigError
from brook.server.resolver import DirectoryResolver, open_resolver
from tests.conformance.test_jwt_conformance import (
    IN,
    REFUSED,
    Trust,
    login,
    servers,
)
from tests.support.config_errors import nats_server_error
from tests.support.jwts import account_jwt, account_key, b64, creds, encode, user_jwt, user_key
from tests.support.natsserver import run_nats_server
from tests.support.raw import PONG, Err, RawClient

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(90)]

JS_LIMITS = {"subs": -1, "payload": -1, "conn": -1, "mem_storage": -1, "disk_storage": -1}


class DirTrust(Trust):
    """A `Trust` whose accounts are files of a resolver directory, not preloads; a
    system account (nats-server's directory resolvers answer in it)."""

    def __init__(self) -> None:
        super().__init__()
        self.system = self.account()
        self.operator_claims = {"system_account": self.system.public}

    def write_dir(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        for key, token in self.preload.items():
            (directory / f"{key}.jwt").write_text(token)

    def dir_config(self, root: Path, resolver: str, extra: str = "") -> Path:
        (root / "op.jwt").write_text(self.operator_token())
        self.write_dir(root / "jwt")
        path = root / "server.conf"
        path.write_text(
            f"operator: {root / 'op.jwt'}\nresolver: {{ {resolver}, dir: {root / 'jwt'} }}\n{extra}"
        )
        return path


@contextlib.asynccontextmanager
async def dir_servers(
    trust: DirTrust, resolver: str = "type: full", extra: str = "", *, jetstream: bool = False
) -> AsyncIterator[tuple[str, str, Path, Path]]:
    """(nats-server URL, Brook URL, nats-server's dir, Brook's dir), each server from its
    own copy of the same config and directory."""
    with tempfile.TemporaryDirectory(prefix="brook-jwtdir-") as tmp:
        theirs, ours = Path(tmp) / "theirs", Path(tmp) / "ours"
        theirs.mkdir()
        ours.mkdir()
        their_config = trust.dir_config(theirs, resolver, extra)
        our_config = trust.dir_config(ours, resolver, extra)
        with run_nats_server("-c", str(their_config), jetstream=jetstream) as reference:
            settings = load_conf_file(str(our_config))
            if jetstream:
                settings.jetstream.enabled = True
                settings.jetstream.store_dir = str(ours / "js")
            async with brook.serve(port=0, settings=settings) as srv:
                yield reference, srv.url, theirs / "jwt", ours / "jwt"


async def _signed_login(url: str, account: Any) -> tuple[Any, bool]:
    user = user_key()
    return await login(url, user_jwt(user, account), user)


async def test_logins_to_accounts_of_the_directory(tmp_path: Path) -> None:
    """An account whose JWT is a file of the directory logs its users in; one that is
    not there refuses them, on both servers."""
    trust = DirTrust()
    known = trust.account()
    unknown = account_key()
    async with dir_servers(trust) as (reference, ours, _, _):
        for account, expected in ((known, IN), (unknown, REFUSED)):
            theirs = await _signed_login(reference, account)
            mine = await _signed_login(ours, account)
            assert theirs == expected
            assert mine == theirs


async def _runtime_account(url: str, creds_file: Path) -> list[Any]:
    """JetStream and the system services imported into an account the server loads at
    its first login; its `$SYS.REQ.USER.INFO` answer whole but for the seconds left
    (`expires`, checked apart)."""
    nc = await nats.connect(url, user_credentials=str(creds_file), allow_reconnect=False)
    try:
        js = nc.jetstream()
        await js.add_stream(name="S", subjects=["s.>"])
        ack = await js.publish("s.1", b"x")
        info = json.loads((await nc.request("$SYS.REQ.USER.INFO", b"", timeout=2)).data)
        data = info["data"]
        left_s = data.pop("expires") / 1e9
        assert 3590 <= left_s <= 3600
        for lists in data["permissions"].values():  # nats-server's come in no set order
            for subjects in lists.values():
                subjects.sort()
        return [ack.stream, ack.seq, data]
    finally:
        await nc.close()


async def test_an_account_loaded_at_its_first_login_has_jetstream_and_system_imports(
    tmp_path: Path,
) -> None:
    """... and a user JWT's name, permissions and expiry in its USER.INFO."""
    trust = DirTrust()
    account = trust.account(limits=JS_LIMITS)
    user = user_key()
    creds_file = tmp_path / "u.creds"
    token = user_jwt(
        user,
        account,
        top={"name": "alice", "exp": int(time.time()) + 3600},
        pub={"deny": ["secret.>"]},
        sub={"allow": ["_INBOX.>", "s.>"]},
    )
    creds_file.write_text(creds(token, user))
    async with dir_servers(trust, jetstream=True) as (reference, ours, _, _):
        theirs = await _runtime_account(reference, creds_file)
        mine = await _runtime_account(ours, creds_file)
    assert theirs[:2] == ["S", 1]
    assert theirs[2]["account"] == account.public
    assert theirs[2]["user_name"] == "alice"
    assert mine == theirs


async def _connect_event(url: str, system_creds: Path, account: Any, creds_file: Path) -> Any:
    """The `ClientInfo` of the connect event a JWT user's login publishes, without what
    differs between runs (when, the client's id), and who `/connz` says it is
    (`$SYS.REQ.ACCOUNT.<a>.CONNZ` with `auth`)."""
    system = await nats.connect(url, user_credentials=str(system_creds), allow_reconnect=False)
    try:
        sub = await system.subscribe(f"$SYS.ACCOUNT.{account.public}.CONNECT")
        await system.flush()
        nc = await nats.connect(url, user_credentials=str(creds_file), allow_reconnect=False)
        try:
            client = json.loads((await sub.next_msg(timeout=5)).data)["client"]
            reply = await system.request(
                f"$SYS.REQ.ACCOUNT.{account.public}.CONNZ", b'{"auth": true}', timeout=5
            )
        finally:
            await nc.close()
    finally:
        await system.close()
    (conn,) = json.loads(reply.data)["data"]["connections"]
    who = ("authorized_user", "account", "jwt", "issuer_key", "name_tag", "tags")
    return [
        {key: value for key, value in client.items() if key not in ("start", "id")},
        {key: value for key, value in conn.items() if key in who},
    ]


@pytest.mark.parametrize("signed_by", ["account", "signing key", "account, bearer"])
async def test_a_jwt_users_connect_event(tmp_path: Path, signed_by: str) -> None:
    """A JWT user's connect event and its `/connz` entry (with `auth`) carry its JWT, the
    key that issued it, its tags and the account JWT's name (nats-server's `name_tag`);
    `/connz` leaves a bearer token out."""
    trust = DirTrust()
    signer = account_key()
    account = trust.account(signing_keys=[signer.public])
    user = user_key()
    issuer = signer if signed_by == "signing key" else account
    extra: dict[str, Any] = {"bearer_token": True} if "bearer" in signed_by else {}
    if issuer is signer:
        extra["issuer_account"] = account.public
    token = user_jwt(user, issuer, top={"name": "alice"}, tags=["team:a", "x"], **extra)
    creds_file = tmp_path / "u.creds"
    creds_file.write_text(creds(token, user))
    system_creds = _system_creds(trust, tmp_path)
    async with dir_servers(trust) as (reference, ours, _, _):
        theirs = await _connect_event(reference, system_creds, account, creds_file)
        mine = await _connect_event(ours, system_creds, account, creds_file)
    assert theirs[0]["jwt"] == token
    assert theirs[1].get("jwt") == (None if "bearer" in signed_by else token)
    for info in theirs:
        assert info["issuer_key"] == issuer.public
        assert info["name_tag"] == "acc"
        assert info["tags"] == ["team:a", "x"]
    assert mine == theirs
    assert [list(info) for info in mine] == [list(info) for info in theirs]  # Go's order


async def test_pinned_accounts(tmp_path: Path) -> None:
    """`resolver_pinned_accounts`: only users of the listed accounts (and the system
    account) log in."""
    trust = DirTrust()
    pinned, other = trust.account(), trust.account()
    system_creds = _system_creds(trust, tmp_path)
    extra = f"resolver_pinned_accounts: [{pinned.public}]\n"
    async with dir_servers(trust, extra=extra) as (reference, ours, _, _):
        for account, expected in ((pinned, IN), (other, REFUSED), (trust.system, IN)):
            theirs = await _signed_login(reference, account)
            mine = await _signed_login(ours, account)
            assert theirs == expected, account
            assert mine == theirs
        fails = [
            (await _sys_requests(url, system_creds, [("$SYS.REQ.SERVER.PING.VARZ", b"")]))[0][
                "data"
            ].get("pinned_account_fails")
            for url in (reference, ours)
        ]
    assert fails == [1, 1]


def test_pinned_accounts_must_be_account_keys(tmp_path: Path) -> None:
    trust = DirTrust()
    path = trust.dir_config(tmp_path, "type: full", "resolver_pinned_accounts: [NOTAKEY]\n")
    with pytest.raises(ConfigError, match="pinned account key 'NOTAKEY' is not a valid"):
        load_conf_file(str(path)).validate()


@pytest.mark.parametrize(
    ("resolver", "words"),
    [
        ('type: full, ttl: "1m"', "FULL does not accept ttl"),
        ("type: full, hard_delete: true", "hard_delete has no effect without delete"),
        ("type: cache, allow_delete: true", "CACHE does not accept allow_delete"),
        ('type: cache, interval: "1m"', "CACHE does not accept sync"),
        ("type: full, interval: soon", 'time: invalid duration "soon"'),
    ],
)
def test_directory_resolver_config_errors(tmp_path: Path, resolver: str, words: str) -> None:
    trust = DirTrust()
    path = trust.dir_config(tmp_path, resolver)
    assert words in nats_server_error(path)
    with pytest.raises(ConfigError, match=words):
        load_conf_file(str(path))


def test_an_existing_nats_server_directory_opens_in_brook(tmp_path: Path) -> None:
    """The files nats-server wrote (preloads stored into its directory) are the files
    Brook reads and writes: same names, same contents."""
    trust = DirTrust()
    account = trust.account()
    token = trust.preload.pop(account.public)
    extra = f'resolver_preload: {{ {account.public}: "{token}" }}\n'
    with tempfile.TemporaryDirectory() as tmp:
        theirs, ours = Path(tmp) / "theirs", Path(tmp) / "ours"
        theirs.mkdir()
        ours.mkdir()
        with run_nats_server("-c", str(trust.dir_config(theirs, "type: full", extra))):
            pass
        settings = load_conf_file(str(trust.dir_config(ours, "type: full", extra))).validate()
        open_resolver(settings.operator)
        their_files = {p.name: p.read_text() for p in (theirs / "jwt").iterdir()}
        our_files = {p.name: p.read_text() for p in (ours / "jwt").iterdir()}
        assert their_files[f"{account.public}.jwt"] == token
        assert our_files == their_files
        shutil.rmtree(ours / "jwt")
        shutil.copytree(theirs / "jwt", ours / "jwt")
        reopened = open_resolver(settings.operator)
        assert reopened.load(account.public) == token
        assert isinstance(reopened, DirectoryResolver)
        assert len(reopened) == len(their_files)


# ------------------------------------------------------------------ claim requests over $SYS


async def _sys_requests(
    url: str, system_creds: Path, requests: list[tuple[str, bytes]]
) -> list[Any]:
    """Each request's reply from a system account user: JSON without its `server` (whose
    keys are kept), or the raw payload when it is no JSON."""
    nc = await nats.connect(url, user_credentials=str(system_creds), allow_reconnect=False)
    out: list[Any] = []
    try:
        for subject, payload in requests:
            msg = await nc.request(subject, payload, timeout=5)
            try:
                body = json.loads(msg.data)
            except ValueError:
                out.append(msg.data)
                continue
            if isinstance(body, dict) and "server" in body:
                # nats-server's `feature_flags` Brook has not (ADR 0029)
                body["server"] = sorted(set(body["server"]) - {"feature_flags"})
            out.append(body)
    finally:
        await nc.close()
    return out


def _system_creds(trust: DirTrust, directory: Path) -> Path:
    user = user_key()
    path = directory / "sys.creds"
    path.write_text(creds(user_jwt(user, trust.system), user))
    return path


async def _log_in(c: RawClient, account: Any, user: Any) -> None:
    nonce = c.info["nonce"].encode()
    ops = await c.handshake(protocol=0, jwt=user_jwt(user, account), sig=b64(user.sign(nonce)))
    assert PONG in ops, ops


async def _ended_with(c: RawClient) -> tuple[Any, bool]:
    """What a connected client got (its -ERRs) until it was closed, or after 2 s."""
    closed = await c.expect_closed(5.0)
    ops = await c.read_ops(timeout=0.5, allow_eof=True)
    return tuple(op for op in ops if isinstance(op, Err)), closed


async def _update_steps(url: str, system_creds: Path, trust: DirTrust, keys: Any) -> list[Any]:
    """Push a new account, log a user in to it, revoke that user by an update, and the
    update errors nats-server words."""
    account, user, _ = keys
    token = account_jwt(account, trust.operator)
    replies = await _sys_requests(url, system_creds, [("$SYS.REQ.CLAIMS.UPDATE", token.encode())])
    async with RawClient.connect_url(url) as c:
        await _log_in(c, account, user)
        replies += await _revoke(url, system_creds, trust, keys)
        ended = await _ended_with(c)
    *replies, revoked, expired = replies
    # the looked-up JWTs are the ones pushed last: each run signs its own (their `iat`
    # and `jti` differ), so the comparison across servers sees where they came from
    assert replies[5] == revoked, replies[5]
    lookups = [b"<the expired JWT pushed>" if r == expired else r for r in replies[6:]]
    relogin = await login(url, user_jwt(user, account), user)
    return [*replies[:5], lookups, ended, relogin]


async def _revoke(url: str, system_creds: Path, trust: DirTrust, keys: Any) -> list[Any]:
    account, user, other = keys
    until = int(time.time()) + 3600
    revoked = account_jwt(account, trust.operator, revocations={user.public: until})
    expired = account_jwt(other, trust.operator, top={"exp": int(time.time()) - 10})
    return [
        *await _sys_requests(
            url,
            system_creds,
            [
                (f"$SYS.REQ.ACCOUNT.{account.public}.CLAIMS.UPDATE", revoked.encode()),
                (f"$SYS.REQ.ACCOUNT.{other.public}.CLAIMS.UPDATE", revoked.encode()),
                ("$SYS.REQ.CLAIMS.UPDATE", b"not a jwt"),
                ("$SYS.REQ.CLAIMS.UPDATE", expired.encode()),
                (f"$SYS.REQ.ACCOUNT.{account.public}.CLAIMS.LOOKUP", b""),
                (f"$SYS.REQ.ACCOUNT.{other.public}.CLAIMS.LOOKUP", b""),
                (f"$SYS.REQ.ACCOUNT.{account_key().public}.CLAIMS.LOOKUP", b""),
            ],
        ),
        revoked.encode(),
        expired.encode(),
    ]


async def test_claim_updates_apply_live(tmp_path: Path) -> None:
    """`$SYS.REQ.CLAIMS.UPDATE` adds an account; `$SYS.REQ.ACCOUNT.<id>.CLAIMS.UPDATE`
    revoking a connected user closes it with `User Authentication Revoked`; a JWT for
    another account and garbage get nats-server's error replies (an expired JWT is
    stored); LOOKUP answers the JWT or nothing."""
    trust = DirTrust()
    system_creds = _system_creds(trust, tmp_path)
    keys = (account_key(), user_key(), account_key())
    async with dir_servers(trust) as (reference, ours, _, _):
        theirs = await _update_steps(reference, system_creds, trust, keys)
        mine = await _update_steps(ours, system_creds, trust, keys)
    key = keys[0].public
    assert theirs[0]["data"] == {"account": key, "code": 200, "message": "jwt updated"}
    # the expired JWT is stored (nats-server checks no times then); nothing for the unknown
    assert theirs[5][0] == b"<the expired JWT pushed>"
    assert theirs[5][1] == b""
    assert theirs[6] == ((Err("User Authentication Revoked"),), True)
    assert theirs[7] == REFUSED
    for i, (t, m) in enumerate(zip(theirs, mine, strict=True)):
        assert m == t, (i, t, m)


def _delete_request(trust: DirTrust, accounts: list[str], signer: Any = None) -> bytes:
    """nsc's delete request: a generic JWT self-signed by an operator key naming them."""
    signer = signer or trust.operator
    claims = {"sub": signer.public, "nats": {"accounts": accounts}}
    return encode(claims, signer).encode()


async def _delete_steps(url: str, system_creds: Path, trust: DirTrust, keys: Any) -> list[Any]:
    gone, kept = keys
    async with RawClient.connect_url(url) as c:
        await _log_in(c, gone, user_key())
        replies = await _sys_requests(
            url,
            system_creds,
            [
                ("$SYS.REQ.CLAIMS.LIST", b""),
                ("$SYS.REQ.CLAIMS.DELETE", _delete_request(trust, [gone.public], gone)),
                ("$SYS.REQ.CLAIMS.DELETE", _delete_request(trust, ["nonsense"])),
                ("$SYS.REQ.CLAIMS.DELETE", _delete_request(trust, [trust.system.public])),
                ("$SYS.REQ.CLAIMS.DELETE", _delete_request(trust, [gone.public])),
                ("$SYS.REQ.CLAIMS.LIST", b""),
            ],
        )
        ended = await _ended_with(c)
    for reply in replies[::5]:
        reply["data"].sort()
    return [*replies, ended, await _signed_login(url, gone), await _signed_login(url, kept)]


async def test_claims_list_and_delete(tmp_path: Path) -> None:
    """`$SYS.REQ.CLAIMS.LIST` lists the stored accounts; `$SYS.REQ.CLAIMS.DELETE` (with
    `allow_delete`) signed by the operator removes one: its connected users are closed
    with `Account Authentication Expired`, its file renamed `.jwt.deleted`, and its
    users refused after; requests not self-signed by the operator, malformed or naming
    the system account are refused in nats-server's words."""
    trust = DirTrust()
    keys = (trust.account(), trust.account())
    system_creds = _system_creds(trust, tmp_path)
    async with dir_servers(trust, "type: full, allow_delete: true") as (
        reference,
        ours,
        their_dir,
        our_dir,
    ):
        theirs = await _delete_steps(reference, system_creds, trust, keys)
        mine = await _delete_steps(ours, system_creds, trust, keys)
        their_files = sorted(p.name for p in their_dir.iterdir())
        our_files = sorted(p.name for p in our_dir.iterdir())
    assert sorted(theirs[0]["data"]) == sorted(trust.preload)
    assert theirs[4]["data"]["message"] == "deleted 1 accounts"
    assert theirs[6] == ((Err("Account Authentication Expired"),), True)
    assert theirs[7:] == [REFUSED, IN]
    for i, (t, m) in enumerate(zip(theirs, mine, strict=True)):
        assert m == t, (i, t, m)
    assert f"{keys[0].public}.jwt.deleted" in their_files
    assert our_files == their_files


async def _jetstream_usage(url: str, system_creds: Path) -> dict[str, Any]:
    """The server's JetStream totals (`$SYS.REQ.SERVER.PING.JSZ`)."""
    (reply,) = await _sys_requests(url, system_creds, [("$SYS.REQ.SERVER.PING.JSZ", b"")])
    return {key: reply["data"][key] for key in ("accounts", "streams", "messages")}


async def _deleted_jetstream_steps(
    url: str, system_creds: Path, trust: DirTrust, account: Any, creds_file: Path
) -> list[Any]:
    """A stream of two messages, the account deleted, then its JWT pushed again."""
    nc = await nats.connect(url, user_credentials=str(creds_file), allow_reconnect=False)
    try:
        js = nc.jetstream()
        await js.add_stream(name="S", subjects=["s.>"])
        for _ in range(2):
            await js.publish("s.1", b"x")
    finally:
        await nc.close()
    steps: list[Any] = [await _jetstream_usage(url, system_creds)]
    delete = _delete_request(trust, [account.public])
    steps += await _sys_requests(url, system_creds, [("$SYS.REQ.CLAIMS.DELETE", delete)])
    await asyncio.sleep(0.5)  # nats-server disables the account's JetStream after the reply
    steps.append(await _jetstream_usage(url, system_creds))
    # a new JWT (nats-server leaves a deleted account locked out when given the same one)
    token = account_jwt(account, trust.operator, top={"name": "again"}, limits=JS_LIMITS).encode()
    steps += await _sys_requests(url, system_creds, [("$SYS.REQ.CLAIMS.UPDATE", token)])
    nc = await nats.connect(url, user_credentials=str(creds_file), allow_reconnect=False)
    try:
        info = await nc.jetstream().stream_info("S")
        steps.append(info.state.messages)
    finally:
        await nc.close()
    steps.append(await _jetstream_usage(url, system_creds))
    return steps


async def test_a_deleted_account_has_its_jetstream_disabled(tmp_path: Path) -> None:
    """`$SYS.REQ.CLAIMS.DELETE` stops the account's JetStream (nats-server's `removeCb`
    and `disableJetStream`): the server counts neither it nor its streams; its streams
    stay on disk, and are back when its JWT is pushed again and a user logs in."""
    trust = DirTrust()
    account = trust.account(limits=JS_LIMITS)
    system_creds = _system_creds(trust, tmp_path)
    user = user_key()
    creds_file = tmp_path / "u.creds"
    creds_file.write_text(creds(user_jwt(user, account), user))
    resolver = "type: full, allow_delete: true"
    async with dir_servers(trust, resolver, jetstream=True) as (reference, ours, _, _):
        theirs = await _deleted_jetstream_steps(reference, system_creds, trust, account, creds_file)
        mine = await _deleted_jetstream_steps(ours, system_creds, trust, account, creds_file)
    assert theirs[0] == {"accounts": 1, "streams": 1, "messages": 2}
    assert theirs[1]["data"]["message"] == "deleted 1 accounts"
    assert theirs[2] == {"accounts": 0, "streams": 0, "messages": 0}
    assert theirs[4:] == [2, theirs[0]]
    assert mine == theirs


async def _limit_steps(url: str, system_creds: Path, trust: DirTrust, account: Any) -> list[Any]:
    """Two clients of an account, then its `conn` lowered to 1 and `payload` to 8."""
    async with RawClient.connect_url(url) as old, RawClient.connect_url(url) as new:
        await _log_in(old, account, user_key())
        await _log_in(new, account, user_key())
        limits = {"subs": -1, "payload": 8, "conn": 1}
        token = account_jwt(account, trust.operator, limits=limits)
        replies = await _sys_requests(
            url,
            system_creds,
            [(f"$SYS.REQ.ACCOUNT.{account.public}.CLAIMS.UPDATE", token.encode())],
        )
        ended = await _ended_with(new)
        await old.send(b"PUB small 8\r\n12345678\r\nPUB big 9\r\n123456789\r\nPING\r\n")
        ops = await old.read_ops(timeout=2.0, allow_eof=True)
        closed = await old.expect_closed(1.0)
    errors = tuple(op for op in ops if isinstance(op, Err) or op == PONG)
    return [replies[0]["data"]["message"], ended, (errors, closed)]


async def test_lowered_account_limits_reach_connected_clients(tmp_path: Path) -> None:
    """An update lowering `conn` closes the newest clients beyond it; a lowered `payload`
    bounds the publishes of those that stay (nats-server's `applyAccountLimits`)."""
    trust = DirTrust()
    account = trust.account()
    system_creds = _system_creds(trust, tmp_path)
    async with dir_servers(trust) as (reference, ours, _, _):
        theirs = await _limit_steps(reference, system_creds, trust, account)
        mine = await _limit_steps(ours, system_creds, trust, account)
    assert theirs[1] == ((Err("maximum account active connections exceeded"),), True)
    assert theirs[2] == ((Err("Maximum Payload Violation"),), True)
    assert mine == theirs


async def _memory_steps(url: str, system_creds: Path, trust: Trust, account: Any) -> list[Any]:
    subject = f"$SYS.REQ.ACCOUNT.{account.public}.CLAIMS.UPDATE"
    revoked = account_jwt(account, trust.operator, revocations={"*": int(time.time()) + 3600})
    before = await _sys_requests(url, system_creds, [(subject, revoked.encode())])
    async with RawClient.connect_url(url) as c:
        await _log_in(c, account, user_key())
        after = await _sys_requests(url, system_creds, [(subject, revoked.encode())])
        ended = await _ended_with(c)
    # the old form of the subject (nats-server still serves it)
    old_form = f"$SYS.ACCOUNT.{account.public}.CLAIMS.UPDATE"
    lifted = account_jwt(account, trust.operator)
    again = await _sys_requests(url, system_creds, [(old_form, lifted.encode())])
    return [*before, *after, ended, *again, await _signed_login(url, account)]


async def test_memory_resolver_claim_updates(tmp_path: Path) -> None:
    """With `resolver: MEMORY`, an update of an account no login has loaded yet is
    skipped; once loaded, it applies (revoking all users closes the connected one)."""
    trust = Trust()
    system = trust.account()
    trust.operator_claims = {"system_account": system.public}
    account = trust.account()
    user = user_key()
    system_creds = tmp_path / "sys.creds"
    system_creds.write_text(creds(user_jwt(user, system), user))
    async with servers(trust) as (reference, ours):
        theirs = await _memory_steps(reference, system_creds, trust, account)
        mine = await _memory_steps(ours, system_creds, trust, account)
    assert theirs[0]["data"]["message"] == "jwt update skipped"
    assert theirs[1]["data"]["message"] == "jwt updated"
    assert theirs[2] == ((Err("User Authentication Revoked"),), True)
    assert theirs[3]["data"]["message"] == "jwt updated"
    assert theirs[4] == IN  # the revocation lifted
    assert mine == theirs


async def _cache_steps(url: str, system_creds: Path, trust: DirTrust, keys: Any) -> list[Any]:
    loaded, stored, unknown = keys
    logins = [await _signed_login(url, account) for account in (loaded, unknown)]
    replies = await _sys_requests(
        url,
        system_creds,
        [
            ("$SYS.REQ.CLAIMS.UPDATE", account_jwt(loaded, trust.operator).encode()),
            ("$SYS.REQ.CLAIMS.UPDATE", account_jwt(stored, trust.operator).encode()),
            (
                f"$SYS.REQ.ACCOUNT.{unknown.public}.CLAIMS.UPDATE",
                account_jwt(unknown, trust.operator).encode(),
            ),
            ("$SYS.REQ.CLAIMS.LIST", b""),
        ],
    )
    replies[-1]["data"].sort()
    return [logins, replies]


async def test_the_cache_resolver(tmp_path: Path) -> None:
    """`type: cache`: the directory's accounts log in, an unknown one does not (nats-server
    asks other servers first, for `timeout`); updates apply to loaded accounts only
    (`jwt update cache skipped` for one stored but not logged in to, and one unknown)."""
    trust = DirTrust()
    keys = (trust.account(), trust.account(), account_key())
    system_creds = _system_creds(trust, tmp_path)
    resolver = 'type: cache, timeout: "200ms"'
    async with dir_servers(trust, resolver) as (reference, ours, _, _):
        theirs = await _cache_steps(reference, system_creds, trust, keys)
        mine = await _cache_steps(ours, system_creds, trust, keys)
    assert theirs[0] == [IN, REFUSED]
    messages = [r.get("data", r.get("error"))["message"] for r in theirs[1][:3]]
    assert messages == ["jwt updated cache", "jwt update cache skipped", "jwt update cache skipped"]
    for i, (t, m) in enumerate(zip(theirs[1], mine[1], strict=True)):
        assert m == t, (i, t, m)
    assert mine[0] == theirs[0]


async def _pack(url: str, system_creds: Path, their_hash: bytes) -> set[bytes]:
    """`$SYS.REQ.CLAIMS.PACK`'s messages up to the empty one that ends them."""
    nc = await nats.connect(url, user_credentials=str(system_creds), allow_reconnect=False)
    try:
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox)
        await nc.publish("$SYS.REQ.CLAIMS.PACK", their_hash, reply=inbox)
        got: set[bytes] = set()
        while (msg := await sub.next_msg(timeout=2)).data:
            got.add(msg.data)
        return got
    finally:
        await nc.close()


async def test_claims_pack(tmp_path: Path) -> None:
    """A pack request with another store's hash gets `<key>|<jwt>` for each account."""
    trust = DirTrust()
    trust.account()
    system_creds = _system_creds(trust, tmp_path)
    async with dir_servers(trust) as (reference, ours, _, _):
        theirs = await _pack(reference, system_creds, b"")
        mine = await _pack(ours, system_creds, b"")
    expected = {f"{key}|{token}".encode() for key, token in trust.preload.items()}
    assert theirs == expected
    assert mine == theirs


async def _js_info(nc: Any) -> Any:
    info = json.loads((await nc.request("$JS.API.INFO", b"", timeout=2)).data)
    return info["error"]["err_code"] if "error" in info else "enabled"


async def _jetstream_switch(url: str, system_creds: Path, trust: DirTrust, keys: Any) -> list[Any]:
    """An account without JetStream, then its JWT updated to enable it, then to disable
    it again, asked `$JS.API.INFO` by a client connected all along."""
    account, user = keys
    creds_file = system_creds.parent / "u.creds"
    creds_file.write_text(creds(user_jwt(user, account), user))
    nc = await nats.connect(url, user_credentials=str(creds_file), allow_reconnect=False)
    out: list[Any] = []
    try:
        out.append(await _js_info(nc))
        for limits in (JS_LIMITS, {"subs": -1, "payload": -1, "conn": -1}):
            token = account_jwt(account, trust.operator, limits=limits)
            subject = f"$SYS.REQ.ACCOUNT.{account.public}.CLAIMS.UPDATE"
            reply = await _sys_requests(url, system_creds, [(subject, token.encode())])
            out.append(reply[0]["data"]["message"])
            for _ in range(50):  # the engine starts (or stops) after the reply
                state = await _js_info(nc)
                if (state == "enabled") == (limits is JS_LIMITS):
                    break
                await asyncio.sleep(0.05)
            out.append(state)
            if state == "enabled":
                await nc.jetstream().add_stream(name="S", subjects=["s.>"])
                out.append((await nc.jetstream().publish("s.1", b"x")).seq)
    finally:
        await nc.close()
    return out


async def test_an_update_switches_the_accounts_jetstream(tmp_path: Path) -> None:
    trust = DirTrust()
    keys = (trust.account(), user_key())
    system_creds = _system_creds(trust, tmp_path)
    async with dir_servers(trust, jetstream=True) as (reference, ours, _, _):
        theirs = await _jetstream_switch(reference, system_creds, trust, keys)
        mine = await _jetstream_switch(ours, system_creds, trust, keys)
    assert theirs == [10039, "jwt updated", "enabled", 1, "jwt updated", 10039]
    assert mine == theirs


async def _subs_and_permissions(
    url: str, system_creds: Path, trust: DirTrust, account: Any
) -> list[Any]:
    """A client with two subscriptions, then the account's `subs` lowered to 2 and its
    default permissions narrowed; a second client, whose subscription the new
    permissions forbid, publishes after."""
    async with RawClient.connect_url(url) as subscriber, RawClient.connect_url(url) as publisher:
        await _log_in(subscriber, account, user_key())
        await _log_in(publisher, account, user_key())
        await subscriber.send(b"SUB a 1\r\nSUB b 2\r\nPING\r\n")
        await subscriber.read_ops(until=lambda op: op == PONG)
        await publisher.send(b"SUB secret.> q 2\r\nPING\r\n")
        await publisher.read_ops(until=lambda op: op == PONG)
        token = account_jwt(
            account,
            trust.operator,
            limits={"subs": 2, "payload": -1, "conn": -1},
            default_permissions={
                "pub": {"allow": ["allowed.>"]},
                "sub": {"allow": ["allowed.>"]},
            },
        )
        subject = f"$SYS.REQ.ACCOUNT.{account.public}.CLAIMS.UPDATE"
        await _sys_requests(url, system_creds, [(subject, token.encode())])
        errors, closed = await _ended_with(subscriber)
        # nats-server drops the subscriptions in its map's (random) order, and tells of
        # the maximum from a goroutine of its own: the -ERRs in no set order
        ended = (tuple(sorted(op.text for op in errors)), closed)
        await publisher.send(b"PUB denied 1\r\nx\r\nPUB allowed.x 1\r\nx\r\nPING\r\n")
        ops = await publisher.read_ops(until=lambda op: op == PONG, allow_eof=True)
    return [ended, tuple(op for op in ops if isinstance(op, Err) or op == PONG)]


async def test_an_update_lowering_subs_and_narrowing_default_permissions(tmp_path: Path) -> None:
    """nats-server closes a client already at a lowered `subs` (`subsAtLimit`), and new
    default permissions bind the users without their own at once: the subscriptions
    they forbid are removed, with an -ERR each."""
    trust = DirTrust()
    account = trust.account()
    system_creds = _system_creds(trust, tmp_path)
    async with dir_servers(trust) as (reference, ours, _, _):
        theirs = await _subs_and_permissions(reference, system_creds, trust, account)
        mine = await _subs_and_permissions(ours, system_creds, trust, account)
    assert theirs[0] == (
        (
            'Permissions Violation for Subscription to "a" (sid "1")',
            'Permissions Violation for Subscription to "b" (sid "2")',
            "maximum subscriptions exceeded",
        ),
        True,
    )
    assert theirs[1] == (
        Err('Permissions Violation for Subscription to "secret.>" using queue "q" (sid "2")'),
        Err('Permissions Violation for Publish to "denied"'),
        PONG,
    )
    assert mine == theirs


async def _expiry_lifted(url: str, system_creds: Path, trust: DirTrust, account: Any) -> Any:
    async with RawClient.connect_url(url) as c:
        await _log_in(c, account, user_key())
        token = account_jwt(account, trust.operator)  # no `exp` any more
        subject = f"$SYS.REQ.ACCOUNT.{account.public}.CLAIMS.UPDATE"
        await _sys_requests(url, system_creds, [(subject, token.encode())])
        await asyncio.sleep(3)
        await c.send(b"PING\r\n")
        ops = await c.read_ops(until=lambda op: op == PONG, allow_eof=True)
        return tuple(op for op in ops if isinstance(op, Err) or op == PONG), c.closed


async def test_an_update_without_exp_keeps_the_accounts_clients(tmp_path: Path) -> None:
    """The account JWT would expire in 2 s; an update without `exp` re-arms the clients'
    expiry (nats-server's `checkExpiration`): they stay."""
    trust = DirTrust()
    account = trust.account(top={"exp": int(time.time()) + 2})
    system_creds = _system_creds(trust, tmp_path)
    async with dir_servers(trust) as (reference, ours, _, _):
        theirs, mine = await asyncio.gather(
            _expiry_lifted(reference, system_creds, trust, account),
            _expiry_lifted(ours, system_creds, trust, account),
        )
    assert theirs == ((PONG,), False)
    assert mine == theirs


async def _signer_removed(url: str, system_creds: Path, trust: DirTrust, keys: Any) -> Any:
    """A user issued by the account's signing key and one by the account itself; then
    the account JWT is updated without that signing key."""
    account, signer = keys
    by_signer, by_account = user_key(), user_key()
    async with RawClient.connect_url(url) as a, RawClient.connect_url(url) as b:
        for c, user, issuer, extra in (
            (a, by_signer, signer, {"issuer_account": account.public}),
            (b, by_account, account, {}),
        ):
            nonce = c.info["nonce"].encode()
            token = user_jwt(user, issuer, **extra)
            ops = await c.handshake(protocol=0, jwt=token, sig=b64(user.sign(nonce)))
            assert PONG in ops, ops
        token = account_jwt(account, trust.operator)  # no signing keys any more
        subject = f"$SYS.REQ.ACCOUNT.{account.public}.CLAIMS.UPDATE"
        await _sys_requests(url, system_creds, [(subject, token.encode())])
        ended = await _ended_with(a)
        await b.send(b"PING\r\n")
        ops = await b.read_ops(until=lambda op: op == PONG, allow_eof=True)
        return ended, tuple(op for op in ops if op == PONG)


async def test_an_update_removing_a_signing_key_closes_its_users(tmp_path: Path) -> None:
    """nats-server closes (without an -ERR) the clients whose user was issued by a
    signing key the updated account JWT no longer has; the others stay."""
    trust = DirTrust()
    signer = account_key()
    account = trust.account(signing_keys=[signer.public])
    system_creds = _system_creds(trust, tmp_path)
    async with dir_servers(trust) as (reference, ours, _, _):
        theirs = await _signer_removed(reference, system_creds, trust, (account, signer))
        mine = await _signer_removed(ours, system_creds, trust, (account, signer))
    assert theirs == (((), True), (PONG,))
    assert mine == theirs


async def _stream_limit_steps(
    url: str, system_creds: Path, trust: DirTrust, account: Any, user: Any
) -> list[Any]:
    """A directory account whose JWT allows one stream: a second refused; its JWT
    updated to allow two (applied at once to the account loaded at the first login);
    a second stream made, a third refused."""
    creds_file = system_creds.parent / "u.creds"
    creds_file.write_text(creds(user_jwt(user, account), user))
    nc = await nats.connect(url, user_credentials=str(creds_file), allow_reconnect=False)
    out: list[Any] = []

    async def add(name: str) -> Any:
        config = {"name": name, "subjects": [f"{name}.>"], "storage": "memory"}
        subject = f"$JS.API.STREAM.CREATE.{name}"
        reply = json.loads((await nc.request(subject, json.dumps(config).encode(), 2)).data)
        return reply["error"]["err_code"] if "error" in reply else "created"

    try:
        out += [await add("A"), await add("B")]
        token = account_jwt(account, trust.operator, limits={**JS_LIMITS, "streams": 2})
        subject = f"$SYS.REQ.ACCOUNT.{account.public}.CLAIMS.UPDATE"
        reply = await _sys_requests(url, system_creds, [(subject, token.encode())])
        out.append(reply[0]["data"]["message"])
        out += [await add("B"), await add("C")]
    finally:
        await nc.close()
    return out


async def test_jetstream_limits_of_a_directory_account_and_their_update(tmp_path: Path) -> None:
    """An account JWT's JetStream limits bind the account loaded at its first login, and
    an update of them applies at once, on both servers."""
    trust = DirTrust()
    account = trust.account(limits={**JS_LIMITS, "streams": 1})
    user = user_key()
    system_creds = _system_creds(trust, tmp_path)
    async with dir_servers(trust, jetstream=True) as (reference, ours, _, _):
        theirs = await _stream_limit_steps(reference, system_creds, trust, account, user)
        mine = await _stream_limit_steps(ours, system_creds, trust, account, user)
    assert theirs == ["created", 10027, "jwt updated", "created", 10027]
    assert mine == theirs
