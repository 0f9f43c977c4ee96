"""The index snapshot: the replayed index saved at a clean close, so the next open loads
it instead of replaying the whole log (ADR 0046, storage-format.md 12).

Only a cache: the log stays the authority. The snapshot records the *mark*, exactly which
log bytes it covers (each segment's name and covered length, the CRC field of the last
covered record); at open it is used only when the log still begins with those bytes, and
the records after the mark are replayed as usual. Anything else (missing, damaged, other
version, a log that is shorter or different) makes the caller replay everything.
"""

from __future__ import annotations

import contextlib
import os
import struct
import zlib
from array import array
from pathlib import Path

from brook.jetstream.store.file.index import Index
from brook.jetstream.store.file.segment import Segment
from brook.jetstream.store.file.subjects import SubjectSeqs

SNAPSHOT = "index.snap"
SNAPSHOT_TMP = "index.snap.tmp"
MAGIC = b"BRKIDXS\n"
VERSION = 1

_HEAD = struct.Struct("<8sIQQqQQI")  # magic, version, first, last, last_ts, messages, bytes, nsegs
# name, base, size (covered), live, slots, ext, mtime_ns, last CRC field
_SEG = struct.Struct("<QQQQQQqI")
_SUBJ = struct.Struct("<II")  # names, multi entries
_MULTI = struct.Struct("<IQQQ")  # sid, one, head, n seqs (0: single still)
_CRC = struct.Struct("<I")
_FREE = 0xFFFFFFFF


class SnapshotMismatch(Exception):
    """Why a snapshot cannot be used (the text goes into the log line)."""


def _arr(typecode: str, data: memoryview | bytes) -> array[int]:
    a = array(typecode)
    a.frombytes(data)
    return a


def _last_crc(seg: Segment, size: int) -> int | None:
    """The CRC field ending at `size` (the last covered record's), 0 for an empty
    segment, None when the file is shorter."""
    if size < 4:
        return 0
    raw = os.pread(seg.fd, 4, size - 4)
    return _CRC.unpack(raw)[0] if len(raw) == 4 else None


def encode(index: Index) -> bytes:
    """The snapshot of `index`, whose segments' `size` are all covered."""
    out = [
        _HEAD.pack(
            MAGIC, VERSION, index.first, index.last, index.last_ts, index.messages,
            index.bytes, len(index.segments),
        )
    ]  # fmt: skip
    for seg in index.segments:
        crc = _last_crc(seg, seg.size)
        if crc is None:
            raise OSError(f"{seg.path} is shorter than its indexed {seg.size} bytes")
        mtime = os.fstat(seg.fd).st_mtime_ns
        out.append(
            _SEG.pack(
                seg.name, seg.base, seg.size, seg.live, len(seg.offs), len(seg.ext), mtime, crc
            )
        )
        out += (seg.offs.tobytes(), seg.lens.tobytes(), seg.tss.tobytes(), seg.sids.tobytes())
        out.append(seg.ext.tobytes())
    subjects = index.subjects
    names = [
        (n.encode("utf-8", "surrogateescape") if n is not None else None) for n in subjects.names
    ]
    multi = subjects._multi
    out.append(_SUBJ.pack(len(names), len(multi)))
    out.append(array("I", (_FREE if n is None else len(n) for n in names)).tobytes())
    out.append(b"".join(n for n in names if n is not None))
    out.append(subjects._single.tobytes())
    for sid, entry in multi.items():
        seqs = entry._seqs
        out.append(_MULTI.pack(sid, entry._one, entry._head, 0 if seqs is None else len(seqs)))
        if seqs is not None:
            out.append(seqs.tobytes())
    body = b"".join(out)
    return body + _CRC.pack(zlib.crc32(body))


def write(directory: Path, index: Index) -> None:
    """Save `index` atomically: temp file, fsync, rename (a crash leaves the old snapshot
    or the new one, and either is checked against the log at open)."""
    tmp = directory / SNAPSHOT_TMP
    with open(tmp, "wb") as f:
        f.write(encode(index))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, directory / SNAPSHOT)


def remove(directory: Path) -> bool:
    """Drop the snapshot (and a temp file left by a crash); True if there was one."""
    removed = False
    for name in (SNAPSHOT, SNAPSHOT_TMP):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(directory / name)
            removed = True
    return removed


