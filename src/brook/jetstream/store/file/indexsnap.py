"""The index snapshot: the index saved at a clean close and periodically while the store
runs, so that an open loads it and replays only the log written after it (ADR 0046,
storage-format.md 12).

Only a cache: the log stays the authority. The snapshot records the *mark*, exactly which
log bytes it covers (per segment its name, covered length, inode, and the CRC field of
the last covered record); at open it is used only when every covered segment still
begins with those bytes (or is gone, having held nothing live), and the records after the
mark are replayed as usual. Anything else (missing, damaged, other version, a log that is
shorter or different) makes the caller replay everything.

Taking one is split so that the event loop only copies (`capture`: the columns' bytes,
the subject list) and a worker thread encodes, checksums and writes it (`Capture.encode`,
`write`); the store orders that against the writes that may change covered bytes.
"""

from __future__ import annotations

import contextlib
import os
import struct
import zlib
from array import array
from dataclasses import dataclass
from pathlib import Path

from brook.jetstream.store.file.coldfile import ColdFile
from brook.jetstream.store.file.index import Index, accounted
from brook.jetstream.store.file.packing import Packed, pack_bytes, unpack
from brook.jetstream.store.file.segment import DEAD, Segment
from brook.jetstream.store.file.subjects import Chunk, SubjectSeqs

SNAPSHOT = "index.snap"
SNAPSHOT_TMP = "index.snap.tmp"
MAGIC = b"BRKIDXS\n"
VERSION = 4  # 3: columns packed (ADR 0054); 4: subjects' frozen chunks (ADR 0058)

_HEAD = struct.Struct("<8sIQQqQQI")  # magic, version, first, last, last_ts, messages, bytes, nsegs
# name, base, size (covered), live, slots, ext, mtime_ns, inode, last CRC field, slot 0's
# timestamp, slots with a header, packed bytes
_SEG = struct.Struct("<QQQQQQqQIqQQ")
_MARK = struct.Struct(_SEG.format[:-3])  # `_SEG` less its last three fields
_PACKED = struct.Struct("<qQQ")
_SUBJ = struct.Struct("<II")  # names, multi entries
# sid, one, head, n seqs (0 and no chunks: single still), base, bytes per sequence, chunks
_MULTI = struct.Struct("<IQQQQBI")
# a frozen chunk (subjects.Chunk): base, first, last, count, packed bytes
_CHUNK = struct.Struct("<QQQQI")
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


