"""The `websocket {}` block: nats-server's keys and checks, and keys Brook does not serve
refused by name and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from brook.config.conf import load_conf_file, parse_conf, settings_from_conf
from brook.config.settings import AuthSettings, ConfigError, Settings, TLSSettings, User
from tests.support.jwts import operator_jwt, operator_key


def _settings(text: str) -> Settings:
    return settings_from_conf(parse_conf(text))


def test_block_read_with_nats_server_keys_and_aliases() -> None:
    ws = _settings(
        """
        ws {
          listen: "127.0.0.1:8080"
          no_tls: true
          same_origin: true
          allowed_origins: ["http://a.example.com", "https://b.example.com:8443"]
          compress: true
          authorization { user: u, password: p, timeout: 3 }
        }
        """
    ).websocket
    assert (ws.host, ws.port, ws.no_tls, ws.same_origin, ws.compression) == (
        "127.0.0.1", 8080, True, True, True,
    )  # fmt: skip
    assert ws.allowed_origins == ["http://a.example.com", "https://b.example.com:8443"]
    assert ws.auth == AuthSettings(token=None, users=[User("u", "p")])
    assert ws.auth_timeout_s == 3.0
    one = _settings('websocket { port: -1, no_tls: true, origin: "http://x" }').websocket
    assert one.allowed_origins == ["http://x"]


def test_defaults_and_no_listener_without_port() -> None:
    ws = _settings("websocket { no_tls: true }").websocket
    assert (ws.port, ws.host, ws.compression, ws.auth) == (0, "0.0.0.0", False, None)


def test_tls_is_required_unless_no_tls_as_in_nats_server() -> None:
    with pytest.raises(ConfigError, match=r"^websocket requires TLS configuration$"):
        _settings("websocket { port: 8080 }")


def test_tls_block_read_as_the_client_ports() -> None:
    """wss://: the block's `tls {}` is read as nats-server's `parseTLS` reads the client
    port's (verify_and_map implies verify), and satisfies the TLS requirement."""
    ws = _settings(
        """
        websocket {
          port: 8443
          tls {
            cert_file: "s.pem"
            key_file: "s-key.pem"
            ca_file: "ca.pem"
            verify_and_map: true
            timeout: "1.5s"
            min_version: "1.3"
          }
        }
        """
    ).websocket
    assert ws.tls == TLSSettings(
        cert_file="s.pem", key_file="s-key.pem", ca_file="ca.pem", verify=True,
        verify_and_map=True, timeout_s=1.5, min_version="1.3",
    )  # fmt: skip
    assert _settings("port: 1").tls is None  # the client port's stays its own


@pytest.mark.parametrize(
    ("key", "value"), [("cipher_suites", '["x"]'), ("ocsp_peer", "true"), ("insecure", "true")]
)
def test_tls_keys_brook_does_not_serve_refused_inside_the_block(key: str, value: str) -> None:
    text = f"websocket {{\n  port: 8443\n  tls {{\n    cert_file: a\n    {key}: {value}\n  }}\n}}\n"
    with pytest.raises(
        ConfigError, match=rf"^websocket\.tls\.{key} \(line 5\): not supported by Brook$"
    ):
        _settings(text)


def test_no_auth_user_must_be_one_of_the_servers_users() -> None:
    """nats-server's `validateNoAuthUser`, also for the listener's own no_auth_user."""
    users = "authorization { users: [ { user: a, password: b }, { user: guest, password: g } ] }"
    ws = _settings(f"{users}\nwebsocket {{ port: 1, no_tls: true, no_auth_user: guest }}")
    assert (ws.websocket.no_auth_user, ws.auth.no_auth_user) == ("guest", None)
    with pytest.raises(
        ConfigError,
        match=r'^no_auth_user: "nobody" not present as user or nkey in authorization block',
    ):
        _settings(f"{users}\nno_auth_user: a\nws {{ port: 1, no_tls: true, no_auth_user: nobody }}")
    with pytest.raises(
        ConfigError, match=r'^no_auth_user: "guest" present, but users/nkeys are not defined$'
    ):
        _settings("websocket { port: 1, no_tls: true, no_auth_user: guest }")


