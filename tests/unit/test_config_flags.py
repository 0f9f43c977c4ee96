"""`brook serve` arguments: Brook's own options, nats-server aliases, config precedence."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from brook.config.flags import (
    ArgumentError,
    HelpRequested,
    VersionRequested,
    help_text,
    parse_serve_args,
)
from brook.config.settings import ConfigError, Settings, User


def attr(settings: Settings, name: str) -> object:
    owner, _, field = name.rpartition(".")
    return getattr(getattr(settings, owner) if owner else settings, field)


@pytest.mark.parametrize(
    ("argv", "name", "expected"),
    [
        # every spelling Go's flag package allows for nats-server's -p
        (["-p", "4333"], "port", 4333),
        (["--p", "4333"], "port", 4333),
        (["-p=4333"], "port", 4333),
        (["--p=4333"], "port", 4333),
        (["-port", "4333"], "port", 4333),
        (["-port=4333"], "port", 4333),
        (["--port", "4333"], "port", 4333),
        (["--port=4333"], "port", 4333),
        (["--host", "10.0.0.1"], "host", "10.0.0.1"),
        (["-a", "10.0.0.2"], "host", "10.0.0.2"),
        (["--addr", "10.0.0.3"], "host", "10.0.0.3"),
        (["-addr=10.0.0.4"], "host", "10.0.0.4"),
        (["--net", "10.0.0.5"], "host", "10.0.0.5"),
        (["-net", "10.0.0.6"], "host", "10.0.0.6"),
        (["--http-port", "8222"], "http_port", 8222),
        (["-m", "8223"], "http_port", 8223),
        (["-m=8224"], "http_port", 8224),
        (["--http_port", "8225"], "http_port", 8225),
        (["-http_port=8226"], "http_port", 8226),
        (["--server-name", "a"], "server_name", "a"),
        (["-n", "b"], "server_name", "b"),
        (["--name", "c"], "server_name", "c"),
        (["--server_name=d"], "server_name", "d"),
        (["-server_name", "e"], "server_name", "e"),
        (["--jetstream"], "jetstream.enabled", True),
        (["-js"], "jetstream.enabled", True),
        (["--js"], "jetstream.enabled", True),
        (["-js=true"], "jetstream.enabled", True),
        (["-js=false"], "jetstream.enabled", False),
        (["--jetstream=0"], "jetstream.enabled", False),
        (["-js=TRUE"], "jetstream.enabled", True),
        (["--store-dir", "/d1"], "jetstream.store_dir", "/d1"),
        (["-sd", "/d2"], "jetstream.store_dir", "/d2"),
        (["-sd=/d3"], "jetstream.store_dir", "/d3"),
        (["--sd=/d4"], "jetstream.store_dir", "/d4"),
        (["--store_dir", "/d5"], "jetstream.store_dir", "/d5"),
        (["-store_dir=/d6"], "jetstream.store_dir", "/d6"),
        (["--store-dir=/with=equals"], "jetstream.store_dir", "/with=equals"),
        (["--debug"], "debug", True),
        (["-D"], "debug", True),
        (["--D"], "debug", True),
        (["-D=false"], "debug", False),
        (["--trace"], "trace", True),
        (["-V"], "trace", True),
        (["--V=true"], "trace", True),
        (["--max-payload", "2MB"], "max_payload_bytes", 2 * 1024**2),
        (["--max-payload", "512KB"], "max_payload_bytes", 512 * 1024),
        (["--max-payload=65536"], "max_payload_bytes", 65536),
        (["-max-payload", "1M"], "max_payload_bytes", 1_000_000),
        (["--max-control-line", "8KB"], "max_control_line_bytes", 8192),
        (["--max-control-line", "1024"], "max_control_line_bytes", 1024),
        (["--max-connections", "10"], "max_connections", 10),
        (["--max-subscriptions", "20"], "max_subscriptions", 20),
        (["--max-pending", "128MiB"], "max_pending_bytes", 128 * 1024**2),
        (["--ping-interval", "30s"], "ping_interval_s", 30.0),
        (["--ping-interval", "2m"], "ping_interval_s", 120.0),
        (["--ping-interval", "45"], "ping_interval_s", 45.0),
        (["--max-pings-out", "4"], "max_pings_out", 4),
        (["--auth-timeout", "500ms"], "auth_timeout_s", 0.5),
        (["--auth-timeout=1.5"], "auth_timeout_s", 1.5),
        (["--write-deadline", "1m30s"], "write_deadline_s", 90.0),
        (["--auth", "t0k"], "auth.token", "t0k"),
        (["-auth=t0k"], "auth.token", "t0k"),
    ],
)
def test_flag_spellings(argv: list[str], name: str, expected: object) -> None:
    assert attr(parse_serve_args(argv), name) == expected


def test_no_arguments_give_the_defaults() -> None:
    assert parse_serve_args([]) == Settings()


@pytest.mark.parametrize("argv", [["-DV"], ["--DV"], ["-DV=true"], ["-D", "-V"]])
def test_debug_and_trace_together(argv: list[str]) -> None:
    s = parse_serve_args(argv)
    assert (s.debug, s.trace) == (True, True)


def test_dv_false_turns_both_off_and_order_matters() -> None:
    s = parse_serve_args(["-DV", "-DV=false", "-V"])
    assert (s.debug, s.trace) == (False, True)


def test_later_flag_wins() -> None:
    assert parse_serve_args(["-p", "1", "--port=2", "-port", "3"]).port == 3


@pytest.mark.parametrize(
    "argv",
    [
        ["--user", "alice", "--pass", "pw"],
        ["-user=alice", "-pass=pw"],
        ["--pass", "pw", "--user", "alice"],
    ],
)
def test_user_and_password(argv: list[str]) -> None:
    s = parse_serve_args(argv)
    assert s.auth.users == [User("alice", "pw")]
    assert s.auth.token is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--user", "alice"], "flag '--user' needs --pass as well"),
        (["-pass=pw"], "flag '-pass' needs --user as well"),
        (["--auth", "t", "--user", "a", "--pass", "b"], "token and users cannot both be set"),
    ],
)
def test_auth_flag_errors(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_serve_args(argv)


def test_random_ports_ports_file_dir_and_version() -> None:
    s = parse_serve_args(["-p", "-1", "-m", "-1", "--ports_file_dir", "/tmp/p"])
    assert (s.port, s.http_port, s.ports_file_dir) == (-1, -1, "/tmp/p")
    for argv in (["-v"], ["-p", "1", "--version"]):
        with pytest.raises(VersionRequested):
            parse_serve_args(argv)
    with pytest.raises(ArgumentError, match="flag '--routes': clustering is not supported"):
        parse_serve_args(["--routes", "nats://127.0.0.1:6222"])


def test_negative_values_are_values_not_flags() -> None:
    assert parse_serve_args(["--max-subscriptions", "-0"]).max_subscriptions == 0
    with pytest.raises(ConfigError, match="port: -2 is not a TCP port"):
        parse_serve_args(["-p", "-2"])


@pytest.mark.parametrize("interval", [-0.1, 61.0])
def test_the_consumer_flush_interval_is_bounded(interval: float) -> None:
    settings = Settings()
    settings.jetstream.consumer_flush_interval_s = interval
    with pytest.raises(ConfigError, match="consumer_flush_interval: must be 0 to 60 seconds"):
        settings.validate()
    settings.jetstream.consumer_flush_interval_s = 0.0  # every change, as soon as it can
    assert settings.validate() is settings


# ---- config file and precedence -------------------------------------------------------------


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "brook.conf"
    path.write_text(
        "port: 5000\nserver_name: from-conf\ndebug: true\n"
        "authorization { users: [{user: conf, password: pw}] }\n"
        "jetstream { store_dir: /conf/js }\n"
    )
    return path


@pytest.mark.parametrize("form", [["-c", "{}"], ["--config", "{}"], ["-config={}"], ["--c={}"]])
def test_config_file_is_loaded(config_file: Path, form: list[str]) -> None:
    s = parse_serve_args([part.format(config_file) for part in form])
    assert (s.port, s.server_name, s.debug) == (5000, "from-conf", True)
    assert s.auth.users == [User("conf", "pw")]
    assert (s.jetstream.enabled, s.jetstream.store_dir) == (True, "/conf/js")


@pytest.mark.parametrize("config_last", [False, True])
def test_flags_override_the_config_file(config_file: Path, config_last: bool) -> None:
    flags = ["-p", "6000", "-n", "from-flag", "-D=false", "-sd", "/flag/js"]
    config = ["-c", str(config_file)]
    s = parse_serve_args(flags + config if config_last else config + flags)
    assert (s.port, s.server_name, s.debug) == (6000, "from-flag", False)
    assert (s.jetstream.enabled, s.jetstream.store_dir) == (True, "/flag/js")
    assert s.auth.users == [User("conf", "pw")]  # untouched by flags


def test_user_flags_replace_config_users(config_file: Path) -> None:
    s = parse_serve_args(["-c", str(config_file), "--user", "cli", "--pass", "x"])
    assert s.auth.users == [User("cli", "x")]


def test_last_config_flag_wins(config_file: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.conf"
    other.write_text("port: 7000\n")
    assert parse_serve_args(["-c", str(config_file), "-c", str(other)]).port == 7000


def test_config_file_errors_surface(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing\.conf: cannot read config file"):
        parse_serve_args(["-c", str(tmp_path / "missing.conf")])
    bad = tmp_path / "bad.conf"
    bad.write_text("port: 1\nnope: 2\n")
    with pytest.raises(ConfigError, match=r"bad\.conf: unknown configuration key 'nope'"):
        parse_serve_args(["-p", "4222", "-c", str(bad)])


# ---- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--foo"], "unknown flag '--foo'"),
        (["-foo=1"], "unknown flag '-foo'"),
        (["---port", "1"], "unknown flag '---port'"),
        (["--max-pay", "1"], "unknown flag '--max-pay'"),  # no abbreviations
        (["-Port", "1"], "unknown flag '-Port'"),  # case-sensitive, as Go's flags
        (["-d"], "unknown flag '-d'"),
        (["--max_payload", "1"], "unknown flag '--max_payload'"),
        (["-p"], "flag '-p' needs a value"),
        (["--host", "--port", "1"], "flag '--host' needs a value"),
        (["-sd"], "flag '-sd' needs a value"),
        (["-p", "abc"], "flag '-p': expected an integer, got 'abc'"),
        (["--port=4.5"], "flag '--port': expected an integer, got '4.5'"),
        (["--max-connections", "1e3"], "flag '--max-connections': expected an integer"),
        (["--max-payload", "lots"], "flag '--max-payload': expected a size"),
        (["--max-pending", "1.5GB"], "flag '--max-pending': expected a size"),
        (["--ping-interval", "soon"], "flag '--ping-interval': expected a duration"),
        (["-js=maybe"], "flag '-js': expected true or false, got 'maybe'"),
        (["extra"], "unexpected argument 'extra'"),
        (["-"], "unexpected argument '-'"),
        (
            ["-js", "false"],
            "unexpected argument 'false' (boolean flags take a value only as '-js=false')",
        ),
        (["--", "x"], "unexpected argument 'x'"),
    ],
)
def test_errors_name_the_flag(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_serve_args(argv)


def test_double_dash_ends_the_flags() -> None:
    assert parse_serve_args(["-p", "1", "--"]).port == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-p", "70000"], "port: 70000 is not a TCP port (0-65535, -1 = any free)"),
        (["-m", "70000"], "http_port: 70000 is not a TCP port"),
        (["--max-payload", "128MB"], "max_payload: 134217728 must be between 1 and"),
        (["--max-payload", "2MB", "--max-pending", "1MB"], "cannot exceed max_pending"),
        (["--max-control-line", "100"], "max_control_line: 100 is below 256"),
        (["--max-connections", "0"], "max_connections: must be positive"),
        (["--ping-interval", "0s"], "ping_interval: must be a positive duration"),
    ],
)
def test_validation_errors(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_serve_args(argv)


# ---- help -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv", [["-h"], ["--help"], ["-help"], ["--h"], ["-p", "1", "-h", "--bogus"]]
)
def test_help_is_raised_not_exited(argv: list[str]) -> None:
    with pytest.raises(HelpRequested) as info:
        parse_serve_args(argv)
    assert info.value.text == help_text()


def test_errors_before_help_win() -> None:
    with pytest.raises(ConfigError, match="unknown flag '--bogus'"):
        parse_serve_args(["--bogus", "-h"])


def test_help_lists_every_option_and_default() -> None:
    text = help_text()
    for spelled in [
        "--host", "-a", "--addr", "--net", "-p", "--port", "--http-port", "-m", "--http_port",
        "--server-name", "-n", "--name", "--server_name", "-c", "--config", "--jetstream",
        "-js", "--store-dir", "-sd", "--store_dir", "--max-payload", "--max-control-line",
        "--max-connections", "--max-subscriptions", "--max-pending", "--ping-interval",
        "--max-pings-out", "--auth-timeout", "--write-deadline", "--user", "--pass", "--auth",
        "--debug", "-D", "--trace", "-V", "-DV", "-h", "--help",
    ]:  # fmt: skip
        assert re.search(rf"(^|[ ,]){re.escape(spelled)}\b", text, re.MULTILINE), spelled
    assert "(default 4222)" in text
    assert text.startswith("Usage: brook serve [options]")