def load(directory: Path, index: Index, segments: list[Segment]) -> list[int]:
    """Fill the empty `index`'s counters and subjects and `segments`' columns from the
    snapshot (`replay` then adds the segments), `segments` being the log's open segment
    files in order; returns the covered length of each segment (0 for segments newer than
    the snapshot), from which replay continues. Raises SnapshotMismatch when the snapshot
    is missing, damaged, of another version, or the log does not begin with what it
    covers; `index` must then be discarded."""
    try:
        raw = (directory / SNAPSHOT).read_bytes()
    except FileNotFoundError:
        raise SnapshotMismatch("missing") from None
    if len(raw) < _HEAD.size + 4 or raw[:8] != MAGIC:
        raise SnapshotMismatch("not an index snapshot")
    if zlib.crc32(memoryview(raw)[:-4]) != _CRC.unpack_from(raw, len(raw) - 4)[0]:
        raise SnapshotMismatch("bad checksum")
    try:
        return _load(raw, index, segments)
    except (SnapshotMismatch, struct.error, ValueError, IndexError, UnicodeError) as exc:
        for seg in segments:  # back to freshly opened, for the full replay
            seg.base, seg.live = seg.name, 0
            seg.offs, seg.lens, seg.tss = array("I"), array("I"), array("q")
            seg.sids, seg.ext = array("I"), array("Q")
        index.subjects.clear()
        if isinstance(exc, SnapshotMismatch):
            raise
        raise SnapshotMismatch(f"malformed ({exc})") from None


def _load(raw: bytes, index: Index, segments: list[Segment]) -> list[int]:
    view = memoryview(raw)
    _m, version, first, last, last_ts, messages, nbytes, nsegs = _HEAD.unpack_from(raw, 0)
    if version != VERSION:
        raise SnapshotMismatch(f"version {version}, not {VERSION}")
    if nsegs != len(segments):
        raise SnapshotMismatch(f"{nsegs} segments covered, the log has {len(segments)}")
    pos = _HEAD.size
    covered: list[int] = []
    for i in range(nsegs):
        name, base, size, live, slots, ext, mtime, crc = _SEG.unpack_from(raw, pos)
        pos += _SEG.size
        seg = segments[i]
        if seg.name != name:
            raise SnapshotMismatch(f"segment {seg.name} where the snapshot has {name}")
        if seg.size != size:
            raise SnapshotMismatch(f"segment {name} is {seg.size} bytes, covered {size}")
        if os.fstat(seg.fd).st_mtime_ns != mtime or _last_crc(seg, size) != crc:
            raise SnapshotMismatch(f"segment {name} changed since the snapshot")
        seg.base, seg.live = base, live
        for column, width in (("offs", 4), ("lens", 4), ("tss", 8), ("sids", 4)):
            current = getattr(seg, column)
            end = pos + width * slots
            setattr(seg, column, _arr(current.typecode, view[pos:end]))
            pos = end
        seg.ext = _arr("Q", view[pos : pos + 8 * ext])
        pos += 8 * ext
        covered.append(size)
    subjects = index.subjects
    nnames, nmulti = _SUBJ.unpack_from(raw, pos)
    pos += _SUBJ.size
    lens = _arr("I", view[pos : pos + 4 * nnames])
    pos += 4 * nnames
    for sid, length in enumerate(lens):
        if length == _FREE:
            subjects.names.append(None)
            subjects._free.append(sid)
            continue
        name = bytes(view[pos : pos + length]).decode("utf-8", "surrogateescape")
        pos += length
        subjects.names.append(name)
        subjects.by_name[name] = sid
    subjects._single = _arr("Q", view[pos : pos + 8 * nnames])
    pos += 8 * nnames
    for _ in range(nmulti):
        sid, one, head, n = _MULTI.unpack_from(raw, pos)
        pos += _MULTI.size
        name = subjects.names[sid]
        if name is None:
            raise SnapshotMismatch(f"subject id {sid} is free")
        entry = SubjectSeqs(name, sid, one)
        if n:
            entry._seqs = _arr("Q", view[pos : pos + 8 * n])
            pos += 8 * n
        entry._head = head
        subjects._multi[sid] = entry
    if pos != len(raw) - 4:
        raise SnapshotMismatch("trailing bytes")
    index.first, index.last, index.last_ts = first, last, last_ts
    index.messages, index.bytes = messages, nbytes
    return covered
