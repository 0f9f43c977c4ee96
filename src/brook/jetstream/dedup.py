"""`Nats-Msg-Id` de-duplication within a stream's `duplicate_window`.

Ids are remembered with the sequence and time of the message that carried them, in arrival
order, so expiring the window is a trim from the front. Memory is bounded twice: by the
window, and by `DEDUP_IDS_MAX` ids however fast unique ids arrive. After a restart the
window is rebuilt from the stored messages' headers, newest first, stopping at the first
message older than the window (wire reference §4.3).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from brook import limits
from brook.jetstream.store.base import MessageStore
from brook.protocol import headers as hdrs

MSG_ID = "Nats-Msg-Id"


def header_value(header: bytes | None, name: str) -> str | None:
    if not header:
        return None
    try:
        return hdrs.parse(header).get(name)
    except hdrs.HeaderError:
        return None


class DedupWindow:
    def __init__(
        self,
        window_ns: Callable[[], int],
        now_ns: Callable[[], int],
        max_ids: int = limits.DEDUP_IDS_MAX,
    ) -> None:
        # The window is read through a callable: a stream update may change it.
        self._window_ns = window_ns
        self._now_ns = now_ns
        self._max_ids = max_ids
        self._ids: OrderedDict[str, tuple[int, int]] = OrderedDict()  # id → (seq, ts_ns)

    def __len__(self) -> int:
        return len(self._ids)

    def lookup(self, msg_id: str) -> int | None:
        """The sequence of the message that carried `msg_id` within the window, if any."""
        self._trim()
        entry = self._ids.get(msg_id)
        return entry[0] if entry is not None else None

    def remember(self, msg_id: str, seq: int, ts_ns: int) -> None:
        if self._window_ns() <= 0:
            return  # no window (a sourcing stream that set none): no dedup, as nats-server
        self._ids[msg_id] = (seq, ts_ns)
        self._ids.move_to_end(msg_id)
        while len(self._ids) > self._max_ids:
            self._ids.popitem(last=False)

    def _trim(self) -> None:
        cutoff = self._now_ns() - self._window_ns()
        ids = self._ids
        while ids:
            if next(iter(ids.values()))[1] >= cutoff:
                break
            ids.popitem(last=False)

    def rebuild(self, store: MessageStore) -> None:
        """Recover the ids still inside the window from the stored messages."""
        window = self._window_ns()
        if window <= 0:
            return
        # Only messages with a header can carry an id: the store names them without
        # reading the others (a million plain messages cost no read at all).
        for seq in store.recent_headed(self._now_ns() - window, self._max_ids):
            msg = store.load(seq)
            if msg is None:
                continue
            msg_id = header_value(msg.header, MSG_ID)
            if msg_id:
                self.remember(msg_id, msg.seq, msg.ts_ns)
