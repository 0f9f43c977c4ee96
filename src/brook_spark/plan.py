"""Pure planning: splitting sequence ranges and deciding how far a micro-batch may read.

Offsets are stream sequences, so a micro-batch is the half-open range [start, end) and a
replay after a restart is the same range again. Splitting must therefore be a function of
(start, end, options) alone: the same range always yields the same partitions, and the
partitions cover it exactly once. The admission rules mirror Spark's Kafka source
(`maxOffsetsPerTrigger`, `minOffsetsPerTrigger` with `maxTriggerDelay`) with the clock
injected, so they are tested without waiting.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field


def split_range(
    lo: int, hi: int, *, min_partitions: int, max_records_per_partition: int
) -> list[tuple[int, int]]:
    """Contiguous, disjoint [lo, hi) pieces of near-equal size covering the range exactly.

    The count is the larger of `min_partitions` and what `max_records_per_partition`
    requires, but never more pieces than sequences: no partition is empty.
    """
    size = hi - lo
    if size <= 0:
        return []
    count = max(min_partitions, math.ceil(size / max_records_per_partition))
    count = min(count, size)
    base, extra = divmod(size, count)
    pieces = []
    start = lo
    for i in range(count):
        end = start + base + (1 if i < extra else 0)
        pieces.append((start, end))
        start = end
    return pieces


@dataclass
class Admission:
    """Decides the end offset of the next micro-batch (driver side, one per query).

    The engine passes the cap (`ReadMaxRows`, from `maxRecordsPerTrigger`, or none for
    `ReadAllAvailable`); `min_records` holds a batch back until that many sequences are
    available or `max_delay_s` has passed since the last batch fired. The first batch fires
    at once, as in Kafka's source. Under Trigger.AvailableNow the minimum is ignored: the
    query must reach its target and stop.
    """

    min_records: int | None
    max_delay_s: float
    clock: Callable[[], float]
    last_fired_s: float = field(default=-math.inf)

    def end(
        self, start: int, available_end: int, *, max_records: int | None, available_now: bool
    ) -> int:
        """The next end offset, never below `start` (offsets only move forward)."""
        if available_end <= start:
            return start
        now = self.clock()
        if self.min_records is not None and not available_now:
            waited_enough = now - self.last_fired_s >= self.max_delay_s
            if available_end - start < self.min_records and not waited_enough:
                return start
        end = available_end
        if max_records is not None:
            end = min(end, start + max_records)
        self.last_fired_s = now
        return end
