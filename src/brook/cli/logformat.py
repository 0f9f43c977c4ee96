"""The log line format of `brook serve`: nats-server's, so tools that read its log read ours.

nats-server writes `[pid] YYYY/MM/DD HH:MM:SS.uuuuuu [INF] message` to stderr (local time,
microseconds), with the levels TRC, DBG, INF, WRN, ERR and FTL. Launchers of test servers
scan these lines: nats.py's `nats.server` waits for `[INF] ... Server is ready`, takes the
address from `Listening for client connections on HOST:PORT` and reports `[FTL]` lines
when the process exits. Only the process's owner sets this format: `brook.serve()`
embedded in another program logs through that program's handlers.
"""

from __future__ import annotations

import datetime
import logging

__all__ = ["NatsServerFormatter"]

_LEVELS = {
    logging.DEBUG: "DBG",
    logging.INFO: "INF",
    logging.WARNING: "WRN",
    logging.ERROR: "ERR",
    logging.CRITICAL: "FTL",
}


class NatsServerFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        when = datetime.datetime.fromtimestamp(record.created)
        level = _LEVELS.get(record.levelno, record.levelname[:3])
        line = f"[{record.process}] {when:%Y/%m/%d %H:%M:%S.%f} [{level}] {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line
