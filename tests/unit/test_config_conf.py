"""nats-server config format: syntax (`parse_conf`) and translation (`settings_from_conf`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brook import limits
from brook.config.conf import (
    load_conf_file,
    parse_conf,
    parse_size,
    settings_from_conf,
)
from brook.config.settings import ConfigError, NkeyUser, Settings, User

SAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "brook.conf"


def conf(text: str) -> Settings:
    return settings_from_conf(parse_conf(text))


# ---- syntax ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["port = 4222", "port: 4222", "port 4222", "port=4222", "port:4222"]
)
def test_key_value_separators(text: str) -> None:
    assert parse_conf(text) == {"port": 4222}


@pytest.mark.parametrize(
    "text",
    [
        "auth { a: 1 }",
        "auth = { a: 1 }",
        "auth: { a: 1 }",
        "auth{a:1}",
        "auth {\n  a: 1\n}",
        "auth {\n  a: 1;\n}",
        "auth\t{ a = 1, }",
        "auth\n{\n  a: 1\n}",
        "auth # comment\n\n{ a: 1 }",
    ],
)
def test_block_forms(text: str) -> None:
    assert parse_conf(text) == {"auth": {"a": 1}}


def test_nested_blocks_and_mixed_separators() -> None:
    text = "a { b { c: 1, d = 2; e 3\n f: {} } }"
    assert parse_conf(text) == {"a": {"b": {"c": 1, "d": 2, "e": 3, "f": {}}}}


@pytest.mark.parametrize(
    "text",
    [
        "x = [1, 2, 3]",
        "x: [1,2,3]",
        "x [\n  1\n  2\n  3\n]",
        "x = [\n  1,\n  2,\n  3,\n]",
        "x = [ 1, # one\n 2 // two\n 3 ]",
    ],
)
def test_array_forms(text: str) -> None:
    assert parse_conf(text) == {"x": [1, 2, 3]}


def test_arrays_hold_any_value() -> None:
    text = "x = [a, \"b c\", 'd', [1, 2], {k: v}, true, 1.5, []]"
    assert parse_conf(text) == {"x": ["a", "b c", "d", [1, 2], {"k": "v"}, True, 1.5, []]}


def test_comments_everywhere() -> None:
    text = """
    # hash comment
    // slash comment
    a: 1 # after a value
    b: 2 // after a value
    c {  # after a brace
      # inside a block
      d: 3
    }
    url: http://example.com/x   # '//' inside a bare string is not a comment
    tag: a#b                    # nor is '#' inside one
    """
    assert parse_conf(text) == {
        "a": 1,
        "b": 2,
        "c": {"d": 3},
        "url": "http://example.com/x",
        "tag": "a#b",
    }


def test_strings() -> None:
    text = r"""
    dq: "a \"quoted\" \\ tab\there\nnext \x41\xc3\xa9 # not a comment"
    sq: 'raw \n $NOT_A_VAR "x"'
    bare: hello-world.example
    ip: 127.0.0.1:4222
    empty: ""
    """
    assert parse_conf(text) == {
        "dq": 'a "quoted" \\ tab\there\nnext Aé # not a comment',
        "sq": 'raw \\n $NOT_A_VAR "x"',
        "bare": "hello-world.example",
        "ip": "127.0.0.1:4222",
        "empty": "",
    }


def test_block_string() -> None:
    text = "motd (\nline one\n  line two)\n)\nnext: 1\n"
    assert parse_conf(text) == {"motd": "\nline one\n  line two)", "next": 1}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0", 0),
        ("42", 42),
        ("-7", -7),
        ("1.5", 1.5),
        ("-0.25", -0.25),
        ("1k", 1000),
        ("1K", 1000),
        ("64KB", 64 * 1024),
        ("64kb", 64 * 1024),
        ("2Ki", 2048),
        ("2KiB", 2048),
        ("8M", 8_000_000),
        ("1MB", 1024**2),
        ("1MiB", 1024**2),
        ("1mib", 1024**2),
        ("1G", 1000**3),
        ("1GB", 1024**3),
        ("1GiB", 1024**3),
        ("2T", 2 * 1000**4),
        ("1TB", 1024**4),
        ("-1MB", -(1024**2)),
    ],
)
def test_numbers_and_sizes(value: str, expected: float) -> None:
    assert parse_conf(f"v: {value}")["v"] == expected


@given(st.integers(min_value=-(10**12), max_value=10**12), st.sampled_from(["", "k", "KB", "MiB"]))
def test_any_integer_with_suffix(n: int, suffix: str) -> None:
    assert parse_conf(f"v = {n}{suffix}\n")["v"] == n * parse_size(f"1{suffix}")


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("true", True),
        ("TRUE", True),
        ("yes", True),
        ("On", True),
        ("false", False),
        ("no", False),
        ("OFF", False),
    ],
)
def test_booleans(word: str, expected: bool) -> None:
    assert parse_conf(f"b: {word}") == {"b": expected}


def test_quoted_booleans_and_non_ascii_digits_stay_strings() -> None:
    assert parse_conf('b: "true"\nn: "42"\nu: \u0664\u0662') == {
        "b": "true",
        "n": "42",
        "u": "\u0664\u0662",
    }


def test_keys_are_lower_cased_and_may_be_quoted() -> None:
    text = "Port: 1\nSERVER_NAME: x\n\"Quoted Key\": 2\n'single': 3\nAuth { TOKEN: t }"
    assert parse_conf(text) == {
        "port": 1,
        "server_name": "x",
        "quoted key": 2,
        "single": 3,
        "auth": {"token": "t"},
    }


def test_later_key_overrides_earlier() -> None:
    assert parse_conf("port: 1\nPORT: 2") == {"port": 2}


def test_top_level_separators_and_braced_file() -> None:
    assert parse_conf("a: 1; b: 2, c: 3") == {"a": 1, "b": 2, "c": 3}
    json_like = '{\n  "port": 4222,\n  "debug": true,\n  "jetstream": {"store_dir": "/tmp/js"}\n}\n'
    assert parse_conf(json_like) == {
        "port": 4222,
        "debug": True,
        "jetstream": {"store_dir": "/tmp/js"},
    }


def test_empty_and_comment_only_texts() -> None:
    assert parse_conf("") == {}
    assert parse_conf("\n  # nothing\n// here\n") == {}
    assert parse_conf("\ufeffport: 1\r\nhost: h\r\n") == {"port": 1, "host": "h"}


# ---- variables ------------------------------------------------------------------------------


def test_variable_from_earlier_top_level_key() -> None:
    data = parse_conf("PASS: 'secret'\nauthorization { user: u, password: $PASS }")
    assert data["authorization"] == {"user": "u", "password": "secret"}


def test_variable_block_scoping_prefers_innermost() -> None:
    data = parse_conf("v: outer\nb { v: inner, x: $v }\ny: $v")
    assert data == {"v": "outer", "b": {"v": "inner", "x": "inner"}, "y": "outer"}


def test_variable_keeps_its_type_and_works_in_arrays() -> None:
    data = parse_conf("n: 1MB\nblock { a: 1 }\nx: [$n, $block]")
    assert data["x"] == [1024**2, {"a": 1}]


def test_variable_from_environment_is_parsed_as_a_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BROOK_TEST_PORT", "4333")
    monkeypatch.setenv("BROOK_TEST_NAME", "my server")
    monkeypatch.setenv("BROOK_TEST_FLAG", "yes")
    data = parse_conf("port: $BROOK_TEST_PORT\nname: $BROOK_TEST_NAME\nf: $BROOK_TEST_FLAG")
    assert data == {"port": 4333, "name": "my server", "f": True}


def test_key_shadows_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BROOK_TEST_V", "from-env")
    assert parse_conf("BROOK_TEST_V: from-conf\nx: $BROOK_TEST_V")["x"] == "from-conf"


def test_environment_variable_referring_to_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BROOK_TEST_LOOP", "$BROOK_TEST_LOOP")
    with pytest.raises(ConfigError, match=r"^<config>:2:4: .*BROOK_TEST_LOOP refers to itself"):
        parse_conf("a: 1\nx: $BROOK_TEST_LOOP")


def test_missing_variable_names_line_and_column(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BROOK_TEST_MISSING", raising=False)
    with pytest.raises(
        ConfigError, match=r"^<config>:3:10: Parse error: variable \$BROOK_TEST_MISSING"
    ):
        parse_conf("a: 1\nb {\n  token: $BROOK_TEST_MISSING\n}")


def test_variables_are_case_sensitive_like_nats_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("secret", raising=False)
    with pytest.raises(ConfigError, match=r"variable \$secret"):
        parse_conf("SECRET: x\ny: $secret")


def test_bcrypt_hash_is_not_a_variable() -> None:
    digest = "$2a$11$W2zko751KUvVy59mUTWmpOdWjpEm5qhcCZRd05GjI/sSOT.xtiHyG"
    assert parse_conf(f"password: {digest}") == {"password": digest}


# ---- includes -------------------------------------------------------------------------------


def test_include_is_relative_to_the_including_file(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "auth.conf").write_text("token: t\ninclude 'more.conf'\n")
    (tmp_path / "sub" / "more.conf").write_text("timeout: 5\n")
    (tmp_path / "limits.conf").write_text("max_payload: 2MB\nport: 1\n")
    main = tmp_path / "main.conf"
    main.write_text('port: 9\ninclude "limits.conf"\nauthorization {\n  include sub/auth.conf\n}\n')
    data = parse_conf(main.read_text(), path=str(main))
    assert data == {
        "port": 1,
        "max_payload": 2 * 1024**2,
        "authorization": {"token": "t", "timeout": 5},
    }


def test_included_keys_can_be_used_as_variables(tmp_path: Path) -> None:
    (tmp_path / "vars.conf").write_text("SECRET: s3\n")
    main = tmp_path / "main.conf"
    main.write_text("include vars.conf\nauthorization { token: $SECRET }\n")
    settings = load_conf_file(str(main))
    assert settings.auth.token == "s3"


def test_include_errors(tmp_path: Path) -> None:
    main = tmp_path / "main.conf"
    with pytest.raises(ConfigError, match=r"main.conf:2:9: Parse error: cannot read include 'nope"):
        parse_conf("a: 1\ninclude nope.conf\n", path=str(main))
    (tmp_path / "loop.conf").write_text("include main.conf\n")
    main.write_text("include loop.conf\n")
    with pytest.raises(ConfigError, match="include cycle"):
        load_conf_file(str(main))
    with pytest.raises(ConfigError, match=r"^<config>:1:9: Parse error: cannot include 'x.conf'"):
        parse_conf("include x.conf")
    (tmp_path / "bad.conf").write_text("a: 1\nb: [1\n")
    with pytest.raises(ConfigError, match=r"bad.conf:3:1: Parse error: expected '\]' to close"):
        parse_conf("include bad.conf", path=str(main))


def test_include_as_a_quoted_key_is_an_ordinary_key() -> None:
    assert parse_conf('"include": 1\ninclude = 2') == {"include": 2}


# ---- syntax errors --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "where", "expected"),
    [
        ("port:\n", "1:6", "expected a value for 'port', found a new line"),
        ("port =", "1:7", "expected a value for 'port', found end of file"),
        ("debug\nport: 1", "1:6", "expected a value for 'debug', found a new line"),
        ("a: 1 2", "1:6", "expected a new line, ',' or ';' after the value of 'a', found '2'"),
        ("a {\n b: 1\n", "3:1", "expected '}' to close the block opened on line 1"),
        ("a: [1, 2\n", "2:1", "expected ']' to close the array opened on line 1"),
        ("a: [1 2]", "1:7", "expected ',' or ']' after an array value, found '2'"),
        ("a: [,]", "1:5", "expected an array value, found ','"),
        ('a: "open\n', "1:4", 'unterminated string: expected a closing "'),
        ("a: 'open", "1:4", "unterminated string: expected a closing '"),
        ('a: "\\q"', "1:5", "invalid escape: expected \\t, \\n"),
        ("= 1", "1:1", "expected a key, found '='"),
        ("x: 1\n}", "2:1", "expected a key, found '}'"),
        ("a: (\nno end", "1:4", "expected ')' alone on a line"),
        ("{ a: 1 } b", "1:10", "expected end of file after the closing '}', found 'b'"),
        ("a: 1\n  b: [1, }", "2:10", "expected a value, found '}'"),
    ],
)
def test_syntax_errors_name_position_and_expectation(text: str, where: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_conf(text, path="x.conf")
    assert str(info.value).startswith(f"x.conf:{where}: Parse error: {expected}")


# ---- translation into Settings --------------------------------------------------------------


def test_defaults_come_from_settings() -> None:
    assert conf("") == Settings()


@pytest.mark.parametrize(
    ("text", "host", "port"),
    [
        ("listen: 127.0.0.1:4333", "127.0.0.1", 4333),
        ("listen: '0.0.0.0:5000'", "0.0.0.0", 5000),
        ("listen: localhost:4333", "localhost", 4333),
        ('listen: ":4333"', limits.DEFAULT_HOST, 4333),
        ('listen: "4333"', limits.DEFAULT_HOST, 4333),
        ("listen: 4333", limits.DEFAULT_HOST, 4333),
        ('listen: "[::1]:4333"', "::1", 4333),
        ("host: 10.0.0.1\nport: 1234", "10.0.0.1", 1234),
        ("net: example.org", "example.org", limits.DEFAULT_PORT),
        ("port: -1", limits.DEFAULT_HOST, -1),  # nats-server's RANDOM_PORT
        ('listen: "127.0.0.1:-1"', "127.0.0.1", -1),
    ],
)
def test_listen_host_port(text: str, host: str, port: int) -> None:
    s = conf(text)
    assert (s.host, s.port) == (host, port)


def test_random_monitoring_port_and_ports_file_dir() -> None:
    s = conf('http: "127.0.0.1:-1"\nports_file_dir: "/tmp/ports"')  # as nats.js writes
    assert (s.http_host, s.http_port, s.ports_file_dir) == ("127.0.0.1", -1, "/tmp/ports")


@pytest.mark.parametrize(
    ("text", "http_host", "http_port"),
    [
        ("http_port: 8222", None, 8222),
        ("monitor_port: 8223", None, 8223),
        ("http: 127.0.0.1:8224", "127.0.0.1", 8224),
        ('http: ":8225"', None, 8225),
        ("http: 8226", None, 8226),
    ],
)
def test_monitoring_address(text: str, http_host: str | None, http_port: int) -> None:
    s = conf(text)
    assert (s.http_host, s.http_port) == (http_host, http_port)


@pytest.mark.parametrize(
    ("text", "attr", "expected"),
    [
        ("server_name: alpha", "server_name", "alpha"),
        ("max_payload: 2MB", "max_payload_bytes", 2 * 1024**2),
        ("max_payload: '512KB'", "max_payload_bytes", 512 * 1024),
        ("max_payload: 65536", "max_payload_bytes", 65536),
        ("max_control_line: 8KB", "max_control_line_bytes", 8192),
        ("max_connections: 100", "max_connections", 100),
        ("max_conn: 101", "max_connections", 101),
        ("max_subscriptions: 10", "max_subscriptions", 10),
        ("max_subs: 11", "max_subscriptions", 11),
        ("max_pending: 128MB", "max_pending_bytes", 128 * 1024**2),
        ("write_deadline: 3", "write_deadline_s", 3.0),
        ("write_deadline: 2.5", "write_deadline_s", 2.5),
        ('write_deadline: "2s"', "write_deadline_s", 2.0),
        ("write_deadline: 500ms", "write_deadline_s", 0.5),
        ('ping_interval: "1m"', "ping_interval_s", 60.0),
        ("ping_interval: 2m", "ping_interval_s", 120.0),  # two minutes, not 2e6 seconds
        ("ping_interval: 1h", "ping_interval_s", 3600.0),
        ("ping_interval: 1m30s", "ping_interval_s", 90.0),
        ("ping_max: 5", "max_pings_out", 5),
        ("debug: true", "debug", True),
        ("trace: on", "trace", True),
    ],
)
def test_key_mapping(text: str, attr: str, expected: object) -> None:
    assert getattr(conf(text), attr) == expected


def test_authorization_token_and_timeout() -> None:
    s = conf("authorization { token: 'abc', timeout: 3 }")
    assert s.auth.token == "abc"
    assert s.auth.users == []
    assert s.auth_timeout_s == 3.0
    assert conf("authorization { token: t, timeout: 0.5 }").auth_timeout_s == 0.5


@pytest.mark.parametrize(
    "text",
    [
        "authorization { user: alice, password: pw }",
        "authorization { username: alice, pass: pw }",
        "authorization { users = [ {user: alice, password: pw} ] }",
        "authorization { users [\n {username: alice\n pass: pw}\n] }",
    ],
)
def test_authorization_users(text: str) -> None:
    s = conf(text)
    assert s.auth.users == [User("alice", "pw")]
    assert s.auth.token is None


NKEY = "UCK5N7N66OBOINFXAYC2ACJQYFSOD4VYNU6APEJTAVFZB2SVHLKGEW7L"  # nats-py's test user


@pytest.mark.parametrize("order", ["before", "after"])
def test_users_mix_passwords_and_nkeys_and_no_auth_user_stays(order: str) -> None:
    block = f"authorization {{ users: [{{user: a, password: b}}, {{nkey: {NKEY}}}] }}"
    text = f"no_auth_user: a\n{block}" if order == "before" else f"{block}\nno_auth_user: a"
    s = conf(text)
    assert s.auth.users == [User("a", "b")]
    assert s.auth.nkeys == [NkeyUser(NKEY)]
    assert s.auth.no_auth_user == "a"


def test_authorization_block_replaces_base_auth() -> None:
    base = conf("authorization { token: old }")
    s = settings_from_conf(parse_conf("authorization { user: a, password: b }"), base)
    assert (s.auth.token, s.auth.users) == (None, [User("a", "b")])
    assert base.auth.token == "old"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("authorization { user: a }", "authorization: user and password must be given together"),
        ("authorization { password: a }", "authorization: user and password must be given"),
        (
            "authorization { user: a, password: b, users: [{user: c, password: d}] }",
            "authorization: user/password and users cannot both be set",
        ),
        (
            "authorization { token: t, users: [{user: c, password: d}] }",
            "authorization: token and users cannot both be set",
        ),
        (
            "authorization { users: [{user: a, password: b}, {user: a, password: c}] }",
            "authorization.users: user 'a' is defined twice",
        ),
        (
            f"authorization {{ users: [{{nkey: {NKEY}}}, {{nkey: {NKEY}}}] }}",
            f"authorization.users: nkey '{NKEY}' is defined twice",
        ),
        (
            f"authorization {{ users: [{{nkey: {NKEY}, password: x}}] }}",
            "authorization.users[0]: Nkey users do not take usernames or passwords",
        ),
        (
            f"authorization {{ token: t, users: [{{nkey: {NKEY}}}] }}",
            "authorization: token and users cannot both be set",
        ),
        (
            "authorization { users: [{user: a, password: b}, {user: c, password: d, x: 1}] }",
            "unknown configuration key 'authorization.users[1].x'",
        ),
        (
            "authorization { users: {user: a} }",
            "authorization.users: expected an array of {user, password} or {nkey} blocks, "
            "got a block",
        ),
        (
            "authorization { users: [alice] }",
            "authorization.users[0]: expected a block { ... }, got string 'alice'",
        ),
        ("authorization { foo: 1 }", "unknown configuration key 'authorization.foo'"),
        ("authorization { token: 1234 }", "authorization.token: expected a string, got integer"),
        ("authorization: true", "authorization: expected a block { ... }, got boolean True"),
        ("authorization { timeout: soon }", "authorization.timeout: expected a duration"),
    ],
)
def test_authorization_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        conf(text)


@pytest.mark.parametrize(
    ("text", "enabled"),
    [
        ("jetstream: true", True),
        ("jetstream: false", False),
        ("jetstream: enabled", True),
        ('jetstream: "Enabled"', True),
        ("jetstream: disabled", False),
        ("jetstream: enable", True),
        ("jetstream {}", True),
        ("jetstream { enabled: false }", False),
        ("jetstream { enable: true }", True),
    ],
)
def test_jetstream_switch(text: str, enabled: bool) -> None:
    assert conf(text).jetstream.enabled is enabled


@pytest.mark.parametrize(
    "text",
    [
        "jetstream { store_dir: '/data/js', max_memory_store: 1GB, max_file_store: 10GB }",
        "jetstream { store: /data/js, max_mem: 1GB, max_file: 10GB }",
        "jetstream { storedir: /data/js\n max_mem_store: 1073741824\n max_file_store: '10GB' }",
    ],
)
def test_jetstream_block(text: str) -> None:
    js = conf(text).jetstream
    assert js.enabled is True
    assert js.store_dir == "/data/js"
    assert js.max_memory_store_bytes == 1024**3
    assert js.max_file_store_bytes == 10 * 1024**3


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("jetstream: maybe", "jetstream: expected a boolean, 'enabled', 'disabled' or a block"),
        ("jetstream: 1", "jetstream: expected a boolean"),
        ("jetstream { foo: 1 }", "unknown configuration key 'jetstream.foo'"),
        ("jetstream { enabled: 'yes' }", "jetstream.enabled: expected a boolean"),
        ("jetstream { max_file_store: lots }", "jetstream.max_file_store: expected a size"),
    ],
)
def test_jetstream_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        conf(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("foo: 1", "unknown configuration key 'foo'"),
        ("logtimes: true", "unknown configuration key 'logtimes'"),
        ("UNUSED: 1", "unknown configuration key 'unused'"),
        ("port: abc", "port: expected an integer, got string 'abc'"),
        ("port: 1.5", "port: expected an integer, got number 1.5"),
        ("port: true", "port: expected an integer, got boolean True"),
        ("server_name: 42", "server_name: expected a string, got integer 42"),
        ("debug: 1", "debug: expected a boolean (true or false), got integer 1"),
        ("debug: 'true'", "debug: expected a boolean (true or false), got string 'true'"),
        ("max_payload: [1]", "max_payload: expected a size (bytes, or like 64KB, 1MB, 1G), got an"),
        ("max_payload: 1.5MB", "max_payload: expected a size"),
        ("write_deadline: 'soon'", "write_deadline: expected a duration"),
        ("ping_interval: 1k", "ping_interval: expected a duration"),
        ("listen: localhost", "listen: expected 'host:port', ':port' or a port number"),
        ("http: {}", "http: expected 'host:port', ':port' or a port number, got a block"),
    ],
)
def test_unknown_keys_and_type_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        conf(text)


def test_keys_used_only_as_variables_are_not_unknown() -> None:
    assert conf("MY_TOKEN: t\nauthorization { token: $MY_TOKEN }").auth.token == "t"
    assert conf("authorization { T: t\n token: $T }").auth.token == "t"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("port: 70000", "port: 70000 is not a TCP port"),
        ("listen: ':-2'", "port: -2 is not a TCP port"),
        ("listen: ':x'", "listen: expected 'host:port'"),
        ("http_port: 99999", "http_port: 99999 is not a TCP port"),
        ("max_payload: 128MB", "max_payload: 134217728 must be between 1 and"),
        ("max_payload: 2MB\nmax_pending: 1MB", "max_payload: 2097152 cannot exceed max_pending"),
        ("max_control_line: 100", "max_control_line: 100 is below 256"),
        ("max_connections: 0", "max_connections: must be positive"),
        ("ping_max: 0", "max_pings_out: must be positive"),
        ("ping_interval: 0", "ping_interval: must be a positive duration"),
    ],
)
def test_validation_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        conf(text)


def test_base_settings_are_copied_not_changed() -> None:
    base = Settings(port=5000, debug=True)
    s = settings_from_conf(parse_conf("jetstream: true\nserver_name: b"), base)
    assert (s.port, s.debug, s.server_name, s.jetstream.enabled) == (5000, True, "b", True)
    assert base.jetstream.enabled is False
    assert base.server_name is None


def test_plain_dicts_are_accepted() -> None:
    s = settings_from_conf({"PORT": 1, "authorization": {"Token": "x"}})
    assert (s.port, s.auth.token) == (1, "x")


# ---- files ----------------------------------------------------------------------------------


def test_load_conf_file(tmp_path: Path) -> None:
    path = tmp_path / "brook.conf"
    path.write_text("port: 4333\njetstream { store_dir: js }\n")
    s = load_conf_file(str(path))
    assert s.port == 4333
    assert s.jetstream.store_dir == "js"
    assert load_conf_file(str(path), Settings(debug=True)).debug is True


def test_load_conf_file_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "brook.conf"
    with pytest.raises(ConfigError, match=r"brook.conf: cannot read config file"):
        load_conf_file(str(path))
    path.write_text("port: 1\nbogus: 2\n")
    with pytest.raises(ConfigError, match=r"brook.conf: unknown configuration key 'bogus'"):
        load_conf_file(str(path))
    path.write_text("port: 1\nport = \n")
    with pytest.raises(ConfigError, match=r"brook.conf:2:8: Parse error: expected a value for"):
        load_conf_file(str(path))


def test_sample_config_loads() -> None:
    s = load_conf_file(str(SAMPLE))
    assert (s.host, s.port, s.http_port) == ("127.0.0.1", 4222, 8222)
    assert s.server_name == "brook-example"
    assert s.max_payload_bytes == 1024**2
    assert s.max_control_line_bytes == 4096
    assert s.max_pending_bytes == 64 * 1024**2
    assert (s.write_deadline_s, s.ping_interval_s, s.max_pings_out) == (10.0, 120.0, 2)
    assert s.auth.users == [User("app", "s3cret"), User("admin", "change-me")]
    assert [n.nkey[0] for n in s.auth.nkeys] == ["U"]
    assert s.client_auth_timeout_s == 2.0
    assert s.jetstream.enabled is True
    assert s.jetstream.store_dir == "./data/jetstream"
    assert (s.jetstream.max_memory_store_bytes, s.jetstream.max_file_store_bytes) == (
        1024**3,
        10 * 1024**3,
    )
    assert (s.debug, s.trace) == (False, False)
    # Brook's own jetstream keys are commented out (nats-server refuses them):
    # tests/unit/test_example_conf.py loads them uncommented.


@pytest.mark.parametrize(("text", "size"), [("0", 0), ("1MB", 1024**2), ("512", 512)])
def test_free_space_reserve(tmp_path: Path, text: str, size: int) -> None:
    path = tmp_path / "c.conf"
    path.write_text(f"jetstream {{ free_space_reserve: {text} }}\n")
    assert load_conf_file(str(path)).jetstream.free_space_reserve_bytes == size
    assert Settings().jetstream.free_space_reserve_bytes == -1  # derived from the filesystem


def test_free_space_reserve_is_a_size(tmp_path: Path) -> None:
    path = tmp_path / "c.conf"
    path.write_text("jetstream { free_space_reserve: lots }\n")
    with pytest.raises(ConfigError, match="free_space_reserve"):
        load_conf_file(str(path))


@pytest.mark.parametrize(("text", "seconds"), [("2s", 2.0), ("0", 0.0), ("250ms", 0.25)])
def test_consumer_flush_interval(tmp_path: Path, text: str, seconds: float) -> None:
    path = tmp_path / "c.conf"
    path.write_text(f"jetstream {{ consumer_flush_interval: {text} }}\n")
    assert load_conf_file(str(path)).jetstream.consumer_flush_interval_s == seconds


def test_consumer_flush_interval_is_bounded(tmp_path: Path) -> None:
    path = tmp_path / "c.conf"
    path.write_text("jetstream { consumer_flush_interval: 2m }\n")
    with pytest.raises(ConfigError, match="consumer_flush_interval: must be 0 to 60 seconds"):
        load_conf_file(str(path))


def test_restore_limits(tmp_path: Path) -> None:
    path = tmp_path / "c.conf"
    path.write_text("jetstream { restore_max_bytes: 1MB, restore_idle_timeout: 30s }\n")
    js = load_conf_file(str(path)).jetstream
    assert (js.restore_max_bytes, js.restore_idle_timeout_s) == (1024**2, 30.0)
    path.write_text("jetstream { restore_max_bytes: -1 }\n")
    assert load_conf_file(str(path)).jetstream.restore_max_bytes == -1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("restore_max_bytes: 0", "restore_max_bytes: must be positive, or -1"),
        ("restore_idle_timeout: 0s", "restore_idle_timeout: must be above 0"),
        ("restore_idle_timeout: 2h", "restore_idle_timeout: must be above 0, at most 1 hour"),
    ],
)
def test_restore_limits_are_bounded(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "c.conf"
    path.write_text(f"jetstream {{ {text} }}\n")
    with pytest.raises(ConfigError, match=message):
        load_conf_file(str(path))


# ---- helpers shared with the flags --------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1024", 1024), ("1k", 1000), ("1KB", 1024), ("1MiB", 1024**2), (" 8M ", 8_000_000)],
)
def test_parse_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "MB", "1XB", "1.5MB", "lots"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="not a size"):
        parse_size(text)


def test_max_acks_awaiting_sync(tmp_path: Path) -> None:
    path = tmp_path / "c.conf"
    assert Settings().jetstream.max_acks_awaiting_sync == 65536
    path.write_text("jetstream { max_acks_awaiting_sync: 1000 }\n")
    assert load_conf_file(str(path)).jetstream.max_acks_awaiting_sync == 1000
    path.write_text("jetstream { max_acks_awaiting_sync: 0 }\n")  # no bound
    assert load_conf_file(str(path)).jetstream.max_acks_awaiting_sync == 0
    path.write_text("jetstream { max_acks_awaiting_sync: -5 }\n")
    with pytest.raises(ConfigError, match="max_acks_awaiting_sync: must be 0"):
        load_conf_file(str(path))


def test_index_snapshot_interval(tmp_path: Path) -> None:
    path = tmp_path / "c.conf"
    assert Settings().jetstream.index_snapshot_interval_s == 120.0
    path.write_text("jetstream { index_snapshot_interval: 30s }\n")
    assert load_conf_file(str(path)).jetstream.index_snapshot_interval_s == 30.0
    path.write_text("jetstream { index_snapshot_interval: 0 }\n")  # off
    assert load_conf_file(str(path)).jetstream.index_snapshot_interval_s == 0.0
    path.write_text("jetstream { index_snapshot_interval: 48h }\n")
    with pytest.raises(ConfigError, match="index_snapshot_interval: must be 0"):
        load_conf_file(str(path))
