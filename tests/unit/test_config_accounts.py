"""The `accounts {}` block and `system_account` read into `Settings` (their conformance
with nats-server's errors is in tests/conformance/test_accounts_conformance.py)."""

from __future__ import annotations

import pytest

from brook.config.conf import parse_conf, settings_from_conf
from brook.config.settings import ConfigError, JetStreamAccountLimits, NkeyUser, Settings, User
from tests.support.nkeyusers import new_user


def conf(text: str) -> Settings:
    return settings_from_conf(parse_conf(text))


def test_users_belong_to_their_account_with_its_default_permissions() -> None:
    nkey = new_user().public
    s = conf(
        "accounts {\n"
        "  Orders: {\n"
        "    users: [{user: a, password: a}, {user: b, password: b, permissions: {pub: x}}]\n"
        '    default_permissions: { publish: "orders.>" }\n'
        "    jetstream: enabled\n"
        "  }\n"
        f"  B: {{ users: [{{nkey: {nkey}}}] }}\n"
        "}\n"
        "authorization { users: [{user: g, password: g}] }\n"
    )
    assert [(a.name, a.jetstream) for a in s.accounts] == [("Orders", True), ("B", False)]
    users = {u.user: u for u in s.auth.users}
    assert users["a"].account == "Orders"  # the name's case kept
    assert users["a"].permissions is not None
    assert users["a"].permissions.publish is not None
    assert users["a"].permissions.publish.allow == ["orders.>"]
    assert users["b"].permissions is not None
    assert users["b"].permissions.publish is not None
    assert users["b"].permissions.publish.allow == ["x"]
    assert users["g"].account == "$G"  # the authorization block, read after, keeps them
    assert s.auth.nkeys == [NkeyUser(nkey, None, "B")]
    assert s.system_account_name == "$SYS"


def test_accounts_by_name_and_system_account() -> None:
    s = conf("accounts: [A, SYS]\nsystem_account: SYS\n")
    assert [a.name for a in s.accounts] == ["A", "SYS"]
    assert s.system_account_name == "SYS"
    assert not s.anonymous_global  # A is no system account


def test_only_system_account_users_let_anonymous_clients_in_to_the_global_account() -> None:
    assert conf("accounts { $SYS: { users: [{user: s, password: s}] } }\n").anonymous_global
    with_auth = "authorization { users: [{user: g, password: g}] }\n"
    assert not conf(
        with_auth + "accounts { $SYS: { users: [{user: s, password: s}] } }\n"
    ).anonymous_global


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (
            "accounts { A: { jetstream: { cluster_traffic: owner } } }\n",
            "'accounts.A.jetstream.cluster_traffic'",
        ),
        ("accounts { A: { limits: {} } }\n", "'accounts.A.limits' (line 1)"),
        ('accounts { "a/b": { jetstream: enabled } }\n', "needs a name that is a directory"),
        ("accounts { A: { users: {user: a} } }\n", "accounts.A.users: expected an array"),
    ],
    ids=["jetstream-cluster-traffic", "limits", "path-name", "users-not-a-list"],
)
def test_refused(text: str, words: str) -> None:
    with pytest.raises(ConfigError) as refused:
        conf(text)
    assert words in str(refused.value)


def test_jetstream_block_without_limits_enables() -> None:
    (account,) = conf("accounts { A: { jetstream: {} } }\n").accounts
    assert account.jetstream
    assert User("a", "a").account == "$G"


def test_jetstream_block_limits_with_nats_server_aliases() -> None:
    text = (
        "accounts { A: { jetstream: { mem: 1K, disk: 2MB, streams: 3, consumers: 4,\n"
        "max_ack_pending: 5, max_bytes: true, mem_max_stream_bytes: 6,\n"
        "store_max_stream_bytes: 7 } } }\n"
    )
    (account,) = conf(text).accounts
    assert account.jetstream
    assert account.jetstream_limits == JetStreamAccountLimits(
        max_memory=1000,
        max_storage=2 * 1024 * 1024,
        max_streams=3,
        max_consumers=4,
        max_ack_pending=5,
        memory_max_stream_bytes=6,
        storage_max_stream_bytes=7,
        max_bytes_required=True,
    )
    assert type(account.jetstream_limits.max_memory) is int  # not the parser's SuffixedInt
