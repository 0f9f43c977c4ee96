"""An in-memory `MessageSource` and helpers for driving a consumer with a manual clock."""

from __future__ import annotations

from collections.abc import Callable

from brook.jetstream.consumer import (
    Action,
    ConsumerSettings,
    ConsumerState,
    Deliver,
    DeliverRun,
    Status,
)
from brook.jetstream.store.base import RecordSpan, StoredMessage
from brook.jetstream.store.filters import compile_filter

S = 1_000_000_000


class FakeSource:
    def __init__(self, filter_subject: str = "") -> None:
        self.msgs: dict[int, StoredMessage] = {}
        self.last = 0
        self.flt = compile_filter(filter_subject)

    def add(self, subject: str = "orders.a", data: bytes = b"x", ts_ns: int = 0) -> int:
        self.last += 1
        ts = ts_ns or 1_700_000_000_000_000_000 + self.last
        self.msgs[self.last] = StoredMessage(self.last, subject, None, data, ts)
        return self.last

    def remove(self, seq: int) -> None:
        del self.msgs[seq]

    def next_matching(self, after_seq: int) -> StoredMessage | None:
        for s in sorted(self.msgs):
            if s > after_seq and self.flt.matches(self.msgs[s].subject):
                return self.msgs[s]
        return None

    def next_batch(
        self, after_seq: int, max_count: int, spans: list[RecordSpan] | None = None
    ) -> list[StoredMessage]:
        out: list[StoredMessage] = []
        while len(out) < max_count and (m := self.next_matching(after_seq)) is not None:
            out.append(m)
            after_seq = m.seq
        return out

    def load(self, seq: int) -> StoredMessage | None:
        return self.msgs.get(seq)

    def num_pending(self, from_seq: int) -> int:
        return sum(1 for s, m in self.msgs.items() if s >= from_seq and self.flt.matches(m.subject))

    def searched_to(self, after_seq: int) -> int:
        return after_seq if self.flt.match_all else max(after_seq, self.last)


def make(
    n: int = 0,
    filter_subject: str = "",
    has_interest: Callable[[str], bool] = lambda reply: True,
    **settings: object,
) -> tuple[ConsumerState, FakeSource]:
    """A consumer over `n` stored messages; `has_interest` says which pull request replies
    still have a subscriber (all, by default)."""
    src = FakeSource(filter_subject)
    for _ in range(n):
        src.add()
    cfg = ConsumerSettings(stream="ORDERS", name="worker", **settings)  # type: ignore[arg-type]
    return ConsumerState(cfg, src, has_interest=has_interest), src


def flat(actions: list[Action]) -> list[Action]:
    """`actions` with each `DeliverRun` replaced by its `Deliver`s, in place."""
    out: list[Action] = []
    for a in actions:
        if isinstance(a, DeliverRun):
            out += a.delivers()
        else:
            out.append(a)
    return out


def delivered(actions: list[Action]) -> list[int]:
    return [a.stream_seq for a in flat(actions) if isinstance(a, Deliver)]


def delivers(actions: list[Action]) -> list[Deliver]:
    return [a for a in flat(actions) if isinstance(a, Deliver)]


def statuses(actions: list[Action]) -> list[tuple[int, str]]:
    return [(a.code, a.description) for a in actions if isinstance(a, Status)]
