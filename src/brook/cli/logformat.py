"""The log of `brook serve`: nats-server's line format and log file, so tools that read
its log read ours (ADR 0041).

nats-server writes `[pid] YYYY/MM/DD HH:MM:SS.uuuuuu [INF] message` (local time, or UTC
with `logtime_utc`; no time at all with `-T=false`), with the levels TRC, DBG, INF, WRN,
ERR and FTL. Launchers of test servers scan these lines: nats.py's `nats.server` waits for
`[INF] ... Server is ready`, takes the address from `Listening for client connections on
HOST:PORT` and reports `[FTL]` lines when the process exits. Only the process's owner
sets this format: `brook.serve()` embedded in another program logs through its handlers.

With `-l FILE` (`log_file`) the lines go to that file, appended. SIGUSR1 reopens it, for
logrotate's move-then-signal. Above `log_size_limit` bytes the file is renamed with
nats-server's timestamp suffix (`FILE.YYYY.MM.DD.hh.mm.ss.nnnnnnnnn`) and started again,
keeping at most `logfile_max_num` files (0: all).
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import re
from pathlib import Path
from typing import TextIO

__all__ = ["NatsServerFormatter", "NatsServerLogFile"]

_LEVELS = {
    logging.DEBUG: "DBG",
    logging.INFO: "INF",
    logging.WARNING: "WRN",
    logging.ERROR: "ERR",
    logging.CRITICAL: "FTL",
}
# A rotated file's suffix, as nats-server names (and, to purge, recognizes) them.
_BACKUP_SUFFIX = re.compile(r"\.\d{4}\.\d{2}\.\d{2}\.\d{2}\.\d{2}\.\d{2}\.\d{9}")


class NatsServerFormatter(logging.Formatter):
    def __init__(self, *, logtime: bool = True, utc: bool = False) -> None:
        super().__init__()
        self.logtime = logtime
        self.utc = utc

    def format(self, record: logging.LogRecord) -> str:
        level = _LEVELS.get(record.levelno, record.levelname[:3])
        line = f"[{record.process}] "
        if self.logtime:
            zone = datetime.UTC if self.utc else None
            when = datetime.datetime.fromtimestamp(record.created, zone)
            line += f"{when:%Y/%m/%d %H:%M:%S.%f} "
        line += f"[{level}] {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class NatsServerLogFile(logging.Handler):
    """The log file: appended to, reopened on demand, rotated by size as nats-server's."""

    def __init__(self, path: str, *, size_limit: int = 0, max_files: int = 0) -> None:
        super().__init__()
        self.path = path
        self.size_limit = size_limit
        self.max_files = max_files
        self._file = self._open()

    def _open(self) -> TextIO:
        f = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - kept open, closed in close()
        self._size = f.tell()
        return f

    def _write(self, text: str) -> None:
        data = text + "\n"
        self._file.write(data)
        self._file.flush()
        self._size += len(data.encode())

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._write(self.format(record))
            if self.size_limit and self._size > self.size_limit:
                self._rotate(record)
        except Exception:  # logging must never raise into the server
            self.handleError(record)

    def _notice(self, record: logging.LogRecord, message: str) -> None:
        """A line of the handler's own, formatted like `record`'s but at INF level."""
        own = logging.makeLogRecord(
            {**record.__dict__, "msg": message, "args": None, "levelno": logging.INFO,
             "levelname": "INFO", "exc_info": None}
        )  # fmt: skip
        self._write(self.format(own))

    def _rotate(self, record: logging.LogRecord) -> None:
        self._close_file()
        now = datetime.datetime.now()
        nanos = now.microsecond * 1000
        backup = f"{self.path}.{now:%Y.%m.%d.%H.%M.%S}.{nanos:09d}"
        os.rename(self.path, backup)
        self._file = self._open()
        self._notice(record, f"Rotated log, backup saved as {json.dumps(backup)}")
        if self.max_files > 0:
            self._purge(record)

    def _purge(self, record: logging.LogRecord) -> None:
        path = Path(self.path)
        backups = sorted(
            p.name
            for p in path.parent.iterdir()
            if p.name.startswith(path.name)
            and _BACKUP_SUFFIX.fullmatch(p.name[len(path.name) :])
            and p.is_file()
        )
        for name in backups[: max(len(backups) - (self.max_files - 1), 0)]:
            try:
                (path.parent / name).unlink()
            except OSError as exc:
                self._notice(record, f"Unable to remove backup log file {json.dumps(name)} ({exc})")
                return
            self._notice(record, f"Purged log file {json.dumps(name)}")

    def reopen(self) -> None:
        """Close and open the file again (SIGUSR1): after logrotate moved it, the log
        goes on in a new file at the same path."""
        self.acquire()
        try:
            self._close_file()
            self._file = self._open()
        finally:
            self.release()

    def _close_file(self) -> None:
        self._file.close()

    def close(self) -> None:
        self.acquire()
        try:
            self._close_file()
        finally:
            self.release()
        super().close()
