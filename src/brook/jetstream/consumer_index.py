"""Which consumers of a stream a stored message concerns: the consumers by filter subject.

A stream may have thousands of consumers, each filtered to subjects of its own (one per
tenant, device or key range). A stored message concerns only those whose filter matches
its subject; the others have nothing new to deliver and no pending count to change, so
the engine tells only these (`matching`), and interest retention asks the same question
(`concerns`). Consumers without a filter (or with a match-all `>`) take every message and
are kept aside; the filtered ones are a `SubjectIndex` of their filter subjects, so a
publish costs a walk of the filters its subject could match, not one test per consumer
(nats-server keeps the same index, `mset.csl`). A consumer's filters never overlap each
other (10136), so a subject matches at most one of them and `matching` lists a consumer
at most once.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Generic, TypeVar

from brook.jetstream.store.filters import is_match_all
from brook.routing.subject_index import SubjectIndex

C = TypeVar("C", bound=Hashable)


class ConsumerIndex(Generic[C]):
    def __init__(self) -> None:
        self._unfiltered: dict[C, None] = {}  # in the order they came (a dict as a set)
        self._filtered = SubjectIndex[C]()
        self._filters: dict[C, tuple[bytes, ...]] = {}  # consumer -> its indexed filters

    def __len__(self) -> int:
        return len(self._unfiltered) + len(self._filters)

    def add(self, consumer: C, filters: Sequence[str]) -> None:
        """Index `consumer` under `filters` (empty, or any match-all one: every subject)."""
        if not filters or any(is_match_all(f) for f in filters):
            self._unfiltered[consumer] = None
            return
        encoded = tuple(f.encode() for f in filters)
        self._filters[consumer] = encoded
        for f in encoded:
            self._filtered.add(f, consumer)

    def remove(self, consumer: C) -> None:
        if consumer in self._unfiltered:
            del self._unfiltered[consumer]
            return
        for f in self._filters.pop(consumer, ()):
            self._filtered.remove(f, consumer)

    def update(self, consumer: C, filters: Sequence[str]) -> None:
        """The consumer's filters changed (a consumer update)."""
        self.remove(consumer)
        self.add(consumer, filters)

    def matching(self, subject: bytes) -> list[C]:
        """The consumers a message stored on `subject` concerns: the unfiltered ones in the
        order they came, then those whose filter matches."""
        if not self._filters:
            return list(self._unfiltered)
        return [*self._unfiltered, *self._filtered.match(subject)]

    def concerns(self, subject: bytes) -> bool:
        """Does a message on `subject` concern some consumer?"""
        return bool(self._unfiltered) or bool(self._filtered.match(subject))
