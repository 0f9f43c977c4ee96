"""The config keys of the process's life (ADR 0041): pid and log files, log timestamps and
rotation, lame-duck timing; nats-server's names, aliases and checks (its `processConfigFileLine`:
lame-duck durations are Go duration strings, the duration at least 30 seconds)."""

from __future__ import annotations

from collections.abc import Callable

from brook import limits
from brook.config.conf_values import read_bool, read_int, read_size, read_str
from brook.config.settings import ConfigError, Settings
from brook.durations import go_string, parse_ns

__all__ = ["PROCESS_KEYS"]

_Handler = Callable[[Settings, str, object], None]


def _go_duration_ns(key: str, where: str, v: object) -> int:
    text = read_str(where, v)
    ns = parse_ns(text)
    if ns is None:
        raise ConfigError(f'error parsing {key}: time: invalid duration "{text}"')
    return ns


def _lame_duck_duration(s: Settings, where: str, v: object) -> None:
    ns = _go_duration_ns("lame_duck_duration", where, v)
    if ns < limits.LAME_DUCK_DURATION_MIN_S * 1e9:
        raise ConfigError(f"invalid lame_duck_duration of {go_string(ns)}, minimum is 30 seconds")
    s.process.lame_duck_duration_s = ns / 1e9


def _lame_duck_grace_period(s: Settings, where: str, v: object) -> None:
    ns = _go_duration_ns("lame_duck_grace_period", where, v)
    if ns < 0:
        raise ConfigError("invalid lame_duck_grace_period, needs to be positive")
    # 0 means the default, as in nats-server (its `setBaselineOptions`).
    s.process.lame_duck_grace_period_s = ns / 1e9 or limits.LAME_DUCK_GRACE_PERIOD_S


def _process(attr: str, convert: Callable[[str, object], object]) -> _Handler:
    def apply(s: Settings, where: str, v: object) -> None:
        setattr(s.process, attr, convert(where, v))

    return apply


# conf key(s) (nats-server's aliases), ProcessSettings attribute, converter
_PLAIN = (
    ("pidfile pid_file", "pid_file", read_str),
    ("logfile log_file", "log_file", read_str),
    ("logtime", "logtime", read_bool),
    ("logtime_utc", "logtime_utc", read_bool),
    ("logfile_size_limit log_size_limit", "log_size_limit", read_size),
    ("logfile_max_num log_max_num", "log_max_num", read_int),
)
PROCESS_KEYS: dict[str, _Handler] = {
    key: _process(attr, convert) for keys, attr, convert in _PLAIN for key in keys.split()
} | {
    "lame_duck_duration": _lame_duck_duration,
    "lame_duck_grace_period": _lame_duck_grace_period,
}
