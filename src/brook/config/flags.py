"""Command-line arguments of `brook serve`, translated into `Settings`.

Brook's own options are kebab-case (`--max-payload`); nats-server's common flags are
accepted as aliases so scripts written for nats-server keep working. Parsing follows Go's
`flag` package, which nats-server uses: one or two dashes mean the same, a value follows as
`-p 4222` or `-p=4222`, and a boolean flag is set by its presence or as `-js=false`, never by
a separate word. As in nats-server, a config file named with `-c` is loaded first and every
flag overrides it. The parser never exits the process: a malformed command line is an
`ArgumentError`, a bad config file or setting a `ConfigError`, and `-h` and `-v` raise
`HelpRequested` and `VersionRequested`, leaving printing and exit codes to the CLI.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Literal

from brook.config.conf import config_digest, load_conf_file, sync_interval
from brook.config.conf_syntax import parse_size
from brook.config.settings import ConfigError, Settings, TLSSettings, User
from brook.durations import parse_seconds

__all__ = [
    "ArgumentError",
    "ConfigChecked",
    "HelpRequested",
    "SignalRequested",
    "VersionRequested",
    "help_text",
    "parse_serve_args",
]

_Kind = Literal["bool", "str", "int", "size", "duration"]


class ArgumentError(ConfigError):
    """The command line itself is malformed (unknown flag, missing or mistyped value);
    the CLI exits 2 for these, and 1 for a bad config file or setting, as nats-server."""


class HelpRequested(Exception):
    """`-h`/`--help` was given; the CLI prints `text` and exits with status 0."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class SignalRequested(Exception):
    """`--signal COMMAND[=PID|=PIDFILE]` was given: the CLI signals that server (cli/
    signals.py) instead of serving. As nats-server, before any config file is read."""

    def __init__(self, command: str) -> None:
        super().__init__(command)
        self.command = command


class ConfigChecked(Exception):
    """`-t` with a config file that loads: the CLI prints nats-server's message (the
    file and its digest) and exits 0 without serving."""

    def __init__(self, path: str, digest: str) -> None:
        super().__init__(path)
        self.path = path
        self.digest = digest


class VersionRequested(Exception):
    """`-v`/`--version` was given (anywhere, as nats-server allows); the CLI prints the
    version and exits with status 0."""


@dataclass(frozen=True, slots=True)
class _Flag:
    names: tuple[str, ...]  # without dashes; Brook's own name first
    kind: _Kind
    target: str  # a Settings attribute, "jetstream.<attribute>", or "@<special>"
    help: str
    metavar: str = ""


