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
from brook.jetstream.publish_headers import MSG_ID
from brook.jetstream.store.base import MessageStore
from brook.protocol import headers as hdrs

__all__ = ["MSG_ID", "DedupWindow", "header_value"]


def header_value(header: bytes | None, name: str) -> str | None:
    if not header:
        return None
    try:
        return hdrs.parse(header).get(name)
    except hdrs.HeaderError:
        return None


class DedupWindow:
    """The ids of one stream's window. Checked for every publish that carries an id, so
    the check is one dict lookup: an entry found is tested for its age there, and the
    expired ones are trimmed from the front when an id is remembered, only when the
    oldest is past the window (`_oldest_ns`), with the time of the message remembered
    (the publish's clock reading: no second one)."""

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
        self._oldest_ns = 0  # the time of the first entry (any value when there is none)
        # The `Nats-Msg-Id` of the stream's newest message ("" for none), for
        # `Nats-Expected-Last-Msg-Id`: kept here, not on `Stream`, whose instance
        # attributes must stay at 29 or fewer (stream.py, ADR 0062).
        self.last_id = ""

    def __len__(self) -> int:
        return len(self._ids)

    def lookup(self, msg_id: str) -> int | None:
        """The sequence of the message that carried `msg_id` within the window, if any."""
        entry = self._ids.get(msg_id)
        if entry is None:
            return None
        if entry[1] < self._now_ns() - self._window_ns():
            self._trim(self._now_ns() - self._window_ns())  # it and all before it expired
            return None
        return entry[0]

    def remember(self, msg_id: str, seq: int, ts_ns: int) -> None:
        window = self._window_ns()
        if window <= 0:
            return  # no window (a sourcing stream that set none): no dedup, as nats-server
        ids = self._ids
        if not ids:
            self._oldest_ns = ts_ns
        elif msg_id in ids:
            ids.move_to_end(msg_id)
        ids[msg_id] = (seq, ts_ns)
        if len(ids) > self._max_ids:
            while len(ids) > self._max_ids:
                ids.popitem(last=False)
            self._oldest_ns = next(iter(ids.values()))[1]
        if self._oldest_ns < ts_ns - window:
            self._trim(ts_ns - window)

    def _trim(self, cutoff: int) -> None:
        """Forget the ids at the front older than `cutoff`."""
        ids = self._ids
        while ids:
            oldest = next(iter(ids.values()))[1]
            if oldest >= cutoff:
                self._oldest_ns = oldest
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
