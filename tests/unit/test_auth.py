"""brook.server.auth.Authenticator on any CONNECT options: a login or None, never an error.

The decisions themselves are compared with nats-server in
tests/conformance/test_auth_conformance.py; this checks that no CONNECT a client can send
(strings of any content, after the connection's type checks) makes the check raise.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from brook.config.settings import AuthSettings, NkeyUser, User
from brook.server.auth import Authenticator, Login
from tests.support.nkeyusers import new_user

USER = new_user()
SETTINGS = AuthSettings(
    users=[User("alice", "secret"), User("bob", "$2b$04$" + "x" * 53)],
    nkeys=[NkeyUser(USER.public)],
    no_auth_user="alice",
)
KEYS = ("user", "pass", "auth_token", "nkey", "sig", "jwt")
texts = st.one_of(st.text(max_size=120), st.sampled_from(["alice", "bob", "", USER.public]))


@given(st.dictionaries(st.sampled_from(KEYS), texts), st.text(max_size=20))
def test_login_never_raises(options: dict[str, Any], nonce: str) -> None:
    auth = Authenticator(SETTINGS)
    login = auth.login(options, nonce)
    assert login is None or isinstance(login, Login)


def test_a_signed_nonce_logs_the_nkey_user_in_and_an_old_one_does_not() -> None:
    auth = Authenticator(SETTINGS)
    nonce = auth.new_nonce()
    assert len(nonce) == 15
    assert nonce != auth.new_nonce()
    login = auth.login({"nkey": USER.public, "sig": USER.sign(nonce)}, nonce)
    assert login is not None
    assert login.name == USER.public
    assert auth.login({"nkey": USER.public, "sig": USER.sign(nonce)}, auth.new_nonce()) is None
