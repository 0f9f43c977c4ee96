"""server/jwtauth.py at chosen moments: connect-time windows (across midnight too), when
a login expires, limits taken from the user and its account, and what Brook refuses that
nats-server would serve (permission templates of scoped signing keys).

The login checks themselves are compared with nats-server in
tests/conformance/test_jwt_conformance.py; here the clock is the test's.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from brook.config.settings import OperatorSettings
from brook.server.jwtauth import JwtUser, OperatorMode
from tests.support.jwts import (
    Key,
    account_jwt,
    account_key,
    b64,
    operator_jwt,
    operator_key,
    user_jwt,
    user_key,
)

OPERATOR = operator_key()
NONCE = "nonce-of-the-info"
UTC = datetime.UTC


def _at(hour: int, minute: int = 0) -> float:
    """A moment today, UTC."""
    today = datetime.datetime.now(UTC).replace(hour=hour, minute=minute, second=0, microsecond=0)
    return today.timestamp()


def _mode(account: Key, clock: float, **account_nats: Any) -> OperatorMode:
    settings = OperatorSettings(
        jwts=[operator_jwt(OPERATOR)],
        resolver="MEMORY",
        preload={account.public: account_jwt(account, OPERATOR, **account_nats)},
    )
    return OperatorMode(settings, clock=lambda: clock)


def _login(mode: OperatorMode, token: str, user: Key) -> JwtUser | None:
    options = {"jwt": token, "sig": b64(user.sign(NONCE.encode()))}
    return mode.login(options, NONCE, host="127.0.0.1", connection_type="STANDARD")


WINDOW = {"start": "22:00:00", "end": "06:00:00"}  # across midnight


@pytest.mark.parametrize(
    ("moment", "left_s"),
    [
        (_at(23), 7 * 3600.0),  # before midnight: until 06:00 tomorrow
        (_at(5, 30), 1800.0),  # after midnight
        (_at(12), None),  # outside
    ],
)
def test_connect_windows_across_midnight(moment: float, left_s: float | None) -> None:
    account, user = account_key(), user_key()
    token = user_jwt(user, account, times=[WINDOW], times_location="UTC")
    got = _login(_mode(account, moment), token, user)
    if left_s is None:
        assert got is None
    else:
        assert got is not None
        assert got.expires_in_s == left_s


def test_the_login_expires_at_the_earlier_of_exp_and_the_window_end() -> None:
    account, user = account_key(), user_key()
    now = _at(23)
    soon = user_jwt(user, account, times=[WINDOW], times_location="UTC", top={"exp": int(now) + 60})
    got = _login(_mode(account, now), soon, user)
    assert got is not None
    assert got.expires_in_s == 60.0
    forever = _login(_mode(account, now), user_jwt(user, account), user)
    assert forever is not None
    assert forever.expires_in_s is None


def test_limits_are_the_smaller_of_user_and_account() -> None:
    account, user = account_key(), user_key()
    mode = _mode(account, _at(12), limits={"subs": 10, "payload": -1, "conn": -1})
    got = _login(mode, user_jwt(user, account, subs=-1, payload=500), user)
    assert got is not None
    assert (got.max_subs, got.max_payload) == (10, 500)
    got = _login(mode, user_jwt(user, account, subs=3), user)
    assert got is not None
    assert got.max_subs == 3
