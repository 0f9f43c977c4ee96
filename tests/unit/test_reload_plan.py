"""A config reload's plan (server/reload.py, ADR 0042): which changes are refused, in
nats-server's words (reload.go `diffOptions`), and which are taken, with its notices.
Run on a `Server` that is not started: the plan only compares settings."""

from __future__ import annotations

import dataclasses

import pytest

from brook.config.settings import AuthSettings, Settings, User
from brook.server.reload import ReloadError, _not_reloaded, plan
from brook.server.server import Server


def users(*names: str, no_auth_user: str | None = None) -> AuthSettings:
    return AuthSettings(users=[User(n, n) for n in names], no_auth_user=no_auth_user)


BASE = Settings(host="127.0.0.1", port=4222, server_name="a", auth=users("a", "b"))


@pytest.mark.parametrize(
    ("changes", "refusal"),
    [
        ({"server_name": "b"}, "ServerName: old=a, new=b"),
        ({"host": "0.0.0.0"}, "Host: old=127.0.0.1, new=0.0.0.0"),
        ({"port": 4223}, "Port: old=4222, new=4223"),
        ({"max_subscriptions": 5}, "MaxSubs: old=0, new=5"),
        ({"max_pending_bytes": 1 << 20}, "MaxPending: old=67108864, new=1048576"),
        ({"http_port": 8222}, "HTTPPort: old=0, new=8222"),
        ({"auth": users("a", "b", no_auth_user="a")}, "NoAuthUser: old=, new=a"),
        # the first refused option in nats-server's order is the one named
        ({"max_subscriptions": 5, "host": "::"}, "Host: old=127.0.0.1, new=::"),
    ],
)
def test_refused_in_nats_server_words(changes: dict[str, object], refusal: str) -> None:
    server = Server(BASE.replace())
    with pytest.raises(ReloadError) as refused:
        plan(server, BASE.replace(**changes))
    assert str(refused.value) == f"config reload not supported for {refusal}"


def test_no_auth_user_may_only_go_with_its_user() -> None:
    server = Server(BASE.replace(auth=users("a", "b", no_auth_user="a")))
    with pytest.raises(ReloadError, match=r"NoAuthUser: old=a, new=$"):
        plan(server, BASE.replace(auth=users("a", "b")))
    assert plan(server, BASE.replace(auth=users("b"))).notices == [
        "Reloaded: authorization users",
        "Reloaded: accounts",
    ]


def test_taken_changes_are_noticed_in_nats_server_order() -> None:
    server = Server(BASE.replace())
    new = BASE.replace(
        port=0,  # any port: the bound one stays
        write_deadline_s=5.0,
        max_payload_bytes=2000,
        ping_interval_s=180.0,
        debug=True,
        auth_timeout_s=1.5,
        max_connections=10,
    )
    assert plan(server, new).notices == [
        "Reloaded: debug = true",
        "Reloaded: max_connections = 10",
        "Reloaded: authorization users",
        "Reloaded: accounts",
        "Reloaded: ping_interval = 3m0s",
        "Reloaded: authorization timeout = 1.5",
        "Reloaded: max_payload = 2000",
        "Reloaded: write_deadline = 5s",
    ]


@dataclasses.dataclass
class _Block:
    logtime: bool = True
    lame_duck_duration_s: float = 120.0


def test_a_setting_without_a_reload_is_refused_by_its_nats_server_name() -> None:
    _not_reloaded("process", _Block(), _Block())
    with pytest.raises(ReloadError) as refused:
        _not_reloaded("process", _Block(), _Block(lame_duck_duration_s=30.0))
    assert str(refused.value) == (
        "config reload not supported for LameDuckDuration: old=2m0s, new=30s"
    )
