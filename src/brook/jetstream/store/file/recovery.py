"""Opening a store directory: meta.json, the segment list, and replay of the log.

Replay rebuilds the in-memory index from the records (storage-format.md 6.1) and finds every
kind of damage (section 7). The same code serves two callers: `FileStore` (which then
repairs: torn tails are truncated, a damaged meta.json is set aside and rewritten) and
`check_store` (files opened read-only, nothing changed), so the checker reports exactly
what opening the store would find.

The rule that keeps damage from costing data: the log is the only authority. A finding
never removes a valid record; meta.json is never trusted over the log. Replay never changes
a segment file: a torn tail only ends the segment's valid bytes (`Segment.size`), and the
store truncates it once the log's `last_seq` is durable without it (storage-format.md 7.1).

Sequences that replay proves were assigned but whose records are gone (section 7.6) are
reported as `lost`, and `last_seq` stays past them, so no sequence is ever handed out twice.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import json
import mmap
import os
import time
from array import array
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from brook.jetstream.store.base import StoreError
from brook.jetstream.store.file.format import (
    F_ERASED,
    OVERHEAD,
    T_DELETE,
    T_MSG,
    Damage,
    claimed_seq,
    decode_ranges,
    decode_state,
    scan,
)
from brook.jetstream.store.file.index import Index
from brook.jetstream.store.file.segment import HDR_BIT, Segment, parse_segment_filename

LOCK = "LOCK"
META = "meta.json"
META_TMP = "meta.json.tmp"
META_CORRUPT = "meta.json.corrupt"
MSGS = "msgs"
FORMAT_NAME = "brook.filestore"
FORMAT_VERSION = 1
# Messages a replay run gathers before it indexes them (`_Run`): enough to amortize the
# call, few enough that the run's subject strings (about 60 bytes each) stay small; an
# unbounded run of a 1M-message segment doubled the peak memory of opening it.
RUN_MAX = 4096


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing found wrong (storage-format.md 7.5). `kind` is one of: meta, torn_tail,
    corrupt, sequence, preamble, stray_file, io. `file` is relative to the store directory."""

    kind: str
    file: str
    offset: int = -1
    length: int = 0
    detail: str = ""

    def __str__(self) -> str:
        where = self.file if self.offset < 0 else f"{self.file}@{self.offset}"
        size = f" ({self.length} bytes)" if self.length else ""
        return f"{self.kind}: {where}{size}: {self.detail}"


@dataclass(frozen=True, slots=True)
class Lost:
    """Sequences `first..last` that the log proves were assigned, whose records are gone
    (storage-format.md 7.6). `file` is the segment that should have held them."""

    file: str
    first: int
    last: int

    def __str__(self) -> str:
        seqs = str(self.first) if self.first == self.last else f"{self.first}..{self.last}"
        return f"sequence {seqs} lost ({self.file})"


@dataclass(slots=True)
class RecoveryReport:
    """What opening (or checking) a store found. Empty `findings` means a clean log."""

    findings: list[Finding] = field(default_factory=list)
    lost: list[Lost] = field(default_factory=list)
    segments: int = 0
    records: int = 0
    duration_s: float = 0.0
    repaired: bool = False  # True when files were changed (truncated, meta rewritten)
    # "used" when an index snapshot saved the replay of the bytes it covers (ADR 0046),
    # else why not ("missing", "bad checksum", ...); "" when none was looked for.
    snapshot: str = ""

    @property
    def clean(self) -> bool:
        return not self.findings

    @property
    def truncated(self) -> list[Finding]:
        return [f for f in self.findings if f.kind == "torn_tail"]

    @property
    def skipped(self) -> list[Finding]:
        return [f for f in self.findings if f.kind == "corrupt"]

    @property
    def truncated_bytes(self) -> int:
        return sum(f.length for f in self.truncated)

    @property
    def damaged_bytes(self) -> int:
        """Bytes of torn tails and corrupt regions: what the lost records occupied."""
        return sum(f.length for f in self.findings if f.kind in ("torn_tail", "corrupt"))

    def lost_seqs(self) -> list[int]:
        return [seq for lost in self.lost for seq in range(lost.first, lost.last + 1)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "clean": self.clean,
            "segments": self.segments,
            "records": self.records,
            "duration_s": self.duration_s,
            "repaired": self.repaired,
            "findings": [asdict(f) for f in self.findings],
            "lost": [asdict(lost) for lost in self.lost],
        }


# ---------------------------------------------------------------------- meta.json


