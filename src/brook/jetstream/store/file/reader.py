"""`Reader`: the file store's read side, messages read back from their records.

`FileStore` finds where a message lies (`Index`); a `Reader` fetches and checks its bytes.
Reading a message is one pread(); payloads are not kept in memory, except in a few small
read-ahead buffers (`_bytes_at`): a reader going through the log in order (a consumer)
gets one pread() per `READ_AHEAD_BYTES` instead of one per message, and a run of
consecutive messages is one span of bytes (`_read_run`). The buffers cannot go stale: the
bytes of a live message's record never change (records are only appended; an erase
overwrites a record whose slot is dropped from the index at once, and reads always go
through the index). Apart so that the writer's module holds the log's changes and this
one the hot loop every delivery runs, with its buffers and their invariant.
"""

from __future__ import annotations

import bisect
import zlib
from array import array
from collections.abc import Sequence
from typing import NoReturn

from brook.jetstream.store.base import RecordSpan, StoredMessage, StoreError
from brook.jetstream.store.file import format as fmt
from brook.jetstream.store.file import queries as q
from brook.jetstream.store.file.index import Index
from brook.jetstream.store.file.segment import DEAD, LEN_MASK, Segment
from brook.jetstream.store.filters import compile_filter

READ_AHEAD_BYTES = 32 * 1024
READ_AHEAD_READERS = 4  # buffers kept, most recently used first
READ_RUN_BYTES = 256 * 1024  # the most `_read_run` fetches at once (unless one record is more)
# A record up to this size is checksummed from a copy, which costs less than a memoryview
# slice (callgrind, 168-byte records: 300 instructions less); a larger one from a view,
# not to copy it once more than its data.
CRC_COPY_MAX = 4096
_EVERYTHING = compile_filter("")


