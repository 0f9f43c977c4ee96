"""The process's options (ADR 0041): nats-server's flags (`-P`, `-l`, `-T`,
`--log_size_limit`, `--signal`, `-t`) and config keys (`pid_file`, `log_file`,
`logtime`, `logfile_size_limit`, `logfile_max_num`, `lame_duck_duration`,
`lame_duck_grace_period`) with their aliases, defaults and checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from brook.config.conf import load_conf_file
from brook.config.flags import ConfigChecked, SignalRequested, parse_serve_args
from brook.config.settings import ConfigError, ProcessSettings


def test_defaults_are_nats_servers() -> None:
    process = ProcessSettings()
    assert (process.lame_duck_duration_s, process.lame_duck_grace_period_s) == (120.0, 10.0)
    assert process.logtime is True
    assert (process.pid_file, process.log_file, process.log_size_limit) == ("", "", 0)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["-P", "/run/b.pid"], {"pid_file": "/run/b.pid"}),
        (["--pid=/run/b.pid"], {"pid_file": "/run/b.pid"}),
        (["-l", "/var/log/b.log"], {"log_file": "/var/log/b.log"}),
        (["--log", "b.log"], {"log_file": "b.log"}),
        (["-T=false"], {"logtime": False}),
        (["--logtime=false", "--logtime_utc"], {"logtime": False, "logtime_utc": True}),
        (["--log_size_limit", "2048"], {"log_size_limit": 2048}),
    ],
)
def test_flags(argv: list[str], expected: dict[str, object]) -> None:
    process = parse_serve_args(argv).process
    assert {k: getattr(process, k) for k in expected} == expected


def test_signal_is_handled_before_the_config_file_is_read(tmp_path: Path) -> None:
    with pytest.raises(SignalRequested) as asked:
        parse_serve_args(["-c", str(tmp_path / "missing.conf"), "--signal", "ldm=42"])
    assert asked.value.command == "ldm=42"
    with pytest.raises(SignalRequested):
        parse_serve_args(["-sl", "reopen"])


def test_check_config_needs_a_file_and_loads_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"must specify \[-c, --config\] option"):
        parse_serve_args(["-t"])
    good = tmp_path / "good.conf"
    good.write_text("port: 4999\n")
    with pytest.raises(ConfigChecked) as checked:
        parse_serve_args(["-t", "-c", str(good)])
    # nats-server's digest of the same file (its `-t` prints it).
    expected = "sha256:6c6766e77456d7afcdbccc5aea4e9ceaa1a96918e410c78dfac48011d8871171"
    assert (checked.value.path, checked.value.digest) == (str(good), expected)
    bad = tmp_path / "bad.conf"
    bad.write_text("port: 4999\nunknown_key: 1\n")
    with pytest.raises(ConfigError, match="unknown_key"):
        parse_serve_args(["-t", "-c", str(bad)])


def load(tmp_path: Path, text: str) -> ProcessSettings:
    path = tmp_path / "p.conf"
    path.write_text(text)
    return load_conf_file(str(path)).process


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('pid_file: "/run/b.pid"', {"pid_file": "/run/b.pid"}),
        ('pidfile: "/run/b.pid"', {"pid_file": "/run/b.pid"}),
        ('log_file: "b.log"', {"log_file": "b.log"}),
        ('logfile: "b.log"', {"log_file": "b.log"}),
        ("logtime: false\nlogtime_utc: true", {"logtime": False, "logtime_utc": True}),
        ("logfile_size_limit: 1MB", {"log_size_limit": 1024 * 1024}),
        ("log_size_limit: 1000", {"log_size_limit": 1000}),
        ("logfile_max_num: 5", {"log_max_num": 5}),
        ('lame_duck_duration: "1m30s"', {"lame_duck_duration_s": 90.0}),
        ('lame_duck_grace_period: "500ms"', {"lame_duck_grace_period_s": 0.5}),
        ('lame_duck_grace_period: "0s"', {"lame_duck_grace_period_s": 10.0}),  # the default
    ],
)
def test_config_keys(tmp_path: Path, text: str, expected: dict[str, object]) -> None:
    process = load(tmp_path, text + "\n")
    assert {k: getattr(process, k) for k in expected} == expected


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('lame_duck_duration: "29s"', "invalid lame_duck_duration of 29s, minimum is 30 seconds"),
        ('lame_duck_duration: "soon"', 'lame_duck_duration: time: invalid duration "soon"'),
        ('lame_duck_grace_period: "-1s"', "invalid lame_duck_grace_period, needs to be positive"),
        ("logfile_max_num: -1", "logfile_max_num: must not be negative"),
    ],
)  # fmt: skip
def test_config_errors_are_nats_servers(tmp_path: Path, text: str, error: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load(tmp_path, text + "\n")
    assert error in str(refused.value)
