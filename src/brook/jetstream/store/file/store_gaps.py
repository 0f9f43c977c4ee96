"""`FileStore`'s sequence gaps and cuts (`StoreGaps`, a part of `FileStore`: ADR 0031):
sequences skipped without messages (`skip_to`, `skip_msgs`: a mirror's or source's
origin had gaps; storage-format.md 6.1, 6.3, 7.6), and the log cut back to an earlier
sequence (`truncate`: what a crash left of an atomic batch's commit)."""

from __future__ import annotations

import mmap
import os
import time

from mypy_extensions import trait

from brook.jetstream.store.base import StoreFullError, add_lost, write_error
from brook.jetstream.store.file import format as fmt
from brook.jetstream.store.file.recovery import fsync_path
from brook.jetstream.store.file.store_core import StoreCore

# `skip_msgs`: gaps of up to this many sequences are written inline (41 bytes each).
SKIP_INLINE_MAX = 1024


@trait
class StoreGaps(StoreCore):
    """`FileStore`'s skips and cuts (a part of it, a mypyc trait: ADR 0031, 0065)."""

    def skip_to(self, last_seq: int) -> None:
        self._check_writable()
        index = self._index
        if last_seq <= index.last:
            return
        lost = range(index.last + 1, last_seq + 1)
        index.last = last_seq
        if not index.messages:
            index.first = last_seq + 1
        self._lost = add_lost(self._lost, lost, 0)
        # A new segment named `last_seq + 1` records the skip (storage-format.md 7.6),
        # durable before any message takes the sequence after it. Without room for it,
        # the next append rolls first (the consumers' files still tell a restart).
        try:
            self._roll()
        except StoreFullError:
            self._roll_owed = True
            return
        self._reclaim()  # the segment rolled away from, if nothing in it is live
        self.sync()

    def truncate(self, last_seq: int) -> None:
        """Cut the log back to `last_seq`: the records from the first message above it
        on are cut off, so that `last_seq` is the store's again and the next message
        takes `last_seq + 1`. Removals of messages up to `last_seq` recorded after the
        cut (tombstones, floors) are written again after it, so nothing removed comes
        back. For a tail nobody has read: what a crash left of an atomic batch's commit,
        cut when its stream opens."""
        self._check_writable()
        index = self._index
        if last_seq >= index.last:
            return
        self.sync()  # nothing pending: no segment waits to be unlinked
        segments = index.segments
        pos = max(index.segment_at(last_seq + 1), 0)
        cut: tuple[int, int, bool] | None = None  # (position, offset, preamble only)
        kept: list[tuple[int, int]] = []  # removals after the cut of sequences <= last_seq
        for i in range(pos, len(segments)):
            seg = segments[i]
            preamble = 0  # the length of the segment's first record
            with mmap.mmap(seg.fd, seg.size, access=mmap.ACCESS_READ) as buf:
                for item in fmt.scan(buf, seg.size):
                    if isinstance(item, fmt.Damage):
                        continue
                    off, length, rtype, seq, _ts, _fl, _sl, _hl, dl = item
                    preamble = preamble or length
                    if cut is None:
                        if rtype == fmt.T_MSG and seq > last_seq:
                            cut = (i, off, off == preamble)
                        continue
                    if rtype == fmt.T_DELETE:
                        ranges = fmt.decode_ranges(buf, off, dl)
                        kept += [(lo, min(hi, last_seq)) for lo, hi in ranges if lo <= last_seq]
                    elif rtype == fmt.T_STATE and seq > 1:  # a floor: below it is removed
                        kept.append((1, min(seq - 1, last_seq)))
        if cut is None:
            return
        self._invalidate_snapshot()  # it may cover what is cut off
        i, offset, preamble_only = cut
        with self._sync_lock, self._lock:
            self._reader.forget()
            doomed = segments[i + 1 :]
            seg = segments[i]
            # A segment left with its preamble only goes too, unless it is the first.
            if i and preamble_only:
                doomed.insert(0, seg)
                seg = segments[i - 1]
            else:
                seg.truncate(offset)
            try:
                for chunk in range(0, len(kept), fmt.MAX_RANGES_PER_RECORD):
                    ranges = kept[chunk : chunk + fmt.MAX_RANGES_PER_RECORD]
                    seg.append(fmt.encode_delete(last_seq, time.time_ns(), ranges))
                if self._fsync:
                    os.fsync(seg.fd)
                for gone in doomed:
                    os.unlink(gone.path)
                if self._fsync and doomed:
                    fsync_path(self._msgs_dir)
            except OSError as exc:
                self._failed = exc  # the log is no longer what the index says
                raise write_error(f"cannot truncate {self.directory}", exc) from exc
            finally:
                for gone in segments:
                    gone.close()
        self._candidates = []
        self._roll_owed = False
        self._lost = None
        self._open(index.first, [])

    def skip_msgs(self, last_seq: int) -> None:
        """A short gap is written inline as one ERASED message record per sequence (41
        bytes each, replayed as removed slots: storage-format.md 6.3), so a mirror of a
        stream with scattered deletions keeps filling one segment; a longer one starts a
        new segment named `last_seq + 1` (6.1: the name proves the sequences below it
        were assigned). Both become durable with the next sync (the group commit)."""
        self._check_writable()
        index = self._index
        if last_seq <= index.last:
            return
        if last_seq - index.last > SKIP_INLINE_MAX:
            index.last = last_seq
            if not index.messages:
                index.first = last_seq + 1
            try:
                self._roll()
            except StoreFullError:
                self._roll_owed = True  # the next append rolls first (7.6)
                return
            self._reclaim()  # the segment rolled away from, if nothing in it is live
            return
        ts = index.last_ts
        for seq in range(index.last + 1, last_seq + 1):
            record = fmt.encode_message(seq, ts, b"\0", b"", b"", fmt.F_ERASED)
            index.add_removed(self._append_record(record), seq, ts)
