"""Ack deadlines of a consumer's pending messages: when each is due for redelivery.

Entries are `(deadline_ns, stream_seq)` and lazy: one counts while its message is still
pending with that deadline (`earliest` drops the others as it meets them), so an ack or a
new deadline never searches for the old entry. Entries that come in order (first
deliveries, all with one ack_wait: nearly all of them) queue in a FIFO, the rest (backoff,
NAK delays, progress) in a heap; each part is sorted, so the next deadline is the lower of
their fronts, and the common entry leaves in O(1) rather than a heap pop.
"""

from __future__ import annotations

import functools
import heapq
from collections import deque
from collections.abc import Callable, Mapping
from typing import Protocol


class Timed(Protocol):
    """What `earliest` needs of a pending message: its current deadline."""

    @property
    def deadline_ns(self) -> int | None: ...


class AckDeadlines:
    __slots__ = ("_fifo", "_heap")

    def __init__(self) -> None:
        self._fifo: deque[tuple[int, int]] = deque()
        self._heap: list[tuple[int, int]] = []

    def add(self, deadline_ns: int, seq: int) -> None:
        entry = (deadline_ns, seq)
        fifo = self._fifo
        if not fifo or fifo[-1] <= entry:
            fifo.append(entry)
        else:
            heapq.heappush(self._heap, entry)

    def adder(self, deadline_ns: int, min_seq: int) -> Callable[[tuple[int, int]], None]:
        """`add` for entries of one deadline and rising sequences, none below `min_seq`,
        decided once: call the result with each `(deadline_ns, seq)`."""
        fifo = self._fifo
        if not fifo or fifo[-1] <= (deadline_ns, min_seq):
            return fifo.append
        return functools.partial(heapq.heappush, self._heap)

    def pop_due(self, now_ns: int) -> tuple[int, int] | None:
        """The earliest entry at or before `now_ns`, removed (whether it counts or not)."""
        fifo = self._fifo
        heap = self._heap
        if fifo and fifo[0][0] <= now_ns and not (heap and heap[0] < fifo[0]):
            return fifo.popleft()
        if heap and heap[0][0] <= now_ns:
            return heapq.heappop(heap)
        return None

    def earliest(self, pending: Mapping[int, Timed]) -> int | None:
        """The earliest deadline that still counts by `pending` (stream seq -> message),
        or None; the entries before it that no longer count are dropped."""
        fifo = self._fifo
        while fifo:
            deadline, seq = fifo[0]
            p = pending.get(seq)
            if p is not None and p.deadline_ns == deadline:
                break
            fifo.popleft()
        heap = self._heap
        while heap:
            deadline, seq = heap[0]
            p = pending.get(seq)
            if p is not None and p.deadline_ns == deadline:
                break
            heapq.heappop(heap)
        at = fifo[0][0] if fifo else None
        if heap and (at is None or heap[0][0] < at):
            at = heap[0][0]
        return at

    def clear(self) -> None:
        self._fifo.clear()
        self._heap.clear()