# An open whose log holds this much or more returns its freed memory (`release_memory`).
RELEASE_AFTER_BYTES = 64 * 1024 * 1024


def _malloc_trim() -> Any:
    """glibc's `malloc_trim`, or None (another C library, or none found)."""
    name = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    except OSError:
        return None


_MALLOC_TRIM = _malloc_trim()


def release_memory(index: Index) -> bool:
    """Give the C heap's free pages back to the OS after opening a large store.

    An open allocates and frees large buffers (the snapshot's bytes, a segment's columns
    unpacked, a replay's reads); glibc serves them from its heap once its threshold for
    mapping big blocks on their own has grown past their size, and keeps the freed pages
    between the index's allocations: 10M stored messages left about 26 MB of them in the
    process's RSS (ADR 0058). `malloc_trim(0)` returns them (a few milliseconds); only
    after an open of a log of `RELEASE_AFTER_BYTES` or more. True when it was called."""
    if _MALLOC_TRIM is None or sum(s.size for s in index.segments) < RELEASE_AFTER_BYTES:
        return False
    _MALLOC_TRIM(0)
    return True


def read_meta(directory: Path) -> tuple[dict[str, Any] | None, str]:
    """(meta, "") when meta.json is valid, else (None, what is wrong with it)."""
    try:
        raw = (directory / META).read_bytes()
    except FileNotFoundError:
        return None, "missing"
    try:
        meta = json.loads(raw)
    except ValueError as exc:
        return None, f"not JSON ({exc})"
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        return None, f"not a {FORMAT_NAME} meta.json"
    version = meta.get("version")
    first_seq = meta.get("first_seq")
    if not isinstance(version, int) or not isinstance(first_seq, int) or first_seq < 1:
        return None, "version or first_seq missing or invalid"
    return meta, ""


def write_meta(directory: Path, first_seq: int, *, sync: bool = True) -> None:
    """Write meta.json atomically: temp file, fsync, rename, fsync the directory (without
    `sync`, a new store's: its first sync makes it durable, `FileStore.sync`)."""
    meta = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "first_seq": first_seq,
        "created_ns": time.time_ns(),
    }
    tmp = directory / META_TMP
    with open(tmp, "wb") as f:
        f.write(json.dumps(meta, indent=2).encode() + b"\n")
        f.flush()
        if sync:
            os.fsync(f.fileno())
    os.replace(tmp, directory / META)
    if sync:
        fsync_path(directory)


