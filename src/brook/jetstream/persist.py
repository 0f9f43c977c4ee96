"""`persist_mode: "async"`: a file stream whose PubAcks do not wait for the fsync.

By default a file stream's PubAck waits for the group commit covering its message (ADR
0004). A stream created with `persist_mode: "async"` (nats-server 2.12+, an opt-in fixed at
creation) acknowledges once the message is written to the operating system, which
`store()` does before it returns: a crash of the Brook process loses nothing acknowledged,
a power loss may lose what the last fsync did not cover. The fsync still follows at once
in the background: `BackgroundSync` keeps one group-commit request outstanding for the
stream while it is written to, so an async stream costs the committer's backlog at most
one waiting entry, never one per message (nats-server flushes such a stream from a
background loop and fsyncs it on its `sync_interval`, by default every two minutes).
Compiled with the committer (ADR 0068): `written` runs for every such message.
"""

from __future__ import annotations

from brook.jetstream.commit import GroupCommitter


class BackgroundSync:
    """Asks the committer for a sync after every write, one request at a time: writes made
    while a request is outstanding (its sync may have started before them) ask for one
    more once it is done, so every write is followed by a sync that started after it."""

    __slots__ = ("_committer", "_outstanding", "_written_since")

    def __init__(self, committer: GroupCommitter) -> None:
        self._committer = committer
        self._outstanding = False
        self._written_since = False

    def written(self) -> None:
        """Something was written to the store: make sure a sync follows."""
        if self._outstanding:
            self._written_since = True
            return
        self._outstanding = True
        self._written_since = False
        self._committer.request(self._synced)

    def _synced(self, _error: BaseException | None) -> None:
        # A failed sync is logged by the committer; the next write asks again.
        self._outstanding = False
        if self._written_since:
            self.written()
