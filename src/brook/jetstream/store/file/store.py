"""`FileStore`: the durable `MessageStore`, an append-only log of checksummed records.

The on-disk format is docs/storage-format.md; this module is the writer. Every change is a
record appended to the active segment before the in-memory index (`index.py`) changes, so a
failed write leaves the index as it was, and the index is always what replaying the log
would give. Its parts (ADR 0031): the reads (`store_reads.py`: a slot found in the
index, the bytes left to `reader.py`), the sequence gaps and cuts (`store_gaps.py`) and the
reclaiming of emptied segments (`store_reclaim.py`). Compiled by mypyc (ADR 0065),
`FileStore` is a native class and its parts are traits (`store_core.py` declares what
they use of it): no attribute may be added to a store, nor a method replaced.

Threads: every method but `sync()` runs on the event loop. `sync()` may run in a worker
thread at the same time (group commit). They share three things, guarded by `_lock`: the set
of segments written since the last sync, whether the directory changed, and the segments
waiting to be deleted. `sync()` takes a snapshot of those under the lock and does the slow
fsyncs without it. A segment's descriptor is only ever closed by a sync (or close) that
started after the segment left the index, and syncs are serialised (`_sync_lock`), so no
fsync ever sees a closed descriptor.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import operator
import os
import threading
import time
from array import array
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from brook import limits
from brook.jetstream.store.base import (
    LostData,
    NewMessage,
    PurgeResult,
    RecordSpan,
    StoreError,
    StoreFullError,
    add_lost,
    write_error,
)
from brook.jetstream.store.file import format as fmt
from brook.jetstream.store.file import indexsnap
from brook.jetstream.store.file import queries as q
from brook.jetstream.store.file.coldfile import ColdFile
from brook.jetstream.store.file.frozen import FrozenLog
from brook.jetstream.store.file.index import HOT_SEGMENTS_DEFAULT, Index
from brook.jetstream.store.file.reader import Reader
from brook.jetstream.store.file.recovery import (
    META,
    MSGS,
    RecoveryReport,
    fsync_path,
    lock_directory,
    prepare_directory,
    release_memory,
    replay,
)
from brook.jetstream.store.file.segment import HDR_BIT, LEN_MASK, MAX_SEGMENT_BYTES, Segment
from brook.jetstream.store.file.store_gaps import StoreGaps
from brook.jetstream.store.file.store_reads import StoreReads
from brook.jetstream.store.file.store_reclaim import SegmentReclaim
from brook.jetstream.store.filters import compile_filter

log = logging.getLogger(__name__)

SEGMENT_BYTES_MAX_DEFAULT: Final = 64 * 1024 * 1024
# A `NewMessage`'s fields, as `store_run` indexes a run's messages.
_SUBJECT, _HEADER, _TS = operator.itemgetter(0), operator.itemgetter(1), operator.itemgetter(3)


def _copied(
    spans: Sequence[RecordSpan], seq: int, n: int
) -> tuple[bytes, array[int], array[int]] | None:
    """The records of sequences `seq .. seq + n - 1` as `spans` hold them (read and
    checked by a file store: `Reader._read_run`), in one piece of bytes, with their
    length and timestamp columns; None unless the spans cover every one of them. A record
    holds its sequence and timestamp: stored at the same sequence, its bytes are the
    record `encode_messages` would make of the message read from it (ADR 0035)."""
    pieces: list[bytes] = []
    lens = array("I")
    tss = array("q")
    end = seq + n
    for span in spans:
        count = len(span.offs)
        lo = seq - span.first_seq
        if lo >= count:
            continue  # before them
        if lo < 0:
            return None  # one of them is in no span
        hi = min(end - span.first_seq, count)
        offs, sizes, start = span.offs, span.lens[lo:hi], span.start
        a = offs[lo] - start
        b = offs[hi - 1] - start + (sizes[-1] & LEN_MASK)
        # Back to back, as usual, when their lengths add up to `b - a`: the header bits
        # add multiples of 2**31, and a span is far shorter than that.
        if (sum(sizes) - (b - a)) % HDR_BIT == 0:
            pieces.append(span.data[a:b])
        else:  # other records (tombstones) between them
            pieces += (
                span.data[o - start : o - start + (size & LEN_MASK)]
                for o, size in zip(offs[lo:hi], sizes, strict=True)
            )
        lens += sizes
        tss += span.tss[lo:hi]
        seq += hi - lo
        if seq == end:
            return b"".join(pieces) if len(pieces) > 1 else pieces[0], lens, tss
    return None


def _holds(
    copied: tuple[bytes, array[int], array[int]], i: int, messages: Sequence[NewMessage]
) -> bool:
    """Is record `i` of `copied` (`_copied`) as long and as old as message `i`'s would be?"""
    subject, header, data, ts_ns = messages[i]
    size = fmt.OVERHEAD + len(subject.encode()) + len(header or b"") + len(data)
    return copied[1][i] & LEN_MASK == size and copied[2][i] == ts_ns