def fsync_path(path: Path) -> None:
    """fsync a file, or a directory (the entries of files created, renamed or removed in
    it), by its path."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def set_meta_aside(directory: Path) -> None:
    """Keep a damaged meta.json for humans instead of deleting it."""
    with contextlib.suppress(FileNotFoundError):
        os.replace(directory / META, directory / META_CORRUPT)


def lock_directory(directory: Path) -> int:
    """Open and exclusively flock() `LOCK`, so two stores (in this or another process) never
    append to the same log; the lock lasts until the returned descriptor is closed."""
    fd = os.open(directory / LOCK, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - no advisory locks on this platform
        return fd
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        raise StoreError(f"{directory} is open in another store ({exc})") from exc
    return fd


def prepare_directory(
    directory: Path, first_seq: int, report: RecoveryReport
) -> tuple[list[tuple[int, Path]], int, bool]:
    """Check meta.json (setting a damaged one aside and rewriting it), make sure `msgs/`
    exists; returns the segment files in log order, the store's configured first_seq, and
    whether the store is new (nothing was there). A new store's files are not fsynced
    here: it holds nothing to lose, and its first sync makes them durable before any
    message is (a store lost or cut short before that opens as new again)."""
    with contextlib.suppress(FileNotFoundError):
        (directory / META_TMP).unlink()
    msgs_dir = directory / MSGS
    entries = list_segments(msgs_dir, report)
    meta, problem = read_meta(directory)
    if meta is not None and meta["version"] > FORMAT_VERSION:
        raise StoreError(f"{directory}: format version {meta['version']} unsupported")
    new = meta is None and not entries and problem == "missing"
    if meta is None:
        if not new:
            report.findings.append(Finding("meta", META, detail=problem))
            set_meta_aside(directory)
            report.repaired = True
        write_meta(directory, first_seq, sync=not new)
    else:
        first_seq = meta["first_seq"]
    if not msgs_dir.is_dir():
        msgs_dir.mkdir()
        if not new:
            fsync_path(directory)
    return entries, first_seq, new


# ---------------------------------------------------------------------- segments


def list_segments(msgs_dir: Path, report: RecoveryReport) -> list[tuple[int, Path]]:
    """Segment files in log order; other files are reported and left alone."""
    found: list[tuple[int, Path]] = []
    if not msgs_dir.is_dir():
        return found
    for entry in os.scandir(msgs_dir):
        name = parse_segment_filename(entry.name)
        if name is None or not entry.is_file():
            report.findings.append(Finding("stray_file", f"{MSGS}/{entry.name}", detail="ignored"))
        else:
            found.append((name, Path(entry.path)))
    found.sort()
    return found


def replay(
    index: Index,
    segments: list[Segment],
    report: RecoveryReport,
    covered: list[int] | None = None,
) -> list[Segment]:
    """Rebuild `index` from the segments' records (storage-format.md 6.1 and 7); returns
    the segments that end in a torn tail (their `size` already excludes it; the files are
    left as they are). `covered`: per segment, the bytes an index snapshot already put in
    `index` (ADR 0046); replay continues after them."""
    torn: list[Segment] = []
    for i, seg in enumerate(segments):
        limit = segments[i + 1].name if i + 1 < len(segments) else None
        index.add_segment(seg)
        if _replay_segment(index, seg, limit, report, covered[i] if covered else 0):
            torn.append(seg)
        report.segments += 1
    if not index.messages:
        index.first = index.last + 1
    return torn


def _replay_segment(
    index: Index, seg: Segment, limit: int | None, report: RecoveryReport, begin: int = 0
) -> bool:
    """Replay one segment from offset `begin`; True when it ends in a torn tail."""
    label = f"{MSGS}/{seg.path.name}"
    findings = report.findings
    if seg.size == 0:
        if limit is not None:  # an empty sealed segment: its preamble never reached disk
            findings.append(Finding("preamble", label, 0, 0, "empty segment"))
        index.last = max(index.last, seg.name - 1)
        return False
    if begin < seg.size:
        index.warm(seg)  # loaded packed from a snapshot: records to add after its mark
    tail: Damage | None = None
    run = _Run(index, seg)
    with mmap.mmap(seg.fd, seg.size, access=mmap.ACCESS_READ) as buf:
        damaged = 0  # bytes skipped since the last valid record
        for item in scan(buf, seg.size, begin):
            if (
                not isinstance(item, Damage)
                and run.next_seq == item[3]
                and item[2] == T_MSG
                and not damaged
                and not item[5] & F_ERASED
                and (limit is None or item[3] < limit)
            ):  # the common case: the next plain message of a run (every check holds)
                report.records += 1
                run.add(buf, item)
                continue
            run.flush()
            if isinstance(item, Damage):
                damaged += item.length
                if item.tail:
                    tail = item
                else:
                    findings.append(
                        Finding("corrupt", label, item.offset, item.length, item.reason)
                    )
                continue
            report.records += 1
            off, length, rtype, seq, ts, flags, sl, hl, dl = item
            if off == 0:
                _check_preamble(index, seg, item, buf, label, findings)
            if rtype == T_MSG:
                expected = seg.next_seq()
                problem = _msg_problem(index, seg, limit, seq, damaged)
                if problem:
                    findings.append(Finding("sequence", label, off, length, problem))
                    continue
                if seq > expected:  # the jump is over damaged records: theirs are lost
                    report.lost.append(Lost(label, max(expected, index.last + 1), seq - 1))
                if flags & F_ERASED:
                    index.add_removed(seg, seq, ts)
                elif seq == expected:
                    run.add(buf, item)  # the start of a run
                else:
                    start = off + 36
                    subject = buf[start : start + sl].decode("utf-8", "surrogateescape")
                    lenfield = length | (HDR_BIT if hl else 0)
                    index.add(seg, seq, off, lenfield, ts, subject)
            elif rtype == T_DELETE:
                _lost_check(index, seq, off, length, label, report)
                for lo, hi in decode_ranges(buf, off, dl):
                    index.drop_range(lo, hi)
                    seg.note_external(lo, hi)
                index.last = max(index.last, seq)
            else:  # T_STATE
                last_seq, last_ts = decode_state(buf, off)
                if off:
                    _lost_check(index, last_seq, off, length, label, report)
                if seq > index.first:
                    index.drop_range(index.first, seq - 1)
                if last_seq >= index.last:
                    index.last, index.last_ts = last_seq, last_ts
                    if not index.messages:
                        index.first = index.last + 1
            damaged = 0
            index.last = max(index.last, seg.name - 1)
        run.flush()
        if tail is not None:
            _torn_record(index, seg, limit, buf, tail, label, report)
    if tail is not None:
        findings.append(Finding("torn_tail", label, tail.offset, tail.length, tail.reason))
        seg.size = tail.offset
    index.last = max(index.last, seg.name - 1)
    return tail is not None


class _Run:
    """Consecutive plain message records of one segment, indexed at once (`Index.add_run`,
    as a stored run is) instead of one `add` each: the replay's common case. A record
    joins only when every check of the one-by-one path is known to hold (the next
    sequence, no damage before it, not erased, below the next segment's name); anything
    else flushes the run first, so the index is exact whenever that path reads it."""

    __slots__ = ("headers", "index", "lens", "next_seq", "offs", "seg", "size", "subjects", "tss")

    def __init__(self, index: Index, seg: Segment) -> None:
        self.index = index
        self.seg = seg
        self.next_seq = -1  # no run: no record matches
        self.offs: array[int] = array("I")
        self.lens: array[int] = array("I")
        self.tss: array[int] = array("q")
        self.subjects: list[str] = []
        self.size = 0
        self.headers = 0

    def add(self, buf: mmap.mmap, item: tuple[int, ...]) -> None:
        off, length, _rtype, seq, ts, _flags, sl, hl, _dl = item
        if self.next_seq < 0:
            self.next_seq = seq
        self.next_seq += 1
        self.offs.append(off)
        self.lens.append(length | HDR_BIT if hl else length)
        self.tss.append(ts)
        self.subjects.append(buf[off + 36 : off + 36 + sl].decode("utf-8", "surrogateescape"))
        self.size += length
        self.headers += hl > 0
        if len(self.subjects) >= RUN_MAX:
            self.flush()

    def flush(self) -> None:
        if self.next_seq < 0:
            return
        first = self.next_seq - len(self.subjects)
        self.index.add_run(
            self.seg, first, self.offs, self.lens, self.tss, self.subjects, self.size, self.headers
        )
        self.next_seq = -1
        self.offs, self.lens, self.tss = array("I"), array("I"), array("q")
        self.subjects = []
        self.size = self.headers = 0


def _torn_record(
    index: Index,
    seg: Segment,
    limit: int | None,
    buf: mmap.mmap,
    tail: Damage,
    label: str,
    report: RecoveryReport,
) -> None:
    """A torn tail that begins with the header of this segment's next message (7.6): the
    message was assigned its sequence before the crash, so `last_seq` keeps it."""
    seq = claimed_seq(buf, tail.offset, tail.offset + tail.length)
    if seq is None or seq != seg.next_seq() or seq <= index.last:
        return
    if limit is not None and seq >= limit:
        return
    index.last = seq
    if not index.messages:
        index.first = seq + 1
    report.lost.append(Lost(label, seq, seq))


def _check_preamble(
    index: Index,
    seg: Segment,
    item: tuple[int, ...],
    buf: mmap.mmap,
    label: str,
    findings: list[Finding],
) -> None:
    rtype = item[2]
    if rtype != 3:
        findings.append(Finding("preamble", label, 0, item[1], "segment does not start with STATE"))
        return
    last_seq, _ts = decode_state(buf, 0)
    if last_seq != seg.name - 1:
        findings.append(
            Finding("preamble", label, 0, item[1], f"preamble last_seq {last_seq} != name - 1")
        )


def _msg_problem(index: Index, seg: Segment, limit: int | None, seq: int, damaged: int) -> str:
    """Why a valid MSG record cannot be this store's next message, or ""."""
    if seq <= index.last:
        return f"sequence {seq} not above last_seq {index.last}"
    if seq < seg.name:
        return f"sequence {seq} below the segment's name"
    if limit is not None and seq >= limit:
        return f"sequence {seq} not below the next segment's name {limit}"
    expected = seg.next_seq()
    # Consecutive within a segment; a jump only over damage that could have held the
    # missing records (each at least OVERHEAD bytes).
    if (seq - expected) * OVERHEAD > damaged:
        return f"sequence jumps from {expected} to {seq} over {damaged} damaged bytes"
    return ""


def _lost_check(
    index: Index, claimed_last: int, off: int, length: int, label: str, report: RecoveryReport
) -> None:
    """A DELETE/STATE record carries the writer's last_seq; more than the log has shown so
    far means records before it were lost."""
    if claimed_last > index.last:
        report.findings.append(
            Finding(
                "sequence",
                label,
                off,
                length,
                f"record says last_seq {claimed_last}, log so far reached {index.last}",
            )
        )
        report.lost.append(Lost(label, index.last + 1, claimed_last))
