"""`leafnodes {}` read as nats-server reads it (config/conf_leafnodes.py): the remotes
Brook dials, and every key Brook does not carry out yet refused by name."""

from __future__ import annotations

import pytest

from brook.config.conf import parse_conf, settings_from_conf
from brook.config.settings import (
    ConfigError,
    LeafNodeSettings,
    LeafRemoteSettings,
    LeafUser,
    TLSSettings,
)
from tests.support.nkeyusers import new_user

USER = new_user()


def test_hub() -> None:
    s = settings_from_conf(
        parse_conf(
            """
            accounts { A: {} }
            leafnodes {
              listen: "127.0.0.1:7000"
              authorization {
                user: leaf, password: s3cret, account: A, timeout: 3
                users: [ { user: other, password: x } ]
              }
            }
            """
        )
    )
    leaf = s.leafnodes
    assert (leaf.host, leaf.port, leaf.auth_timeout_s) == ("127.0.0.1", 7000, 3.0)
    assert leaf.users == [LeafUser("leaf", "s3cret", "A"), LeafUser("other", "x")]


def test_remotes() -> None:
    s = settings_from_conf(
        parse_conf(
            """
            accounts { A: {} }
            leafnodes {
              reconnect: "250ms"
              remotes: [
                { url: "nats-leaf://u:p@hub:7000" }
                { urls: ["hub1", "nats://hub2:7001"], account: A, compression: off }
                { url: "hub3", creds: "/etc/x.creds", deny_import: "a.>", deny_exports: [b, c.*] }
                { url: "tls://hub4:7000", tls: { ca_file: "/etc/ca.pem", timeout: 3 } }
              ]
            }
            """
        )
    )
    assert s.leafnodes.reconnect_delay_s == 0.25
    assert s.leafnodes.remotes == [
        LeafRemoteSettings(urls=["nats-leaf://u:p@hub:7000"]),
        LeafRemoteSettings(urls=["nats-leaf://hub1:7422", "nats://hub2:7001"], account="A"),
        LeafRemoteSettings(
            urls=["nats-leaf://hub3:7422"],
            credentials="/etc/x.creds",
            deny_imports=["a.>"],
            deny_exports=["b", "c.*"],
        ),
        LeafRemoteSettings(
            urls=["tls://hub4:7000"], tls=TLSSettings(ca_file="/etc/ca.pem", timeout_s=3.0)
        ),
    ]


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ("leafnodes { min_version: 2.8.0 }", "leafnodes.min_version \\(line 1\\): not supported"),
        ("leafnodes { advertise: 'h:x' }", "leafnodes.advertise: 'h:x' is not a valid host:port"),
        (
            "leafnodes { tls: { pinned_certs: [] } }",
            "leafnodes.tls.pinned_certs \\(line 1\\): not supported",
        ),
        (
            "leafnodes { authorization: { nkey: UABC } }",
            "leafnodes.authorization.nkey: Not a valid public nkey for leafnode authorization",
        ),
        (
            f"leafnodes {{ authorization: {{ nkey: {USER.public}, users: [{{user: a}}] }} }}",
            "leafnodes.authorization: can not have a single nkey and a users array",
        ),
        (
            "leafnodes { authorization: { users: [ { user: x, account: Z } ] } }",
            "account 'Z' of user 'x' does not exist",
        ),
        ("leafnodes { port: 70000 }", "not a TCP port"),
        (
            "leafnodes { authorization: { user: a, password: '$2a$11$abcdefghijkl' } }",
            "a bcrypt password for a leafnode user: not supported",
        ),
        ("leafnodes { bogus: 1 }", "unknown configuration key 'leafnodes.bogus'"),
        (
            'leafnodes { remotes: [ { url: "h", nkey: "SU..." } ] }',
            r"leafnodes.remotes\[0\].nkey: Remote leafnode nkey is not a valid seed: 'SU...'",
        ),
        (
            f'leafnodes {{ remotes: [ {{ url: "h", seed: "{USER.public}" }} ] }}',
            r"leafnodes.remotes\[0\].seed: Remote leafnode nkey is not a valid seed",
        ),
        (
            f'leafnodes {{ remotes: [ {{ url: "h", nkey: "{USER.seed.decode()}", creds: x }} ] }}',
            r"leafnodes.remotes\[0\]: Remote leafnode can not have both creds and nkey defined",
        ),
        (
            'leafnodes { remotes: [ { url: "h", deny_imports: ["a b"] } ] }',
            "invalid subject 'a b'",
        ),
        (
            'leafnodes { remotes: [ { url: "h", hub: true } ] }',
            r"leafnodes.remotes\[0\].hub \(line 1\): not supported",
        ),
        (
            'leafnodes { remotes: [ { url: "h", tls: { verify_and_map: true } } ] }',
            r"leafnodes.remotes\[0\].tls.verify_and_map \(line 1\): not supported by Brook"
            " for leafnodes",
        ),
        ('leafnodes { remotes: [ { url: "ws://h:1" } ] }', "nats-leaf://, nats:// or tls://"),
        ('leafnodes { remotes: [ { url: "h", compression: s2_fast } ] }', "not compressed"),
        ("leafnodes { remotes: [ { account: A } ] }", "needs a url"),
        ('leafnodes { remotes: [ { url: "h", account: B } ] }', "account 'B'"),
        ("leafnodes { remotes: [ 1 ] }", "Expected remote leafnode entry to be a map"),
        ("leafnodes { reconnect: 0 }", "positive duration"),
    ],
)
def test_refused(conf: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        settings_from_conf(parse_conf(conf))


@pytest.mark.parametrize(
    ("advertise", "expected"),
    [("h:5", ("h", 5)), ("h", ("h", 7422)), ("h:0", ("h", 7422)), ("[::1]:7", ("::1", 7))],
)
def test_advertise(advertise: str, expected: tuple[str, int]) -> None:
    """nats-server's `parseHostPort`: the listener's port when none (or 0, -1) is given."""
    s = settings_from_conf(parse_conf(f'leafnodes {{ port: 7422, advertise: "{advertise}" }}'))
    assert s.leafnodes.advertised(7422) == expected


def test_ignore_discovered_servers() -> None:
    s = settings_from_conf(
        parse_conf('leafnodes { remotes: [ { url: "h", ignore_discovered_servers: true } ] }')
    )
    assert s.leafnodes.remotes[0].ignore_discovered_servers


@pytest.mark.parametrize(
    ("auth_timeout_s", "tls", "expected"),
    [
        (0.0, None, 2.0),
        (0.0, TLSSettings(cert_file="c", key_file="k"), 3.0),
        (0.0, TLSSettings(cert_file="c", key_file="k", timeout_s=5.0), 6.0),
        (0.5, TLSSettings(cert_file="c", key_file="k"), 0.5),
    ],
)
def test_login_timeout_is_nats_servers_default(
    auth_timeout_s: float, tls: TLSSettings | None, expected: float
) -> None:
    """nats-server's `getDefaultAuthTimeout`: with TLS on the listener a spoke has the TLS
    timeout plus a second to log in, so the refusal cannot come mid-handshake."""
    leaf = LeafNodeSettings(port=7000, auth_timeout_s=auth_timeout_s, tls=tls)
    assert leaf.login_timeout_s == expected
