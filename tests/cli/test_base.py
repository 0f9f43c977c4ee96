"""The shared layer of the client commands (brook.cli.base, ADR 0043): the `nats` CLI's
connection options and environment variables reach the server, failures are one line on
stderr with the exit status, and `--json` is the output's machine form. Run through
`brook kv ls`, the cheapest JetStream command."""

from __future__ import annotations

from pathlib import Path

import pytest

import brook
from brook.config.conf import parse_conf, settings_from_conf
from brook.config.settings import Settings
from tests.cli.runner import cli, ok
from tests.support.certs import make_certs
from tests.support.jwts import (
    account_jwt,
    account_key,
    creds,
    operator_jwt,
    operator_key,
    user_jwt,
    user_key,
)
from tests.support.nkeyusers import new_user

pytestmark = pytest.mark.timeout(60)


def conf(text: str, store: Path) -> Settings:
    return settings_from_conf(parse_conf(f'{text}\njetstream {{ store_dir: "{store}" }}'))


async def test_token_user_password_and_their_environment_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "authorization { users = [ {user: a, password: s3cret} ] }"
    async with brook.serve(settings=conf(text, tmp_path)) as srv:
        assert (await ok(srv.url, "kv", "ls", "--user", "a", "--password", "s3cret")).out
        refused = await cli(srv.url, "kv", "ls", "--user", "a", "--password", "wrong")
        assert refused.code == 1
        assert refused.err == (
            f"brook kv ls: cannot connect to {srv.url}: Authorization Violation\n"
        )
        monkeypatch.setenv("NATS_USER", "a")
        monkeypatch.setenv("NATS_PASSWORD", "s3cret")
        await ok(srv.url, "kv", "ls")
    async with brook.serve(settings=conf('authorization { token: "t0k" }', tmp_path)) as srv:
        monkeypatch.delenv("NATS_USER")
        monkeypatch.delenv("NATS_PASSWORD")
        await ok(srv.url, "kv", "ls", "--token", "t0k")
        # As the `nats` CLI: a user name without a password is a token.
        await ok(srv.url, "kv", "ls", "--user", "t0k")
        monkeypatch.setenv("NATS_TOKEN", "t0k")
        await ok(srv.url, "kv", "ls")
        monkeypatch.setenv("NATS_URL", srv.url)
        await ok("", "kv", "ls")  # no -s: the URL from $NATS_URL
        monkeypatch.setenv("NATS_TOKEN", "bad")
        assert (await cli(srv.url, "kv", "ls")).code == 1


async def test_nkey_seed_file(tmp_path: Path) -> None:
    user = new_user()
    seed = tmp_path / "user.nk"
    seed.write_bytes(user.seed)
    text = f"authorization {{ users = [ {{nkey: {user.public}}} ] }}"
    async with brook.serve(settings=conf(text, tmp_path)) as srv:
        await ok(srv.url, "kv", "ls", "--nkey", str(seed))
        assert (await cli(srv.url, "kv", "ls")).code == 1
        missing = await cli(srv.url, "kv", "ls", "--nkey", str(tmp_path / "nope"))
        assert (missing.code, missing.err) == (
            1, f"brook kv ls: --nkey: no such file {str(tmp_path / 'nope')!r}\n",
        )  # fmt: skip


async def test_tls_client_certificate_and_handshake_first(tmp_path: Path) -> None:
    certs = make_certs(tmp_path)
    client = certs.client("alice")
    tls = (
        f'tls {{ cert_file: "{certs.cert_file}", key_file: "{certs.key_file}",'
        f' ca_file: "{certs.ca_file}", verify: true, handshake_first: true }}'
    )
    async with brook.serve(settings=conf(tls, tmp_path)) as srv:
        url = srv.url.replace("nats://", "tls://")
        flags = ["--tlsca", str(certs.ca_file), "--tlscert", str(client.cert_file)]
        flags += ["--tlskey", str(client.key_file), "--tlsfirst"]
        assert (await ok(url, "kv", "ls", "--json", *flags)).json() == []
        without_cert = await cli(url, "kv", "ls", "--tlsca", str(certs.ca_file), "--tlsfirst")
        assert without_cert.code == 1
        assert without_cert.err.startswith(f"brook kv ls: cannot connect to {url}")
        half = await cli(url, "kv", "ls", "--tlscert", str(client.cert_file))
        assert half.err == "brook kv ls: --tlscert and --tlskey go together\n"


async def test_exit_statuses_and_usage(tmp_path: Path) -> None:
    async with brook.serve(port=0, store_dir=str(tmp_path)) as srv:
        usage = await cli(srv.url, "kv", "ls", "--timeout", "soon")
        assert usage.code == 2
        assert "not a duration: 'soon'" in usage.err
        help_ = await cli(srv.url, "kv", "--help")
        assert help_.code == 0
        for flag in ("--creds", "--nkey", "--tlscert", "--tlskey", "--tlsca", "--tlsfirst"):
            assert flag in help_.out
    down = await cli("nats://127.0.0.1:1", "kv", "ls", "--timeout", "1s")
    assert down.code == 1
    assert down.err.startswith("brook kv ls: cannot connect to nats://127.0.0.1:1: ")


async def test_no_jetstream_is_said_so() -> None:
    async with brook.serve(port=0) as srv:
        result = await cli(srv.url, "kv", "ls")
    assert (result.code, result.err) == (1, "brook kv ls: jetstream not enabled\n")


async def test_creds_file(tmp_path: Path) -> None:
    operator, account, user = operator_key(), account_key(), user_key()
    (tmp_path / "op.jwt").write_text(operator_jwt(operator))
    limits = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1,
              "wildcards": True, "conn": -1, "leaf": -1, "mem_storage": -1,
              "disk_storage": -1, "streams": -1, "consumer": -1}  # fmt: skip
    token = account_jwt(account, operator, limits=limits)
    text = (
        f"operator: {tmp_path / 'op.jwt'}\nresolver: MEMORY\n"
        f'resolver_preload: {{ {account.public}: "{token}" }}'
    )
    user_creds = tmp_path / "user.creds"
    user_creds.write_text(creds(user_jwt(user, account), user))
    async with brook.serve(settings=conf(text, tmp_path / "store")) as srv:
        assert (await ok(srv.url, "stream", "ls", "--creds", str(user_creds), "-j")).json() == []
        refused = await cli(srv.url, "stream", "ls")
        assert refused.err == (
            f"brook stream ls: cannot connect to {srv.url}: Authorization Violation\n"
        )
