"""What expires in a stream, and when: `max_age`, per-message TTLs, subject delete markers.

`Stream.expire` asks its `StreamExpiry` to remove the messages past `max_age` (except
`Nats-TTL: never` ones) or past their own TTL (`ttl.py`) and to say how long until the
next one is due. With `subject_delete_marker_ttl`, a subject whose last message expired
gets a marker in its place (`_place_markers`), so KV watchers learn the key is gone; the
markers stored are handed to the stream to report (`take_markers`, `Stream.on_markers`),
as the removals are (`Stream.on_removed`).

Nothing here owns a timer or a clock, so expiry is exact under a manual clock in tests:
`next_wakeup_ns` is the earliest moment an expiry may be due as far as the stream knows,
lowered by every publish that brings one forward (`ttl_stored`, `wake_by`), and the
engine's `ExpiryTimer` (expiry_timer.py) re-arms whenever that moment moves earlier.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from brook.jetstream import counters
from brook.jetstream import ttl as ttls
from brook.jetstream.store.base import StoredMessage
from brook.protocol import headers as hdrs

if TYPE_CHECKING:
    from brook.jetstream.stream import Stream

# A subject delete marker (nats-server 2.11+); %b is the marker TTL in Go duration form.
_MARKER_HEADER = (
    b"NATS/1.0\r\nNats-Marker-Reason: MaxAge\r\nNats-TTL: %b\r\nNats-Rollup: sub\r\n\r\n"
)
# Forget stale TTL entries once they could outnumber live messages by this much (amortised:
# a compaction at least halves the index).
_TTL_SLACK = 64


class StreamExpiry:
    def __init__(
        self,
        stream: Stream,
        *,
        remove: Callable[[int], bool],
        removed: Callable[[list[int]], None],
        enforce_limits: Callable[[], None],
    ) -> None:
        self._stream = stream  # its config (which an update replaces) and its store
        # The stream's removals on its own, reported to its consumers (`on_removed`) when
        # the expiry is done: `remove` one message (False if it is gone already), or note
        # those the store `removed` in bulk.
        self._remove = remove
        self._removed = removed
        self._enforce_limits = enforce_limits  # the discard-old limits, after markers
        self.ttls = ttls.TtlIndex()  # the messages with a TTL of their own
        # Lowest sequence the max_age walk still has to look at: everything stored below it
        # is exempt (`never`), so a walk need not load those messages again.
        self._age_floor = 0
        # Earliest moment an expiry may be due, as far as the stream knows; the engine
        # keeps its timer at or before it (module docstring).
        self.next_wakeup_ns: int | None = None
        self._markers: list[tuple[str, int]] = []  # stored, not yet taken: (subject, seq)

    def wake_by(self, deadline: int) -> None:
        """Record that an expiry may be due by `deadline` (the engine reads it)."""
        if self.next_wakeup_ns is None or deadline < self.next_wakeup_ns:
            self.next_wakeup_ns = deadline

    def ttl_stored(self, seq: int, now: int, ttl: int) -> None:
        """Message `seq`, stored at `now`, has a TTL of its own (`ttl.parse_ttl`)."""
        due = self.ttls.add(seq, now, ttl)
        if due is not None:
            self.wake_by(due)

    def take_markers(self) -> list[tuple[str, int]]:
        """The markers stored since the last call, as (subject, sequence), in order."""
        markers, self._markers = self._markers, []
        return markers

    def remove_due(self, now: int) -> int | None:
        """Remove what is due at `now`; returns ns until the next expiry of either kind,
        or None when nothing will expire. A store failure propagates (`StoreError`)."""
        store = self._stream.store
        # Subjects whose last message expired, in removal order (markers go there).
        marking = self._stream.config.subject_delete_marker_ttl > 0
        emptied: list[str] | None = [] if marking else None
        kept = []  # a counter's total stays (`_remove_expired`): tried again a second later
        for seq in self.ttls.pop_due(now):
            if emptied is None:
                self._remove(seq)  # False when it went some other way: harmless
            else:
                msg = store.load(seq)
                if msg is not None and not self._remove_expired(msg, emptied):
                    kept.append(seq)
        for seq in kept:
            self.ttls.add(seq, now, 1)
        next_age = self._expire_max_age(now, emptied)
        if emptied:
            self._place_markers(emptied, now)
        next_ttl = None
        if len(self.ttls):
            # After the max_age pass, so entries of messages it just removed are skipped.
            next_ttl = self.ttls.next_deadline(self._stored)
            if len(self.ttls) > 2 * store.state().messages + _TTL_SLACK:
                self.ttls.compact(self._stored)
        due = [d for d in (next_ttl, next_age) if d is not None]
        if not due:
            return None
        return max(min(due) - now, 0)

    def _expire_max_age(self, now: int, emptied: list[str] | None) -> int | None:
        """Remove messages at least max_age old; returns when the next one will be.

        `emptied` (markers on) collects the subjects left without messages, which needs
        the message-by-message walk rather than the store's bulk expiry."""
        max_age = self._stream.config.max_age
        if max_age <= 0:
            return None
        cutoff = now - max_age + 1  # a message exactly max_age old is expired
        store = self._stream.store
        if not self.ttls.has_exempt and emptied is None:
            self._removed(store.expire_before(cutoff))
            state = store.state()
            return state.first_ts_ns + max_age if state.messages else None
        # Some messages are exempt (`Nats-TTL: never`): walk in sequence order, removing the
        # old ones one by one and stepping over exempt ones, as nats-server does. The floor
        # keeps each exempt message from being loaded again on every later walk.
        seq = max(self._age_floor, store.state().first_seq)
        held = 0  # the first message kept (a counter's total): the floor stays there
        while True:
            msg = store.load_next("", seq)
            if msg is None:
                self._age_floor = held or seq
                return None
            if self.ttls.is_exempt(msg.seq):
                seq = msg.seq + 1
                self._age_floor = held or seq
                continue
            if msg.ts_ns >= cutoff:
                self._age_floor = held or msg.seq
                return msg.ts_ns + max_age
            if emptied is None:
                self._remove(msg.seq)
            elif not self._remove_expired(msg, emptied):
                held = held or msg.seq
            seq = msg.seq + 1
            self._age_floor = held or seq

    def _remove_expired(self, msg: StoredMessage, emptied: list[str]) -> bool:
        """Remove an expired message; note its subject if that was its last message and
        it was not itself a delete marker (markers never beget markers, as nats-server).
        False when the message stays (a counter's total: `counters.outlives_expiry`)."""
        store = self._stream.store
        if counters.outlives_expiry(self._stream.config.allow_msg_counter, store, msg.subject):
            return False
        if not self._remove(msg.seq):
            return True
        if not _is_delete_marker(msg.header) and store.subject_state(msg.subject).messages == 0:
            emptied.append(msg.subject)
        return True

    def _place_markers(self, subjects: list[str], now: int) -> None:
        """Store nats-server's subject delete marker on each subject: no payload, headers
        `Nats-Marker-Reason: MaxAge`, `Nats-TTL: <marker TTL, whole seconds, Go form>`,
        `Nats-Rollup: sub`. Markers are stored directly (core subscribers never see them,
        as with nats-server) and expire by their own TTL (and max_age)."""
        ttl_s = self._stream.config.subject_delete_marker_ttl // ttls.NS_PER_S
        header = _MARKER_HEADER % ttls.format_seconds(ttl_s).encode()
        store = self._stream.store
        for subject in subjects:
            seq = store.store(subject, header, b"", now)
            self._markers.append((subject, seq))
            self.ttl_stored(seq, now, ttl_s)
            # No rollup to apply: the subject had no messages left.
        self._enforce_limits()

    def _stored(self, seq: int) -> bool:
        store = self._stream.store
        return seq >= store.state().first_seq and store.load(seq) is not None

    def rebuild(self) -> None:
        """After a restart, recover the TTL of every stored message from its header.

        Only streams with `allow_msg_ttl` pay for this scan: a stream without it cannot hold
        a message with a TTL (such publishes are refused), and `allow_msg_ttl` cannot be
        turned off once on. The header is read exactly as at publish time, so a message
        gets the same TTL it was acknowledged with.
        """
        store = self._stream.store
        msg = store.load_next("", 0)
        while msg is not None:
            header = msg.header
            if header and header.find(b"Nats-TTL") >= 0:
                ttl = _stored_ttl(header)
                if ttl:
                    self.ttls.add(msg.seq, msg.ts_ns, ttl)
            msg = store.load_next("", msg.seq + 1)


def _is_delete_marker(header: bytes | None) -> bool:
    """A server marker (`Nats-Marker-Reason`) or a KV purge (`KV-Operation: PURGE`): the
    messages whose expiry leaves no new marker behind (nats-server's isSubjectDeleteMarker)."""
    if not header or (header.find(b"Nats-Marker-Reason") < 0 and header.find(b"PURGE") < 0):
        return False
    try:
        block = hdrs.parse(header)
    except hdrs.HeaderError:
        return False
    return bool(block.get("Nats-Marker-Reason")) or block.get("KV-Operation") == "PURGE"


def _stored_ttl(header: bytes) -> int:
    """The TTL a stored message was accepted with: 0 when none (or its header block is not
    one `ingest` would have read JetStream headers from)."""
    try:
        hdrs.parse(header)
    except hdrs.HeaderError:
        return 0
    value = ttls.header_value(header)
    if not value:
        return 0
    try:
        return ttls.parse_ttl(value)
    except ttls.InvalidTTL:
        return 0