_FLAGS = (
    _Flag(("host", "a", "addr", "net"), "str", "host", "Client listen address", "HOST"),
    _Flag(("port", "p"), "int", "port", "Client port (-1 or 0 = pick a free port)", "PORT"),
    _Flag(
        ("http-port", "m", "http_port"),
        "int",
        "http_port",
        "Monitoring port (0 = off, -1 = pick a free port)",
        "PORT",
    ),
    _Flag(
        ("https-port", "ms", "https_port"),
        "int",
        "https_port",
        "Monitoring port over HTTPS, with the TLS certificate (0 = off, -1 = any free)",
        "PORT",
    ),
    _Flag(("server-name", "n", "name", "server_name"), "str", "server_name", "Server name", "NAME"),
    _Flag(("config", "c"), "str", "@config", "nats-server style config file, read first", "FILE"),
    _Flag(("jetstream", "js"), "bool", "jetstream.enabled", "Enable JetStream"),
    _Flag(
        ("store-dir", "sd", "store_dir"),
        "str",
        "jetstream.store_dir",
        "JetStream data (default: brook/jetstream in the system's temporary directory)",
        "DIR",
    ),
    _Flag(
        ("ports-file-dir", "ports_file_dir"),
        "str",
        "ports_file_dir",
        "Write <program>_<pid>.ports there (the listening URLs, as JSON)",
        "DIR",
    ),
    _Flag(
        ("sync-interval", "sync_interval"),
        "str",
        "@sync_interval",
        "fsync before every ack ('always', default) or every DUR",
        "DUR",
    ),
    _Flag(("max-payload",), "size", "max_payload_bytes", "Largest message payload", "SIZE"),
    _Flag(("max-control-line",), "size", "max_control_line_bytes", "Longest protocol line", "SIZE"),
    _Flag(("max-connections",), "int", "max_connections", "Most client connections", "N"),
    _Flag(("max-subscriptions",), "int", "max_subscriptions", "Subs per client (0 = any)", "N"),
    _Flag(("max-pending",), "size", "max_pending_bytes", "Pending output per client", "SIZE"),
    _Flag(("ping-interval",), "duration", "ping_interval_s", "How often to PING a client", "DUR"),
    _Flag(("max-pings-out",), "int", "max_pings_out", "Unanswered PINGs before closing", "N"),
    _Flag(("auth-timeout",), "duration", "auth_timeout_s", "Time a client has to CONNECT", "DUR"),
    _Flag(
        ("write-deadline",),
        "duration",
        "write_deadline_s",
        "Close clients stalled this long",
        "DUR",
    ),
    _Flag(("user",), "str", "@user", "User required for connections (with --pass)", "USER"),
    _Flag(("pass",), "str", "@pass", "Password required for connections", "PASS"),
    _Flag(("auth",), "str", "@token", "Authorization token required for connections", "TOKEN"),
    _Flag(("tls",), "bool", "@tls", "Enable TLS on the client port (-tls=false: disable it)"),
    _Flag(("tlscert",), "str", "@tlscert", "Server certificate file", "FILE"),
    _Flag(("tlskey",), "str", "@tlskey", "Private key for the server certificate", "FILE"),
    _Flag(("tlscacert",), "str", "@tlscacert", "Client certificate CA for verification", "FILE"),
    _Flag(("tlsverify",), "bool", "@tlsverify", "Enable TLS with client verification"),
    _Flag(("pid", "P"), "str", "process.pid_file", "File to store the process's pid", "FILE"),
    _Flag(("log", "l"), "str", "process.log_file", "File to store logging output", "FILE"),
    _Flag(("logtime", "T"), "bool", "process.logtime", "Timestamp log entries (-T=false: none)"),
    _Flag(("logtime_utc",), "bool", "process.logtime_utc", "Timestamps in UTC, not local time"),
    _Flag(
        ("log_size_limit",),
        "int",
        "process.log_size_limit",
        "Rotate the log file above this many bytes",
        "N",
    ),
    _Flag(
        ("signal", "sl"),
        "str",
        "@signal",
        "Signal a server: ldm, stop, quit, term, reopen or reload, =PID or =PIDFILE",
        "SIGNAL",
    ),
    _Flag(("check-config", "t"), "bool", "@check_config", "Check the -c config file and exit"),
    _Flag(("debug", "D"), "bool", "debug", "Debug logging"),
    _Flag(("trace", "V"), "bool", "trace", "Protocol trace logging"),
    _Flag(("DV",), "bool", "@debug_trace", "Debug and trace logging"),
    _Flag(("help", "h"), "bool", "@help", "Show this help"),
    _Flag(("version", "v"), "bool", "@version", "Show the version"),
)
_BY_NAME = {name: flag for flag in _FLAGS for name in flag.names}
# nats-server flags for features Brook does not have: refused with the feature's name.
_UNSUPPORTED = {
    name: feature
    for names, feature in (
        ("cluster cluster_name cluster_listen cluster_advertise routes no_advertise"
         " connect_retries", "clustering"),
    )
    for name in names.split()
}  # fmt: skip
_BOOL_WORDS = {w: True for w in ("1", "t", "true", "yes", "on")} | {
    w: False for w in ("0", "f", "false", "no", "off")
}
_EXPECTED = {
    "int": "an integer",
    "size": "a size (bytes, or like 64KB, 1MB)",
    "duration": "a duration (seconds, or like 2s, 500ms, 1m)",
}


def help_text() -> str:
    """Every option with its aliases and the default from `Settings()`."""
    defaults = Settings()
    lines = [
        "Usage: brook serve [options]",
        "",
        "Every option takes one or two dashes; values follow as '-p 4222' or '-p=4222'.",
        "Sizes take 1MB (1024-based) or 1M (1000-based); durations take 2s, 500ms, 1m or seconds.",
        "Boolean options take a value only as '-js=false'. Flags override the -c config file.",
        "",
    ]
    for flag in _FLAGS:
        short = [n for n in flag.names if len(n) <= 2]  # nats-server's -p, -js ... first
        names = [f"-{n}" for n in short] + [f"--{n}" for n in flag.names if n not in short]
        spelled = f"{', '.join(names)} {flag.metavar}".rstrip()
        default = None if flag.target.startswith("@") else _get(defaults, flag.target)
        if isinstance(default, float):
            default = f"{default:g}s"
        note = "" if default in (None, False, 0, "") else f" (default {default})"
        if len(spelled) > 30:
            lines.append(f"  {spelled}")
            spelled = ""
        lines.append(f"  {spelled:<30}  {flag.help}{note}")
    return "\n".join(lines) + "\n"


def _get(settings: Settings, target: str) -> object:
    owner, _, attr = target.rpartition(".")
    return getattr(getattr(settings, owner) if owner else settings, attr)


def _set(settings: Settings, target: str, value: object) -> None:
    owner, _, attr = target.rpartition(".")
    setattr(getattr(settings, owner) if owner else settings, attr, value)


def _lookup(arg: str) -> tuple[_Flag | None, str, str | None]:
    """Split `-name=value` the Go way: one or two dashes, value after the first '='."""
    typed, eq, value = arg.partition("=")
    name = typed[2:] if typed.startswith("--") else typed[1:]
    return _BY_NAME.get(name), typed, value if eq else None


