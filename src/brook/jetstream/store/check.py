"""`check_store`: verify a file-store directory without changing it (bbolt's `check`).

It runs the very replay `FileStore` runs when opening (`file/recovery.py`), with files
opened read-only and repairs switched off, so it reports exactly what opening would find:
every record's CRC and shape, sequence order within and across segments, segment
preambles, tombstones that claim a newer `last_seq` than the log shows, torn tails, corrupt
regions, stray files, and meta.json. It is safe on a directory a live store has open (it
sees what has reached the OS). Used by tests and by `brook store check DIR`.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from brook.jetstream.store.file.index import Index
from brook.jetstream.store.file.recovery import (
    FORMAT_VERSION,
    META,
    MSGS,
    Finding,
    Lost,
    RecoveryReport,
    list_segments,
    read_meta,
    replay,
)
from brook.jetstream.store.file.segment import Segment

__all__ = ["CheckReport", "Finding", "check_store"]


@dataclass(slots=True)
class CheckReport:
    """The verdict on one store directory: `healthy` when nothing was found."""

    directory: str
    findings: list[Finding] = field(default_factory=list)
    lost: list[Lost] = field(default_factory=list)  # sequences the damage took (7.6)
    segments: int = 0
    records: int = 0
    messages: int = 0
    bytes: int = 0
    first_seq: int = 0
    last_seq: int = 0
    num_deleted: int = 0
    num_subjects: int = 0

    @property
    def healthy(self) -> bool:
        return not self.findings

    def to_dict(self) -> dict[str, Any]:
        lists = ("findings", "lost")
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k not in lists}
        out["healthy"] = self.healthy
        out["findings"] = [asdict(f) for f in self.findings]
        out["lost"] = [asdict(lost) for lost in self.lost]
        return out

    def format(self) -> str:
        """A human-readable report."""
        lines = [
            f"store {self.directory}",
            f"  {self.segments} segments, {self.records} records",
            f"  {self.messages} messages, {self.bytes} bytes, sequences {self.first_seq}.."
            f"{self.last_seq} ({self.num_deleted} deleted), {self.num_subjects} subjects",
        ]
        if self.healthy:
            lines.append("healthy")
        else:
            lines.append(f"{len(self.findings)} problem(s):")
            lines.extend(f"  {finding}" for finding in self.findings)
            lines.extend(f"  {lost}" for lost in self.lost)
        return "\n".join(lines)


def check_store(directory: str | os.PathLike[str]) -> CheckReport:
    """Verify the store in `directory`; reads only, changes nothing."""
    path = Path(directory)
    report = CheckReport(str(path))
    if not path.is_dir():
        report.findings.append(Finding("meta", ".", detail="not a directory"))
        return report
    meta, problem = read_meta(path)
    if meta is None:
        report.findings.append(Finding("meta", META, detail=problem))
    elif meta["version"] > FORMAT_VERSION:
        report.findings.append(
            Finding("meta", META, detail=f"unsupported version {meta['version']}")
        )
        return report
    if not (path / MSGS).is_dir():
        report.findings.append(Finding("meta", MSGS, detail="no msgs/ directory"))
        return report
    recovery = RecoveryReport()
    entries = list_segments(path / MSGS, recovery)
    index = Index(1 if entries or meta is None else meta["first_seq"])
    segments: list[Segment] = []
    try:
        for name, seg_path in entries:
            try:
                segments.append(Segment.open(seg_path, name, writable=False))
            except OSError as exc:
                recovery.findings.append(Finding("io", f"{MSGS}/{seg_path.name}", detail=str(exc)))
        replay(index, segments, recovery)
    finally:
        for seg in segments:
            seg.close()
    report.findings.extend(recovery.findings)
    report.lost.extend(recovery.lost)
    report.segments = recovery.segments
    report.records = recovery.records
    report.messages = index.messages
    report.bytes = index.bytes
    report.last_seq = index.last
    report.first_seq = index.first if index.messages else (index.last + 1 if index.last else 0)
    report.num_deleted = index.last - index.first + 1 - index.messages if index.messages else 0
    report.num_subjects = len(index.subjects)
    return report