@dataclass(slots=True)
class Capture:
    """The index at one moment, copied (`capture`), not yet encoded: immutable parts only
    (bytes, strings), so a worker thread encodes it while the store goes on."""

    head: bytes
    # Per segment its mark (less the packed length), and its columns: packed already, or
    # their bytes to pack; then its `ext` bytes.
    segments: list[tuple[bytes, Packed | tuple[bytes, ...], bytes]]
    names: list[str | None]  # the subject table's names by id (a copy of the list)
    single: bytes
    # sid, one, head, base, bytes per sequence, the sequences' bytes, and per frozen
    # chunk its `_CHUNK` head and packed bytes
    multi: list[tuple[int, int, int, int, int, bytes | None, list[bytes]]]
    # The index's cold file while this capture may read packed bytes from it (ADR 0061).
    pinned: ColdFile | None = None

    def release(self) -> None:
        """Encoded, or abandoned: the cold file's freed regions may go (`ColdFile.pin`)."""
        if self.pinned is not None:
            self.pinned.unpin()
            self.pinned = None

    def encode(self) -> bytes:
        """The snapshot file's bytes (storage-format.md 12)."""
        names = [
            (n.encode("utf-8", "surrogateescape") if n is not None else None) for n in self.names
        ]
        out = [self.head]
        for mark, columns, ext in self.segments:
            packed = columns if isinstance(columns, Packed) else pack_bytes(columns)
            out += [
                mark,
                _PACKED.pack(packed.ts0, packed.headed, packed.size),
                packed.data,  # read from the cold file if it is there (ADR 0061)
                ext,
            ]
        out.append(_SUBJ.pack(len(names), len(self.multi)))
        out.append(array("I", [_FREE if n is None else len(n) for n in names]).tobytes())
        out.append(b"".join([n for n in names if n is not None]))
        out.append(self.single)
        for sid, one, head, base, width, seqs, chunks in self.multi:
            n = len(seqs or b"") // width
            out.append(_MULTI.pack(sid, one, head, n, base, width, len(chunks) // 2))
            if seqs is not None:
                out.append(seqs)
            out += chunks
        body = b"".join(out)
        return body + _CRC.pack(zlib.crc32(body))


def capture(index: Index) -> Capture:
    """Copy `index`, whose segments' `size` are all covered (the caller makes those
    bytes durable before the snapshot is written). Costs a copy of the columns and one
    fstat and 4-byte read per segment: this runs on the event loop."""
    head = _HEAD.pack(
        MAGIC, VERSION, index.first, index.last, index.last_ts, index.messages, index.bytes,
        len(index.segments),
    )  # fmt: skip
    segments: list[tuple[bytes, Packed | tuple[bytes, ...], bytes]] = []
    for seg in index.segments:
        crc = _last_crc(seg, seg.size)
        if crc is None:
            raise OSError(f"{seg.path} is shorter than its indexed {seg.size} bytes")
        st = os.fstat(seg.fd)
        mark = _MARK.pack(
            seg.name, seg.base, seg.size, seg.live, seg.end_seq() - seg.base, len(seg.ext),
            st.st_mtime_ns, st.st_ino, crc,
        )  # fmt: skip
        if seg.packed is None:
            seg.trim()  # the columns' spare room is not saved (it grows back)
        columns: Packed | tuple[bytes, ...] = seg.packed or tuple(
            column.tobytes() for column in (seg.offs, seg.lens, seg.tss, seg.sids)
        )
        segments.append((mark, columns, seg.ext.tobytes()))
    subjects = index.subjects
    multi: list[tuple[int, int, int, int, int, bytes | None, list[bytes]]] = [
        (sid, e._one, e._head, e._base, 4, None, [])
        if (seqs := e._seqs) is None
        else (sid, e._one, e._head, e._base, seqs.itemsize, seqs.tobytes(), _chunks(e))
        for sid, e in subjects._multi.items()
    ]
    cold = index.cold
    if cold is not None:
        cold.pin()
    return Capture(head, segments, list(subjects.names), subjects._single.tobytes(), multi, cold)


def _chunks(entry: SubjectSeqs) -> list[bytes]:
    """`entry`'s frozen chunks, each as its `_CHUNK` head and its packed bytes."""
    out: list[bytes] = []
    for c in entry._cold or ():
        data = c.encoded()
        out += [_CHUNK.pack(c.base, c.first, c.last, c.count, len(data)), data]
    return out


def encode(index: Index) -> bytes:
    """The snapshot of `index` (`capture`, then `Capture.encode`)."""
    return capture(index).encode()


def write_temp(directory: Path, data: bytes) -> Path:
    """`data` in the temp file, fsynced; `install` then renames it into place (a crash
    leaves the old snapshot or the new one, and either is checked against the log)."""
    tmp = directory / SNAPSHOT_TMP
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return tmp


def install(tmp: Path) -> None:
    os.replace(tmp, tmp.with_name(SNAPSHOT))


def write(directory: Path, index: Index) -> None:
    """Save `index` atomically (`write_temp`, `install`)."""
    install(write_temp(directory, encode(index)))


def remove(directory: Path, *, temp: bool = True) -> bool:
    """Drop the snapshot (and with `temp`, a temp file left by a crash); True if there
    was one."""
    removed = False
    for name in (SNAPSHOT, SNAPSHOT_TMP) if temp else (SNAPSHOT,):
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
            seg.base, seg.live, seg.packed = seg.name, 0, None
            seg.set_columns((array("I"), array("I"), array("q"), array("I")))
            seg.ext = array("Q")
        index.subjects.clear()
        if isinstance(exc, SnapshotMismatch):
            raise
        raise SnapshotMismatch(f"malformed ({exc})") from None


def _check_mark(seg: Segment, size: int, mtime: int, inode: int, crc: int) -> None:
    """Does `seg` still begin with the `size` bytes the snapshot covers? The same file
    (inode), at least as long, the same last covered record (its CRC field), and when
    nothing was appended since, not written since (mtime). Bytes the store rewrites in
    place (erase, a cut) remove the snapshot first (`FileStore._invalidate_snapshot`)."""
    if seg.size < size:
        raise SnapshotMismatch(f"segment {seg.name} is {seg.size} bytes, covered {size}")
    st = os.fstat(seg.fd)
    if st.st_ino != inode or _last_crc(seg, size) != crc:
        raise SnapshotMismatch(f"segment {seg.name} changed since the snapshot")
    if seg.size == size and st.st_mtime_ns != mtime:
        raise SnapshotMismatch(f"segment {seg.name} changed since the snapshot")


def _load(raw: bytes, index: Index, segments: list[Segment]) -> list[int]:
    view = memoryview(raw)
    _m, version, first, last, last_ts, messages, nbytes, nsegs = _HEAD.unpack_from(raw, 0)
    if version != VERSION:
        raise SnapshotMismatch(f"version {version}, not {VERSION}")
    pos = _HEAD.size
    by_name = {seg.name: i for i, seg in enumerate(segments)}
    covered = [0] * len(segments)
    gone: list[tuple[int, Packed]] = []  # deleted segments' base and columns
    seen = 0  # log segments covered so far: they must be the log's first ones, in order
    last_name = -1
    for _ in range(nsegs):
        name, base, size, live, slots, ext, mtime, inode, crc, ts0, headed, n = _SEG.unpack_from(
            raw, pos
        )
        pos += _SEG.size
        packed = Packed(slots, bytes(view[pos : pos + n]), ts0, headed)
        pos += n
        end = pos + 8 * ext
        last_name = name
        i = by_name.get(name)
        if i is None:
            # Deleted after the snapshot: the store deletes a segment only once nothing
            # in it is live and the records saying so are durable, so its messages go
            # (as a full replay never sees them). Not before the subjects are loaded.
            if live:
                gone.append((base, packed))
            pos = end
            continue
        if i != seen:
            raise SnapshotMismatch(f"segment {segments[seen].name} is not in the snapshot")
        seen += 1
        seg = segments[i]
        _check_mark(seg, size, mtime, inode, crc)
        seg.base, seg.live = base, live
        seg.packed = packed  # `Index.add_segment` unpacks the last one
        seg.ext = _arr("Q", view[pos:end])
        pos = end
        covered[i] = size
    if seen < len(segments) and segments[seen].name <= last_name:
        raise SnapshotMismatch(f"segment {segments[seen].name} is not in the snapshot")
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
        sid, one, head, n, base, width, nchunks = _MULTI.unpack_from(raw, pos)
        pos += _MULTI.size
        name = subjects.names[sid]
        if name is None:
            raise SnapshotMismatch(f"subject id {sid} is free")
        entry = SubjectSeqs(name, sid, one)
        entry._base = base
        if n or nchunks:  # no sequences in the tail and some in chunks: an empty tail
            if width not in (4, 8):
                raise SnapshotMismatch(f"subject id {sid}: {width} bytes per sequence")
            entry._seqs = _arr("I" if width == 4 else "Q", view[pos : pos + width * n])
            pos += width * n
        entry._head = head
        if nchunks:
            entry._cold = []
            for _ in range(nchunks):
                cbase, cfirst, clast, count, size = _CHUNK.unpack_from(raw, pos)
                pos += _CHUNK.size
                if not count or len(view) < pos + size:
                    raise SnapshotMismatch(f"subject id {sid}: a damaged chunk")
                entry._cold.append(
                    Chunk(cbase, cfirst, clast, count, bytes(view[pos : pos + size]))
                )
                entry._ncold += count
                pos += size
        subjects._multi[sid] = entry
    if pos != len(raw) - 4:
        raise SnapshotMismatch("trailing bytes")
    index.first, index.last, index.last_ts = first, last, last_ts
    index.messages, index.bytes = messages, nbytes
    for base, packed in gone:
        _forget(index, base, packed)
    return covered


def _forget(index: Index, base: int, packed: Packed) -> None:
    """Take the live messages of a deleted segment (its columns `packed`) out of
    `index`'s subjects and counters; `first` is set right once the log's segments are
    in the index (`Index.advance_first`, after the replay)."""
    offs, lens, _tss, sids = unpack(packed)
    for k, off in enumerate(offs):
        if off != DEAD:
            index.subjects.remove(sids[k], base + k)
            index.messages -= 1
            index.bytes -= accounted(lens[k])
