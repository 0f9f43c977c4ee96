"""What opening each stream's file store found damaged: logged, and kept for monitoring.

Opening a file store replays its log and repairs what a crash or a bad disk left
(`store/file/recovery.py`); its `RecoveryReport` says what was found and which sequences
were lost. The operator learns of it twice: a bounded number of log lines per stream
(`brook store check` lists everything), and `/varz` (`jetstream.brook_store
.damaged_streams`) for as long as the stream exists.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import Any

from brook.jetstream.store.file.recovery import RecoveryReport

log = logging.getLogger("brook.jetstream")

# Findings of one stream's recovery logged one by one (and shown in /varz); the rest are
# counted (`brook store check` lists them all).
RECOVERY_LOG_LINES_MAX = 20


class DamageReports:
    def __init__(self) -> None:
        self._reports: dict[str, RecoveryReport] = {}  # stream name -> what was damaged

    def opened(self, name: str, report: RecoveryReport) -> None:
        """Stream `name`'s file store was opened: log what it found damaged (stream,
        file, offsets, lost sequences) and keep it for monitoring."""
        self._reports.pop(name, None)
        if report.clean:
            return
        self._reports[name] = report
        lines = [str(f) for f in report.findings] + [str(lost) for lost in report.lost]
        log.warning(
            "stream %s: opening its store found %d problem(s) (%s); %d sequence(s) lost",
            name,
            len(report.findings),
            "repaired" if report.repaired else "nothing changed",
            len(report.lost_seqs()),
        )
        for line in lines[:RECOVERY_LOG_LINES_MAX]:
            log.warning("stream %s: %s", name, line)
        if len(lines) > RECOVERY_LOG_LINES_MAX:
            log.warning(
                "stream %s: %d more (brook store check lists them all)",
                name,
                len(lines) - RECOVERY_LOG_LINES_MAX,
            )

    def forget(self, name: str) -> None:
        """Stream `name` was deleted."""
        self._reports.pop(name, None)

    def statistics(self) -> dict[str, Any]:
        """`/varz` jetstream.brook_store.damaged_streams: each damaged stream's report."""
        return {
            name: {
                "repaired": report.repaired,
                "num_findings": len(report.findings),
                "findings": [asdict(f) for f in report.findings[:RECOVERY_LOG_LINES_MAX]],
                "lost": [asdict(lost) for lost in report.lost[:RECOVERY_LOG_LINES_MAX]],
            }
            for name, report in sorted(self._reports.items())
        }