class FileStore(StoreReads, StoreGaps, SegmentReclaim):
    """A stream's messages in `directory` (created if needed). See the module docstring.

    `segment_bytes_max`: roll to a new segment file past this size; `segment_slots_max`:
    or at this many message slots (ADR 0061: its index columns stay small). `fsync`: when False,
    `sync()` does not fsync (the data is in the OS; it survives a process crash, not a
    power loss). `index_hot_segments`: sealed segments whose index columns stay unpacked
    (ADR 0054). `write_buffer_bytes` (0 unless `buffer_writes` says otherwise: every
    append reaches the OS before `store` returns): appends wait in memory until a sync
    (or `flush`) writes them, or until this many are pending (segment.py, ADR 0051),
    their disk space reserved `preallocate_bytes` ahead. `recovery_report` says what
    opening the directory found and repaired.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        first_seq: int = 1,
        *,
        segment_bytes_max: int = SEGMENT_BYTES_MAX_DEFAULT,
        fsync: bool = True,
        index_hot_segments: int = HOT_SEGMENTS_DEFAULT,
        segment_slots_max: int = limits.SEGMENT_SLOTS,
        write_buffer_bytes: int = 0,
        preallocate_bytes: int = limits.STORE_PREALLOCATE_BYTES,
    ) -> None:
        if first_seq < 1:
            raise ValueError(f"first_seq must be >= 1, got {first_seq}")
        if not 0 < segment_bytes_max <= MAX_SEGMENT_BYTES:
            raise ValueError(f"segment_bytes_max must be 1..{MAX_SEGMENT_BYTES}")
        if segment_slots_max < 1:
            raise ValueError(f"segment_slots_max must be >= 1, got {segment_slots_max}")
        self.directory = Path(directory)
        self._msgs_dir = self.directory / MSGS
        self._segment_bytes_max = segment_bytes_max
        self._segment_slots_max = segment_slots_max
        self._fsync = fsync
        self._lock = threading.Lock()  # guards the three fields below
        self._dirty: set[Segment] = set()  # written since the last sync
        self._dir_dirty = False  # segment files created since the last sync
        self._doomed: list[Segment] = []  # out of the index, to unlink at the next sync
        # A new store's directory and those naming it: its first sync makes them and its
        # meta.json durable (`_open`).
        self._unsynced: list[Path] = []
        self._sync_lock = threading.Lock()  # one sync (or close) at a time
        self._candidates: list[Segment] = []  # sealed segments that may hold nothing live
        self._failed: OSError | None = None  # an fsync failed: nothing is durable any more
        # The active segment must not take appends (last_seq is past its next message:
        # a torn record kept its sequence, or `skip_to`, 7.6) and rolling away from it
        # failed for lack of space: the next append rolls first.
        self._roll_owed = False
        self._lost: LostData | None = None  # found lost at open, or skipped (`skip_to`)
        # Called (on the event loop) when segments wait for a sync to be deleted, so the
        # owner can sync soon and free their space (the engine asks its group commit).
        self.on_reclaim: Callable[[], None] | None = None
        self._closed = False
        self._frozen: list[FrozenLog] = []  # open point-in-time views (`freeze`)
        self.syncs = 0
        # Index snapshots (ADR 0046): one written at a time (`_snap_write_lock`, held while
        # encoding and writing); `_snap_gen` counts the changes that make a snapshot being
        # written stale (a rewrite of covered bytes, a close), checked under `_snap_lock`
        # before it is renamed into place. `_snap_key` says what the last one covered.
        self._snap_lock = threading.Lock()
        self._snap_write_lock = threading.Lock()
        self._snap_gen = 0
        self._snap_key: tuple[Any, ...] | None = None
        self.index_snapshots = 0  # written by this store
        self._index = Index(first_seq, index_hot_segments)
        self._reader: Reader  # reads `_index`'s messages; made with it (`_open`)
        self._active: Segment
        created = []  # the directories made here, innermost first
        missing = self.directory
        while not missing.exists():
            created.append(missing)
            missing = missing.parent
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock_fd = lock_directory(self.directory)
        try:
            self.recovery_report = self._open(first_seq, [d.parent for d in created])
        except BaseException:
            for seg in self._index.segments:
                seg.close()
            os.close(self._lock_fd)
            raise
        if write_buffer_bytes:
            self.buffer_writes(write_buffer_bytes, preallocate_bytes)

    # ------------------------------------------------------------------ opening

    def _open(self, first_seq: int, parents: list[Path]) -> RecoveryReport:
        """`parents`: the directories that got an entry when the store's was created."""
        started = time.monotonic()
        report = RecoveryReport()
        try:
            entries, first_seq, new = prepare_directory(self.directory, first_seq, report)
        except OSError as exc:
            raise write_error(f"cannot prepare {self.directory}", exc) from exc
        # With a log, the log alone decides the sequences (its preambles carry first_seq).
        self._index = index = Index(1 if entries else first_seq, self._index.hot_max)
        self._reader = Reader(index)
        segments: list[Segment] = []
        try:
            for name, path in entries:
                segments.append(Segment.open(path, name, writable=True))
            covered = self._load_snapshot(index, segments, report) if entries else None
            torn = replay(index, segments, report, covered)
            if covered is not None:
                index.advance_first()  # past the messages of segments deleted since
        except BaseException:
            for seg in segments:
                seg.close()
            raise
        if report.lost:
            self._lost = add_lost(None, report.lost_seqs(), report.damaged_bytes)
        if not index.segments:
            self._roll()
        else:
            self._active = active = index.segments[-1]
            index.warm(active)  # loaded packed from a snapshot: appends go to it
            active.activate(self._segment_bytes_max, self._segment_slots_max)
            if active.next_seq() != index.last + 1:
                # Message slots are consecutive within a segment; and when a torn record
                # kept its sequence (7.6), the new segment's name records it durably.
                try:
                    self._roll()
                except StoreFullError:
                    self._roll_owed = True  # no appends until there is room (7.6)
            self._candidates = [s for s in index.segments[:-1] if not s.live]
        self._reclaim()
        self._keep_cold(index)
        release_memory(index)  # the open's transient buffers (ADR 0058)
        if new:
            # Nothing to lose yet: creating a stream costs no fsync here; the first sync
            # (the group commit of the first message) makes the new files durable first.
            self._unsynced = [self.directory, *parents]
        else:
            self.sync()
        # Torn tails go once the log's last_seq is durable without them (7.1); one in the
        # active segment the store could not roll away from stays until the next open, and
        # a segment deleted meanwhile (nothing live) needs no cut.
        for seg in torn:
            if not seg.doomed and (seg is not self._active or not self._roll_owed):
                seg.truncate(seg.size)
                os.fsync(seg.fd)
                report.repaired = True
        report.duration_s = time.monotonic() - started
        return report

    def _keep_cold(self, index: Index) -> None:
        """Packed segments' bytes kept in a file from now on (ADR 0061); in memory where
        the directory cannot hold one."""
        try:
            cold = ColdFile(self.directory)
        except OSError as exc:
            log.warning("%s: packed index kept in memory (%s)", self.directory, exc)
            return
        index.keep_cold(cold)

    def _load_snapshot(
        self, index: Index, segments: list[Segment], report: RecoveryReport
    ) -> list[int] | None:
        """The index snapshot's covered bytes per segment, `index` filled from it, or None
        (full replay) with one log line saying why (ADR 0046). The snapshot is removed
        once read: this store writes its own (periodically and at close), and may cut
        torn tails before the first."""
        try:
            covered = indexsnap.load(self.directory, index, segments)
            report.snapshot = "used"
        except indexsnap.SnapshotMismatch as exc:
            covered = None
            report.snapshot = str(exc)
            if report.snapshot != "missing":
                log.warning(
                    "%s: index snapshot not used (%s): replaying the log", self.directory, exc
                )
        if report.snapshot != "missing" and indexsnap.remove(self.directory):
            fsync_path(self.directory)
        return covered

    # ------------------------------------------------------------------ writing

    def store(self, subject: str, header: bytes | None, data: bytes, ts_ns: int) -> int:
        if self._closed or self._failed is not None:  # `_check_writable`, inline: per publish
            self._check_writable()
        index = self._index
        seq = index.last + 1
        hdr = header or b""
        try:
            record = fmt.encode_message(seq, ts_ns, subject.encode(), hdr, data)
        except fmt.RecordError as exc:
            raise StoreError(f"cannot store message: {exc}") from exc
        # `_append_record`'s usual case inline (a frame per publish, ADR 0062): a segment
        # with its preamble and room for the record, its slots below their cap (ADR 0061:
        # `roll_size` is 0 then). As there: written first, then marked dirty, so a sync
        # taking the dirty set meanwhile still covers the write.
        seg = self._active
        offset = seg.size
        if (
            offset
            and offset < seg.roll_size
            and offset + len(record) <= MAX_SEGMENT_BYTES
            and not self._roll_owed
        ):
            try:
                seg.buffer(record)
            except OSError as err:  # not `exc`: mypyc types a name by its first except
                seg.drop_unfinished()
                raise write_error(f"{seg.path}: write failed", err) from err
            if seg not in self._dirty:
                with self._lock:
                    self._dirty.add(seg)
        else:
            seg = self._append_record(record)
            offset = seg.size - len(record)
        lenfield = len(record) | (HDR_BIT if hdr else 0)
        index.add(seg, seq, offset, lenfield, ts_ns, subject)
        if self._candidates:
            self._reclaim()
        return seq

    def store_run(self, messages: Sequence[NewMessage], spans: Sequence[RecordSpan] = ()) -> None:
        """As `store` for each message, with one write per segment: the records are
        encoded at once (`encode_messages`), or taken as they are from `spans` when
        those cover these sequences (a mirror's origin read them: `_copied`), appended
        at once and then indexed at once (`Index.add_run`). A segment is rolled where
        `store` would roll it (before a record that finds it full). A message that
        cannot be encoded raises `StoreError` once those before it are stored."""
        self._check_writable()
        seq = self._index.last + 1
        copied = _copied(spans, seq, len(messages)) if spans else None
        if copied is not None and not (
            _holds(copied, 0, messages) and _holds(copied, -1, messages)
        ):
            copied = None  # not the records of these messages: a caller's mistake
        error = ""
        if copied is not None:
            blob, lens, tss = copied
        else:
            records, error = fmt.encode_messages(seq, messages)
            blob = b"".join(records)
            # The columns by maps rather than a loop: a mirror's catch-up stores thousands.
            lens = array("I", map(len, records))
            news = messages[: len(records)]
            if any(map(_HEADER, news)):
                for i, header in enumerate(map(_HEADER, news)):
                    if header:
                        lens[i] |= HDR_BIT
            tss = array("q", map(_TS, news))
        if lens:
            self._append_runs(blob, lens, tss, messages)
        if self._candidates:
            self._reclaim()
        if error:
            raise StoreError(f"cannot store message: {error}")

    def _append_runs(
        self, blob: bytes, lens: array[int], tss: array[int], messages: Sequence[NewMessage]
    ) -> None:
        """`blob`, the records of `messages` (their `lens` and `tss` columns), appended in
        one piece per segment it goes to, each piece then indexed (`_append_run`)."""
        written = self._active.size
        slots = self._active.count
        limit = self._segment_bytes_max
        slots_max = self._segment_slots_max
        total = len(blob)
        if (
            written + total - (lens[-1] & LEN_MASK) < limit
            and written + total <= MAX_SEGMENT_BYTES
            and slots + len(lens) <= slots_max
        ):
            self._append_run(blob, lens, tss, messages)  # no record finds the segment full
            return
        start = 0  # the first record of the piece going to the active segment
        at = 0  # where that piece starts in `blob`
        pending = 0  # its bytes
        for i, size in enumerate(map(LEN_MASK.__and__, lens)):
            end = written + pending
            if i > start and (
                end >= limit or end + size > MAX_SEGMENT_BYTES or slots + i - start >= slots_max
            ):
                piece = slice(start, i)
                self._append_run(blob[at : at + pending], lens[piece], tss[piece], messages[piece])
                start, at, pending = i, at + pending, 0
                written, slots = self._active.size, self._active.count
            pending += size
        piece = slice(start, len(lens))
        self._append_run(blob[at:], lens[piece], tss[piece], messages[piece])

    def _append_run(
        self, chunk: bytes, lens: array[int], tss: array[int], messages: Sequence[NewMessage]
    ) -> None:
        """One append of `chunk`, the records of `messages`, then their index entries."""
        seg = self._append_record(chunk)
        offs = array(
            "I",
            itertools.accumulate(map(LEN_MASK.__and__, lens[:-1]), initial=seg.size - len(chunk)),
        )
        headers = (sum(lens) - len(chunk)) // HDR_BIT  # the header bits in the lengths
        subjects = list(map(_SUBJECT, messages[: len(lens)]))
        index = self._index
        index.add_run(seg, index.last + 1, offs, lens, tss, subjects, len(chunk), headers)

    def remove(self, seq: int, *, erase: bool = False) -> bool:
        self._check_writable()
        loc = self._index.locate(seq)
        if loc is None:
            return False
        seg, k = loc
        if erase:
            self._erase(seg, k)
        self._append_delete([(seq, seq)], erase=erase)
        self._index.drop(seg, k)
        self._note_emptied(seg)
        self._reclaim()
        return True

    def purge(
        self, *, subject: str | None = None, up_to_seq: int = 0, keep: int = 0
    ) -> PurgeResult:
        self._check_writable()
        index = self._index
        flt = compile_filter(subject)
        if flt.match_all and up_to_seq <= 0 and keep <= 0:
            removed: list[int] = []
            if index.messages:
                self._append_delete([(index.first, index.last)])
                removed = index.clear()
                self._candidates.extend(s for s in index.segments if s is not self._active)
            self._reclaim_emptied()  # also when already empty: retries a reclaim put off
            return PurgeResult(purged=len(removed), removed_seqs=removed)
        if flt.match_all:
            victims = q.all_victims(index, up_to_seq, keep)
            ranges = [(victims[0], victims[-1])] if victims else []
        else:
            victims = q.filtered_victims(index, flt, up_to_seq, keep)
            ranges = q.runs(victims)
        self._remove_all(victims, ranges)
        return PurgeResult(purged=len(victims), removed_seqs=victims)

    def expire_before(self, ts_ns: int) -> list[int]:
        # Timestamps are non-decreasing in sequence order (base.py): expired is a prefix.
        self._check_writable()
        victims = q.expired(self._index, ts_ns)
        self._remove_all(victims, [(victims[0], victims[-1])] if victims else [])
        return victims

    def _remove_all(self, victims: list[int], ranges: list[tuple[int, int]]) -> None:
        """Tombstone `ranges` (covering exactly `victims` among live messages), then drop."""
        if not victims:
            return
        self._append_delete(ranges)
        index = self._index
        for seq in victims:
            loc = index.locate(seq)
            assert loc is not None, f"victim {seq} is not live"
            index.drop(*loc)
            self._note_emptied(loc[0])
        self._reclaim_emptied()

    def relocate(self, directory: str | os.PathLike[str]) -> None:
        """Follow the store's directory, renamed to `directory` while open (a restore moves
        its staging directory into place); descriptors stay valid across a rename."""
        self.directory = Path(directory)
        self._msgs_dir = self.directory / MSGS
        for seg in (*self._index.segments, *self._doomed):
            seg.path = self._msgs_dir / seg.path.name

    # ------------------------------------------------------------------ durability

    def buffer_writes(
        self, nbytes: int, preallocate_bytes: int = limits.STORE_PREALLOCATE_BYTES
    ) -> None:
        """Buffer appends up to `nbytes` from now on (0: write each through at once), their
        space reserved `preallocate_bytes` ahead: for an owner that acknowledges nothing
        before a sync (the group commit, ADR 0051). Kept by the segments, which pass it
        on when rolled: interpreted (`BROOK_NO_EXTENSIONS`), FileStore stays within the
        instance attributes whose reads CPython 3.11 keeps fast (a shared-key dict, at
        most 29), on the publish path."""
        self.flush()
        for seg in self._index.segments:
            seg.buffer_max, seg.prealloc = max(nbytes, 0), max(preallocate_bytes, 0)

    def flush(self) -> None:
        """Write the appends still buffered (ADR 0051) to the OS, now: a process crash
        no longer loses them (a power loss still may, until `sync`). On the event loop.
        A failure fails the store: those messages are in the index already."""
        if self._failed is not None:
            raise StoreError(f"store failed: {self._failed}")
        try:
            self._active.flush()
        except OSError as exc:
            self._failed = exc
            raise StoreError(f"write failed: {exc}") from exc

    def sync(self) -> None:
        """Write and fsync what was appended since the last sync, then delete reclaimed
        segments."""
        with self._sync_lock:
            if self._closed:
                raise StoreError("message store is closed")
            if self._failed is not None:
                raise StoreError(f"an earlier sync failed: {self._failed}")
            with self._lock:
                dirty = list(self._dirty)
                self._dirty.clear()
                dir_dirty, self._dir_dirty = self._dir_dirty, False
                doomed, self._doomed = self._doomed, []
                unsynced, self._unsynced = self._unsynced, []
            try:
                for seg in dirty:
                    seg.flush()  # the appends buffered so far (ADR 0051)
                    if self._fsync:
                        os.fsync(seg.fd)
                if self._fsync and unsynced:  # a new store: meta.json, then its directories
                    fsync_path(self.directory / META)
                    for directory in unsynced:
                        fsync_path(directory)
                # Their tombstones, repeated elsewhere or not needed, are durable now.
                for seg in sorted(doomed, key=lambda seg: seg.name):
                    seg.close()
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(seg.path)
                if self._fsync and (dir_dirty or doomed):
                    fsync_path(self._msgs_dir)
            except OSError as exc:
                # After a failed fsync the kernel may have dropped the dirty pages: a retry
                # could "succeed" without the data (fsyncgate). Refuse to go on.
                self._failed = exc
                raise StoreError(f"sync failed: {exc}") from exc
            self.syncs += 1

    def close(self) -> None:
        if self._closed:
            return
        self._reader.forget()
        try:
            if self._failed is None:
                self.sync()
                self._index.settle()  # the snapshot then holds every sealed segment packed
                self._save_snapshot()
        finally:
            with self._sync_lock:
                for seg in (*self._index.segments, *self._doomed):
                    seg.close()
                self._index.close_cold()
                os.close(self._lock_fd)
                self._closed = True

    # ------------------------------------------------------------------ index snapshots

    def capture_snapshot(self) -> Callable[[], bool] | None:
        """On the event loop: copy the index for a periodic snapshot (ADR 0046), and
        return the job that writes it, for a worker thread: it syncs (the covered bytes
        are durable before a snapshot says so), then encodes and writes it; True when
        it was written. None when there is nothing new to save, or nothing may be."""
        if self._closed or self._failed is not None or not self._snapshot_allowed():
            return None
        try:
            self.flush()  # the snapshot reads the segments' last bytes
        except StoreError:
            return None
        index = self._index
        key = (
            self._snap_gen, index.first, index.last, index.messages,
            tuple((seg.name, seg.size) for seg in index.segments),
        )  # fmt: skip
        if key == self._snap_key:
            return None
        try:
            capture = indexsnap.capture(index)
        except OSError as exc:
            log.warning("%s: index snapshot not taken (%s)", self.directory, exc)
            return None
        gen = self._snap_gen

        def job() -> bool:
            try:
                self.sync()
            except StoreError:
                capture.release()
                return False  # closed meanwhile, or failed: nothing to save
            if not self._write_snapshot(capture, gen):
                return False
            self._snap_key = key
            return True

        return job

    def _snapshot_allowed(self) -> bool:
        """The index is exactly what replaying the log gives: not with data found lost
        (each open reports it again) or an owed roll."""
        return self._lost is None and not self._roll_owed and bool(self._index.segments)

    def _save_snapshot(self) -> None:
        """At close, after the final sync: save the index for the next open (ADR 0046).
        A periodic snapshot still being written is older: it is abandoned."""
        if not self._snapshot_allowed():
            return
        with self._snap_lock:
            self._snap_gen += 1
            gen = self._snap_gen
        try:
            self._write_snapshot(indexsnap.capture(self._index), gen)
        except OSError:
            indexsnap.remove(self.directory)

    def _write_snapshot(self, capture: indexsnap.Capture, gen: int) -> bool:
        """Encode and write `capture` (any thread), then rename it into place unless a
        change since it was taken made it stale (`_snap_gen`). Only a cache: a failure
        to write one costs the next open its speed, nothing else."""
        with self._snap_write_lock:
            if gen != self._snap_gen:
                capture.release()
                return False
            try:
                try:
                    data = capture.encode()
                finally:
                    capture.release()
                tmp = indexsnap.write_temp(self.directory, data)
                with self._snap_lock:
                    if gen == self._snap_gen:
                        indexsnap.install(tmp)
                        self.index_snapshots += 1
                        return True
                os.unlink(tmp)
            except OSError as exc:
                log.warning("%s: index snapshot not written (%s)", self.directory, exc)
            return False

    def _invalidate_snapshot(self) -> None:
        """Before bytes a snapshot may cover are rewritten in place (an erase, a cut):
        remove it, durably, and make one being written stale; the next periodic one
        covers the new bytes."""
        with self._snap_lock:
            self._snap_gen += 1
            if indexsnap.remove(self.directory, temp=False) and self._fsync:
                fsync_path(self.directory)

    def statistics(self) -> dict[str, Any]:
        """A snapshot for monitoring."""
        segs = self._index.segments
        return {
            "segments": len(segs),
            "segment_bytes": sum(s.size for s in segs),
            "segment_bytes_max": self._segment_bytes_max,
            "segment_slots_max": self._segment_slots_max,
            "write_buffer_bytes": self._active.buffer_max if segs else 0,
            "write_buffered_bytes": len(self._active.pending) if segs else 0,
            "pending_deletions": len(self._doomed),
            "syncs": self.syncs,
            "fsync": self._fsync,
            "index_snapshots": self.index_snapshots,
            "index_hot_segments": self._index.hot_max,
            "index_packed_segments": self._index.packed_segments(),
            "index_unpacks": self._index.unpacks,
            "index_cold_bytes": self._index.cold.held if self._index.cold is not None else 0,
        }

    # ------------------------------------------------------------------ internals

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("message store is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if self._failed is not None:
            raise StoreError(f"store failed, not accepting writes: {self._failed}")

    def _append_record(self, record: bytes) -> Segment:
        """Append to the active segment (rolling first if it is full), after its preamble
        if it has none yet; returns it. On a failure (StoreFullError when the disk is full)
        nothing was appended."""
        seg = self._active
        size = seg.size
        if self._roll_owed or (
            # `should_roll`'s tests first, inline: they fail for nearly every append (its
            # slots reached their cap, the segment lowered `roll_size` to 0)
            (size >= seg.roll_size or size + len(record) > MAX_SEGMENT_BYTES)
            and seg.should_roll(self._segment_bytes_max, len(record), self._segment_slots_max)
        ):
            seg = self._roll()
            size = seg.size  # 0: a new segment
        if not size:  # a new segment: its preamble first (storage-format.md 4)
            record = self._state_record() + record
        try:
            seg.buffer(record)
        except OSError as exc:
            seg.drop_unfinished()
            raise write_error(f"{seg.path}: write failed", exc) from exc
        # Lock-free fast path: if the segment is already in the set, the next sync to take
        # a snapshot includes it and fsyncs after this write.
        if seg not in self._dirty:
            with self._lock:
                self._dirty.add(seg)
        return seg

    def _append_delete(self, ranges: list[tuple[int, int]], *, erase: bool = False) -> None:
        now = time.time_ns()
        step = fmt.MAX_RANGES_PER_RECORD
        for i in range(0, len(ranges), step):
            chunk = ranges[i : i + step]
            seg = self._append_record(fmt.encode_delete(self._index.last, now, chunk, erase=erase))
            for lo, hi in chunk:
                seg.note_external(lo, hi)

    def _state_record(self) -> bytes:
        index = self._index
        return fmt.encode_state(index.first, index.last, index.last_ts, time.time_ns())

    def _roll(self) -> Segment:
        """Start a new, empty active segment named `last_seq + 1`; its preamble is
        written with its first record (`_append_record`)."""
        index = self._index
        old = getattr(self, "_active", None)
        if old is not None:
            self.flush()  # only the active segment holds appends not yet written
        try:
            seg = Segment.create(self._msgs_dir, index.last + 1)
        except OSError as exc:
            raise write_error(f"cannot create a segment in {self._msgs_dir}", exc) from exc
        if old is not None:  # the write buffer's settings go on (`buffer_writes`)
            seg.buffer_max, seg.prealloc = old.buffer_max, old.prealloc
        index.add_segment(seg)
        seg.activate(self._segment_bytes_max, self._segment_slots_max)
        self._active = seg
        self._roll_owed = False
        with self._lock:
            self._dirty.add(seg)
            self._dir_dirty = True
        if old is not None:
            self._note_emptied(old)
        return seg