def _convert(flag: _Flag, typed: str, raw: str | None) -> object:
    if flag.kind == "bool":
        if raw is None:
            return True
        if raw.lower() not in _BOOL_WORDS:
            raise ArgumentError(f"flag {typed!r}: expected true or false, got {raw!r}")
        return _BOOL_WORDS[raw.lower()]
    if raw is None:  # `_scan` already insists on a value; this keeps the types honest
        raise ArgumentError(f"flag {typed!r} needs a value")
    if flag.kind == "str":
        return raw
    try:
        if flag.kind == "int":
            if not re.fullmatch(r"-?[0-9]+", raw.strip()):
                raise ValueError(raw)
            return int(raw)
        return parse_size(raw) if flag.kind == "size" else parse_seconds(raw)
    except ValueError:
        expected = _EXPECTED[flag.kind]
        raise ArgumentError(f"flag {typed!r}: expected {expected}, got {raw!r}") from None


def _scan(argv: list[str]) -> list[tuple[_Flag, str, str | None]]:
    """Pair each flag with its raw value, in order; stop at `--` like Go's flag package."""
    given: list[tuple[_Flag, str, str | None]] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            if i < len(argv):
                raise ArgumentError(f"unexpected argument {argv[i]!r}")
            break
        if not arg.startswith("-") or arg == "-":
            hint = ""
            if given and given[-1][0].kind == "bool" and arg.lower() in _BOOL_WORDS:
                hint = f" (boolean flags take a value only as '{given[-1][1]}={arg}')"
            raise ArgumentError(f"unexpected argument {arg!r}{hint}")
        flag, typed, value = _lookup(arg)
        if flag is None:
            feature = _UNSUPPORTED.get(typed.lstrip("-"))
            if feature is not None:
                raise ArgumentError(f"flag {typed!r}: {feature} is not supported by Brook")
            raise ArgumentError(f"unknown flag {typed!r}")
        if flag.target == "@help":
            raise HelpRequested(help_text())
        if flag.target == "@version":
            raise VersionRequested
        if flag.kind != "bool" and value is None:
            if i >= len(argv) or (argv[i].startswith("-") and _lookup(argv[i])[0] is not None):
                raise ArgumentError(f"flag {typed!r} needs a value")
            value = argv[i]
            i += 1
        given.append((flag, typed, value))
    return given


def _override_tls(settings: Settings, given: dict[str, object]) -> None:
    """nats-server's `overrideTLS`: any `-tls*` flag replaces the config file's certificate,
    CA and verification with the flags' (its timeout, handshake_first, pins and mapping
    stay); `-tls=false` turns TLS off whatever else is given."""
    if given.get("", True) is False:
        settings.tls = None
        return
    cert, key = str(given.get("cert", "")), str(given.get("key", ""))
    if not cert:
        raise ConfigError("TLS Server certificate must be present and valid")
    if not key:
        raise ConfigError("TLS Server private key must be present and valid")
    base = settings.tls or TLSSettings()
    settings.tls = dataclasses.replace(
        base,
        cert_file=cert,
        key_file=key,
        ca_file=str(given.get("cacert", "")),
        verify=bool(given.get("verify", False)) or base.verify_and_map,
        min_version="1.2",
    )


def parse_serve_args(argv: list[str]) -> Settings:
    """Settings for `brook serve ARGV`: the `-c` file first (if any), then each flag in order."""
    given = _scan(argv)
    values = [(flag, typed, _convert(flag, typed, raw)) for flag, typed, raw in given]
    signals = [str(v) for flag, _, v in values if flag.target == "@signal"]
    if signals:
        raise SignalRequested(signals[-1])
    configs = [str(v) for flag, _, v in values if flag.target == "@config"]
    settings = load_conf_file(configs[-1]) if configs else Settings()
    if any(flag.target == "@check_config" and v for flag, _, v in values):
        if not configs:
            raise ConfigError(
                "must specify [-c, --config] option to check configuration file syntax"
            )
        # nats-server checks the file alone, before its flags are applied.
        raise ConfigChecked(configs[-1], config_digest(configs[-1]))
    tls_flags: dict[str, object] = {}
    user: tuple[str, object] | None = None  # (flag as typed, value)
    password: tuple[str, object] | None = None
    for flag, typed, value in values:
        if flag.target == "@user":
            user = (typed, value)
        elif flag.target == "@pass":
            password = (typed, value)
        elif flag.target == "@token":
            settings.auth.token = str(value)
        elif flag.target.startswith("@tls"):
            tls_flags[flag.target[4:]] = value
        elif flag.target == "@debug_trace":
            settings.debug = settings.trace = bool(value)
        elif flag.target == "@sync_interval":
            settings.jetstream.sync_interval_s = sync_interval(f"flag {typed!r}", value)
        elif flag.target not in ("@config", "@check_config"):
            _set(settings, flag.target, value)
    if tls_flags:
        _override_tls(settings, tls_flags)
    if user is not None and password is not None:
        settings.auth.users = [User(str(user[1]), str(password[1]))]
    elif user is not None:
        raise ArgumentError(f"flag {user[0]!r} needs --pass as well")
    elif password is not None:
        raise ArgumentError(f"flag {password[0]!r} needs --user as well")
    settings.serve_args = tuple(argv)  # read again, file and flags, by a config reload
    return settings.validate()
