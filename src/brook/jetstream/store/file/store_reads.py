"""`FileStore`'s reads (`StoreReads`, a part of `FileStore`: ADR 0031): messages found
by their slot in the index (`index.py`, `queries.py`) and read back by `reader.py`; the
state, counts and pending numbers the index answers alone; a frozen view of the log for
a snapshot (`frozen.py`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from mypy_extensions import trait

from brook.jetstream.store.base import (
    RecordSpan,
    StoredMessage,
    StreamState,
    SubjectState,
    load_next_repeated,
)
from brook.jetstream.store.file import queries as q
from brook.jetstream.store.file.frozen import FrozenLog
from brook.jetstream.store.file.recovery import META
from brook.jetstream.store.file.store_core import StoreCore
from brook.jetstream.store.filters import compile_filter

if TYPE_CHECKING:
    from brook.jetstream.store.file.store import FileStore


@trait
class StoreReads(StoreCore):
    """`FileStore`'s reads (a part of it, a mypyc trait: ADR 0031, 0065)."""

    def load(self, seq: int) -> StoredMessage | None:
        self._check_open()
        loc = self._index.locate(seq)
        return None if loc is None else self._reader.message(*loc)

    def load_next(self, filter_subject: str, start_seq: int) -> StoredMessage | None:
        self._check_open()
        if not filter_subject or filter_subject == ">":
            # An unfiltered consumer reading in order: `start_seq` itself is live.
            loc = self._index.locate(start_seq)
            if loc is not None:
                return self._reader.message(*loc)
        loc = q.next_live(self._index, compile_filter(filter_subject), start_seq)
        return None if loc is None else self._reader.message(*loc)

    def load_batch(
        self,
        filter_subject: str,
        start_seq: int,
        max_count: int,
        spans: list[RecordSpan] | None = None,
    ) -> list[StoredMessage]:
        if filter_subject and filter_subject != ">":
            return load_next_repeated(cast("FileStore", self), filter_subject, start_seq, max_count)
        self._check_open()
        return self._reader.messages_from(start_seq, max_count, spans)

    def load_last(self, filter_subject: str) -> StoredMessage | None:
        self._check_open()
        seq = q.last_live(self._index, compile_filter(filter_subject))
        return self.load(seq) if seq else None

    def last_seq(self) -> int:
        self._check_open()
        return self._index.last

    def state(
        self, *, deleted_details: bool = False, subjects_filter: str | None = None
    ) -> StreamState:
        self._check_open()
        st = q.stream_state(self._index, deleted_details=deleted_details)
        st.lost = self._lost
        if subjects_filter is not None:
            st.subjects = self.subject_counts(subjects_filter)
        return st

    def subject_state(self, filter_subject: str) -> SubjectState:
        self._check_open()
        return q.subject_state(self._index, compile_filter(filter_subject))

    def num_pending(self, filter_subject: str, start_seq: int) -> int:
        self._check_open()
        return q.num_pending(self._index, compile_filter(filter_subject), start_seq)

    def subject_counts(self, filter_subject: str) -> dict[str, int]:
        self._check_open()
        flt = compile_filter(filter_subject)
        return {e.name: len(e) for e in self._index.subjects.matching(flt)}

    def last_seqs(self, filter_subject: str) -> list[int]:
        self._check_open()
        flt = compile_filter(filter_subject)
        return [e.last() for e in self._index.subjects.matching(flt)]

    def recent_headed(self, since_ns: int, most: int) -> list[int]:
        self._check_open()
        return q.recent_headed(self._index, since_ns, most)

    def freeze(self) -> FrozenLog:
        """The log as it is now, for a stream snapshot (frozen.py); `close()` it when done."""
        self._check_open()
        self.flush()  # the frozen log reads the files
        segments = [(seg.path.name, seg.path, seg.size) for seg in self._index.segments]
        meta = (self.directory / META).read_bytes()
        frozen = FrozenLog(meta, segments, self._frozen.remove)
        self._frozen.append(frozen)
        return frozen
