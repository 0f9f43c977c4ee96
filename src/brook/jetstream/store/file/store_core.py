"""`StoreCore`: what `FileStore`'s parts (`StoreReads`, `StoreGaps`, `SegmentReclaim`,
ADR 0031) use of it, declared once.

The file store is compiled by mypyc as a native class (ADR 0065), and its parts are
mypyc traits that it inherits. A trait's method reads the store's attributes natively
only if they are declared, and calls a method of another part or of `FileStore` only if
one is declared, so they are declared here, in the trait all the parts inherit: the
attributes are `FileStore`'s own (set by its `__init__`), the methods' bodies here are
never run (`FileStore` or a part defines each, ahead of this trait in the method order).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from mypy_extensions import trait

from brook.jetstream.store.base import LostData
from brook.jetstream.store.file.frozen import FrozenLog
from brook.jetstream.store.file.index import Index
from brook.jetstream.store.file.reader import Reader
from brook.jetstream.store.file.recovery import RecoveryReport
from brook.jetstream.store.file.segment import Segment


@trait
class StoreCore:
    """`FileStore`'s attributes and methods that its parts use (see the module docstring)."""

    directory: Path
    _msgs_dir: Path
    _fsync: bool
    _lock: threading.Lock  # guards `_dirty`, `_dir_dirty`, `_doomed`
    _sync_lock: threading.Lock
    _dirty: set[Segment]
    _doomed: list[Segment]
    _candidates: list[Segment]
    _failed: OSError | None
    _roll_owed: bool
    _lost: LostData | None
    _frozen: list[FrozenLog]
    _index: Index
    _reader: Reader
    _active: Segment
    on_reclaim: Callable[[], None] | None

    def _check_open(self) -> None:
        raise NotImplementedError

    def _check_writable(self) -> None:
        raise NotImplementedError

    def flush(self) -> None:
        raise NotImplementedError

    def sync(self) -> None:
        raise NotImplementedError

    def _open(self, first_seq: int, parents: list[Path]) -> RecoveryReport:
        raise NotImplementedError

    def _roll(self) -> Segment:
        raise NotImplementedError

    def _append_record(self, record: bytes) -> Segment:
        raise NotImplementedError

    def _append_delete(self, ranges: list[tuple[int, int]], *, erase: bool = False) -> None:
        raise NotImplementedError

    def _state_record(self) -> bytes:
        raise NotImplementedError

    def _invalidate_snapshot(self) -> None:
        raise NotImplementedError

    def _reclaim(self) -> None:
        raise NotImplementedError
