"""The process's life (ADR 0041): its pid file, its log file and lame-duck mode's timing,
named and defaulted as nats-server's options (`pid_file`, `log_file`, `logtime`,
`logfile_size_limit`, `logfile_max_num`, `lame_duck_duration`, `lame_duck_grace_period`).
Only `brook serve` writes the pid and log files: an embedded `brook.serve()` logs through
its host's handlers; lame-duck mode is the server's, embedded or not."""

from __future__ import annotations

from dataclasses import dataclass

from brook import limits
from brook.config.errors import ConfigError


@dataclass(slots=True)
class ProcessSettings:
    pid_file: str = ""  # "": none; written at start, removed at a clean exit
    log_file: str = ""  # "": stderr
    logtime: bool = True  # nats-server's -T (true unless -T=false or `logtime: false`)
    logtime_utc: bool = False
    # A log file above this many bytes is renamed with a timestamp suffix and started
    # again (nats-server's `logfile_size_limit`; 0: never).
    log_size_limit: int = 0
    # Rotated log files kept, the current one included (`logfile_max_num`; 0: all).
    log_max_num: int = 0
    lame_duck_duration_s: float = limits.LAME_DUCK_DURATION_S
    lame_duck_grace_period_s: float = limits.LAME_DUCK_GRACE_PERIOD_S

    def validate(self) -> None:
        if self.log_size_limit < 0:
            raise ConfigError("logfile_size_limit: must not be negative")
        if self.log_max_num < 0:
            raise ConfigError("logfile_max_num: must not be negative")
        if self.lame_duck_duration_s <= 0 or self.lame_duck_grace_period_s < 0:
            raise ConfigError(
                "lame duck mode: the duration must be positive, the grace period not negative"
            )
