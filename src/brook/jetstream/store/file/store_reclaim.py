"""`FileStore`'s space reclaimed (`SegmentReclaim`, a part of `FileStore`: ADR 0031):
sealed segments that hold nothing live deleted once the records that replace them are
durable (storage-format.md 6.2), and a message's record erased in place (6.3)."""

from __future__ import annotations

import contextlib
from array import array

from mypy_extensions import trait

from brook.jetstream.store.base import StoreError, StoreFullError, write_error
from brook.jetstream.store.file import format as fmt
from brook.jetstream.store.file import queries as q
from brook.jetstream.store.file.segment import LEN_MASK, Segment
from brook.jetstream.store.file.store_core import StoreCore


@trait
class SegmentReclaim(StoreCore):
    """`FileStore`'s reclaiming of segments and erasing of records (a part of it, a mypyc
    trait: ADR 0031, 0065)."""

    def _erase(self, seg: Segment, k: int) -> None:
        """Overwrite the message's record in place with its ERASED image (format 6.3)."""
        offset = seg.offs[k]
        record = seg.read(offset, seg.lens[k] & LEN_MASK)
        if isinstance(fmt.validate(record, 0, len(record)), str):
            raise StoreError(f"{seg.path}: record of sequence {seg.base + k} is corrupt")
        for frozen in self._frozen:  # a snapshot in progress still needs the original
            frozen.preserve(seg.path.name, offset, record)
        self._invalidate_snapshot()  # it may cover the record rewritten here
        try:
            seg.write_at(offset, fmt.erased_image(record))
        except OSError as exc:
            raise write_error(f"{seg.path}: erase failed", exc) from exc
        with self._lock:
            self._dirty.add(seg)

    def _note_emptied(self, seg: Segment) -> None:
        if not seg.live and seg is not self._active:
            self._candidates.append(seg)

    def _reclaim_emptied(self) -> None:
        """`_reclaim`, after a purge or an expiry: when nothing is live any more and the
        active segment holds messages, appends move to a new segment so that the active
        one can go too (storage-format.md 6.2). Without room for that, a later purge
        tries again."""
        if not self._index.messages and self._active.count:
            with contextlib.suppress(StoreFullError):
                self._roll()
        self._reclaim()

    def _reclaim(self) -> None:
        """Delete sealed segments holding nothing live (storage-format.md 6.2): first a
        STATE record and copies of their still-needed tombstones go to the active segment,
        then the files are unlinked by the next sync, once those records are durable.
        Without room for those records the segments wait for the next call."""
        index = self._index
        while self._candidates:
            seg = self._candidates.pop()
            if seg.doomed or seg.live or seg is self._active or seg not in index.segments:
                continue
            needed = q.needed_ranges(index, seg)
            try:
                self._append_record(self._state_record())
                if needed:
                    self._append_delete(needed)
            except StoreFullError:
                if index.messages:
                    self._candidates.append(seg)
                    return
                # Nothing is live: the segments go oldest first (sync unlinks in name
                # order), each after its own records are durable, and every tombstone
                # comes after its message in the log, so no copy is needed (6.2).
                recorded = False
            else:
                recorded = True
            index.remove_segment(seg)
            seg.doomed = True
            with self._lock:
                if recorded:
                    self._dirty.discard(seg)
                self._doomed.append(seg)
            if self.on_reclaim is not None:
                self.on_reclaim()
            # Tombstones elsewhere that only served the deleted file are no longer needed.
            for other in index.segments:
                if len(other.ext):
                    other.ext = array("Q", [s for r in q.needed_ranges(index, other) for s in r])