class Reader:
    """Messages of `index`'s live slots, read from their segments; runs on the event loop."""

    __slots__ = ("_ahead", "_index")

    def __init__(self, index: Index) -> None:
        self._index = index
        # (segment, file offset, bytes read there) per sequential reader: see `_bytes_at`.
        self._ahead: list[tuple[Segment, int, bytes]] = []

    def message(self, seg: Segment, k: int) -> StoredMessage:
        """The message in live slot `k` of `seg`."""
        out: list[StoredMessage] = []
        self._read_run(seg, k, 1, out)
        return out[0]

    def messages_from(
        self, start_seq: int, max_count: int, spans: list[RecordSpan] | None = None
    ) -> list[StoredMessage]:
        """Up to `max_count` live messages from `start_seq` on, of any subject: runs of
        live slots, segment by segment (`next_live` finds each run's start); with
        `spans`, the records of each run of all-live slots appended to it."""
        out: list[StoredMessage] = []
        index = self._index
        seq = start_seq
        while len(out) < max_count:
            loc = q.next_live(index, _EVERYTHING, seq)
            if loc is None:
                break
            seg, k = loc
            seq = self._read_run(seg, k, max_count - len(out), out, spans)
        return out

    def forget(self) -> None:
        """Drop the read-ahead buffers (the store is closing)."""
        self._ahead.clear()

    def _read_run(
        self,
        seg: Segment,
        k: int,
        max_count: int,
        out: list[StoredMessage],
        spans: list[RecordSpan] | None = None,
    ) -> int:
        """Append the messages of up to `max_count` live slots of `seg`, from slot `k` on,
        to `out`; returns the sequence after the last slot looked at. Every read of a
        message comes here: a consumer's reads come in runs, so the run's records are
        fetched as one span of bytes (at most `READ_RUN_BYTES`, or one record) and the
        per-run lookups are made once.

        Each record is checked in place, by the rules `format.decode_message` applies to
        a MSG record (storage-format.md 5.1, CRC included) and for the slot's sequence;
        this loop is a third of a delivery's cost, so the check is written out here
        rather than called. A record it refuses goes to `_refuse`, which raises the error
        `decode_message` gives. With `spans`, a run of all-live slots (the usual case)
        appends its checked records (`RecordSpan`), once all of them passed."""
        offs = seg.offs
        lens = seg.lens
        stop = min(seg.count, k + max_count)
        if k >= stop:
            return seg.base + k
        base = seg.base
        slots: Sequence[int]
        sids = seg.sids
        # The run's sequences and columns, iterated together: indexing three arrays per
        # record costs more.
        run_seqs: Sequence[int]
        run_offs: Sequence[int]
        run_lens: Sequence[int]
        run_sids: Sequence[int]
        first = offs[k]
        if first != DEAD and DEAD not in offs[k:stop]:
            # All live (the usual case): records lie in slot order, each ending where the
            # next starts or before, so the run is the slots that start within the span.
            end = bisect.bisect_right(offs, first + READ_RUN_BYTES, k + 1, stop)
            if end - 1 > k and offs[end - 1] + (lens[end - 1] & LEN_MASK) - first > READ_RUN_BYTES:
                end -= 1
            slots = range(k, end)
            run_seqs = range(base + k, base + end)
            run_offs, run_lens, run_sids = offs[k:end], lens[k:end], sids[k:end]
            last_end = offs[end - 1] + (lens[end - 1] & LEN_MASK)
            k = end
        else:
            slots, first, last_end, k = self._live_slots(offs, lens, k, max_count, seg.count)
            spans = None
            run_seqs = [base + j for j in slots]
            run_offs = [offs[j] for j in slots]
            run_lens = [lens[j] for j in slots]
            run_sids = [sids[j] for j in slots]
        if not slots:
            return base + k
        try:
            buf = self._bytes_at(seg, first, last_end - first)
        except OSError as exc:
            seq = base + slots[0]
            raise StoreError(f"{seg.path}: cannot read sequence {seq}: {exc}") from exc
        # `name_of`, called only if the id were free (which raises): a live slot's is not.
        names = self._index.subjects.names
        name_of = self._index.subjects.name_of
        append = out.append
        unpack_header = fmt.MSG_HEADER.unpack_from
        crc32, residue = zlib.crc32, fmt.CRC_RESIDUE
        msg_prefix, overhead, header_size = fmt.MSG_PREFIX, fmt.OVERHEAD, fmt.HEADER_SIZE
        crc_size, erased, copy_max, len_mask = fmt.CRC_SIZE, fmt.F_ERASED, CRC_COPY_MAX, LEN_MASK
        # Each message is made as an empty `StoredMessage` whose five slots are then
        # stored: calling the dataclass (its `__init__` run from C, a frame of its own)
        # costs twice as much. Every field is set (a test compares with the dataclass's).
        new, message_cls = object.__new__, StoredMessage
        view = memoryview(buf)
        size = len(buf)
        for expected, off, ln, sid in zip(run_seqs, run_offs, run_lens, run_sids, strict=True):
            pos = off - first
            n = ln & len_mask
            if n >= overhead and pos + n <= size:
                prefix, length, seq, ts_ns, flags, sl, hl, dl = unpack_header(buf, pos)
                if (
                    prefix == msg_prefix
                    and length == n == overhead + sl + hl + dl
                    and sl > 0
                    and seq == expected
                    and not flags & erased
                    and crc32(buf[pos : pos + n] if n <= copy_max else view[pos : pos + n])
                    == residue
                ):
                    a = pos + header_size + sl
                    b = a + hl
                    m = new(message_cls)
                    m.seq = seq
                    m.subject = names[sid] or name_of(sid)
                    m.header = buf[a:b] or None
                    m.data = buf[b : pos + n - crc_size]
                    m.ts_ns = ts_ns
                    append(m)
                    continue
            self._refuse(seg, expected, buf[pos : pos + n])
        if spans is not None:
            lo = slots[0]
            spans.append(RecordSpan(base + lo, buf, first, offs[lo:k], lens[lo:k], seg.tss[lo:k]))
        return base + k

    @staticmethod
    def _refuse(seg: Segment, seq: int, record: bytes) -> NoReturn:
        """The StoreError for the slot of `seq`, whose record `_read_run` refused."""
        try:
            fmt.decode_message(record)
        except fmt.RecordError as exc:
            raise StoreError(f"{seg.path}: record of sequence {seq} is corrupt: {exc}") from exc
        # A valid MSG record, but of another sequence, or erased.
        raise StoreError(f"{seg.path}: slot of sequence {seq} holds another record")

    @staticmethod
    def _live_slots(
        offs: array[int], lens: array[int], k: int, max_count: int, n: int
    ) -> tuple[list[int], int, int, int]:
        """`_read_run`'s slots where some are removed: up to `max_count` live ones from `k`
        on (below `n`, the segment's `count`) whose records fit in `READ_RUN_BYTES` from the
        first one's start (or that one alone); with that start, the end of the last one,
        and the slot after it."""
        slots: list[int] = []
        first = last_end = 0
        while k < n and len(slots) < max_count:
            off = offs[k]
            if off != DEAD:
                end = off + (lens[k] & LEN_MASK)
                if not slots:
                    first = off
                elif end - first > READ_RUN_BYTES:
                    break
                slots.append(k)
                last_end = end
            k += 1
        return slots, first, last_end, k

    def _bytes_at(self, seg: Segment, off: int, n: int) -> bytes:
        """The `n` bytes of `seg` at `off` (records), as `seg.read` returns them. A read
        that lies in a buffer is served from it; one that starts at most
        `READ_AHEAD_BYTES` past the end of a buffer of the same segment continues a
        sequential reader, and reads ahead; any other read starts a new (exact) buffer, so
        that a reader is recognised by its second read. Raises OSError as `seg.read`
        does."""
        ahead = self._ahead
        for i, (bseg, start, buf) in enumerate(ahead):
            if bseg is not seg or off < start:
                continue
            rel = off - start
            have = len(buf)
            if rel + n <= have:
                return buf[rel : rel + n]
            if rel - have < READ_AHEAD_BYTES:
                buf = seg.read(off, max(n, min(READ_AHEAD_BYTES, seg.size - off)))
                del ahead[i]
                ahead.insert(0, (seg, off, buf))
                return buf[:n] if len(buf) > n else buf
        record = seg.read(off, n)
        ahead.insert(0, (seg, off, record))
        del ahead[READ_AHEAD_READERS:]
        return record