def test_handshake_timeout_ping_interval_advertise_and_cookies_are_read() -> None:
    ws = _settings(
        "websocket {\n  port: 8080\n  no_tls: true\n  handshake_timeout: 2\n"
        '  ping_interval: "500ms"\n  advertise: "ws.example.com:443"\n'
        "  user_cookie: u\n  pass_cookie: p\n  token_cookie: t\n}"
    ).websocket
    assert (ws.handshake_timeout_s, ws.ping_interval_s, ws.advertise) == (
        2.0,
        0.5,
        "ws.example.com:443",
    )
    assert (ws.user_cookie, ws.pass_cookie, ws.token_cookie) == ("u", "p", "t")


def test_jwt_cookie_needs_trusted_operators_as_in_nats_server() -> None:
    with pytest.raises(
        ConfigError,
        match=r"^trusted operators or trusted keys configuration is required for JWT "
        r'authentication via cookie "jwt"$',
    ):
        _settings("websocket { port: 8080, no_tls: true, jwt_cookie: jwt }")


def test_jwt_cookie_is_taken_in_operator_mode() -> None:
    operator = operator_key()
    ws = _settings(
        f"operator: {operator_jwt(operator)}\nresolver: MEMORY\n"
        "websocket { port: 8080, no_tls: true, jwt_cookie: my_jwt }"
    ).websocket
    assert ws.jwt_cookie == "my_jwt"


def test_advertise_port_must_be_a_number() -> None:
    with pytest.raises(ConfigError, match=r'parsing "x": invalid syntax$'):
        _settings('websocket { port: 8080, no_tls: true, advertise: "host:x" }')


def test_unknown_key_named_with_its_line() -> None:
    with pytest.raises(ConfigError, match=r"unknown configuration key 'websocket.prot' \(line 3\)"):
        _settings("websocket {\n  no_tls: true\n  prot: 1\n}")


@pytest.mark.parametrize(
    ("origin", "message"),
    [
        ("app.example.com", "allowed origins must be absolute URLs with http or https scheme"),
        ("ftp://app.example.com", "allowed origins must be absolute URLs with http or https"),
        ("http://", "host is required"),
    ],
)
def test_bad_allowed_origins_refused(origin: str, message: str) -> None:
    with pytest.raises(ConfigError, match=f"unable to parse allowed origin '{origin}': {message}"):
        _settings(f'websocket {{ port: 1, no_tls: true, allowed_origins: ["{origin}"] }}')


def test_listener_credentials_conflict_with_users_as_in_nats_server() -> None:
    users = "authorization { users: [ { user: a, password: b } ] }\n"
    with pytest.raises(ConfigError, match="websocket authentication username not compatible"):
        _settings(users + "websocket { port: 1, no_tls: true, authorization { user: u, pass: p } }")
    with pytest.raises(ConfigError, match="websocket authentication token not compatible"):
        _settings(users + "websocket { port: 1, no_tls: true, authorization { token: t } }")
    with pytest.raises(ConfigError, match="user and password must be given together"):
        _settings("websocket { port: 1, no_tls: true, authorization { user: u } }")


def test_sample_config_shows_the_block() -> None:
    sample = Path(__file__).resolve().parents[2] / "docs" / "examples" / "brook.conf"
    ws = load_conf_file(str(sample)).websocket
    assert (ws.port, ws.no_tls, ws.compression) == (8080, True, True)
    assert ws.allowed_origins == ["https://app.example.com"]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("Connection", 'websocket: invalid header "connection" not allowed'),
        ("nats-no-masking", 'websocket: invalid header "nats-no-masking" not allowed'),
        ("Sec-WebSocket-Protocol", '"Sec-WebSocket-" prefix not allowed'),
    ],
)
def test_headers_that_would_break_the_upgrade_refused(name: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _settings(f'websocket {{ port: 1, no_tls: true, headers {{ "{name}": "x" }} }}')
