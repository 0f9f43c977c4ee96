"""A stream's limits and removals: the limits a message meets before it is stored (the
store limits of quota.py, `discard: new`), the discard-old limits applied after it (each
subject's `max_msgs_per_subject`, then `max_msgs` and `max_bytes`), STREAM.PURGE and
STREAM.MSG.DELETE, and every removal made on its own reported to the consumers in order
(`on_removed`) once the operation that made it is done."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from brook.jetstream.errors import api_error
from brook.jetstream.store.base import PurgeResult

if TYPE_CHECKING:
    from brook.jetstream.models.stream_config import StreamConfig
    from brook.jetstream.quota import Quota
    from brook.jetstream.store.base import MessageStore


class StreamLimits:
    """`Stream`'s limits part (a mixin, ADR 0031)."""

    if TYPE_CHECKING:  # what it uses of `Stream`, which sets all of it
        config: StreamConfig
        store: MessageStore
        quota: Quota | None
        on_purge: Callable[[PurgeResult, str, int], None] | None
        on_removed: Callable[[list[int]], None] | None
        _removed: list[int]

    def check_mirrored(self, subject: str, header: bytes | None, data: bytes) -> None:
        """The checks of a publish that a mirror's message meets too (mirror.py): the
        mirror's own sealed, `max_msg_size` and `discard: new` limits, and the server's and
        account's store limits (quota.py); raises their ApiError."""
        config = self.config
        if config.sealed:
            raise api_error("STREAM_SEALED")
        if 0 <= config.max_msg_size < len(data) + (len(header) if header else 0):
            raise api_error("STREAM_MESSAGE_EXCEEDS_MAXIMUM")
        if self.quota is not None:
            self.quota.admit(self.accounted_size(subject, header, data))
        if config.discard == "new":
            self._check_discard_new(subject, header, data, None)

    def _check_discard_new(
        self, subject: str, header: bytes | None, data: bytes, rollup: str | None
    ) -> None:
        config = self.config
        state = self.store.state()
        per_subject = config.max_msgs_per_subject
        replaces_oldest = False
        if per_subject > 0:
            on_subject = self.store.subject_state(subject).messages
            if on_subject >= per_subject:
                if config.discard_new_per_subject and rollup is None:
                    raise api_error(
                        "STREAM_STORE_FAILED", err="maximum messages per subject exceeded"
                    )
                replaces_oldest = True
        if 0 < config.max_msgs <= state.messages and not replaces_oldest:
            raise api_error("STREAM_STORE_FAILED", err="maximum messages exceeded")
        if config.max_bytes > 0:
            incoming = self.accounted_size(subject, header, data)
            # A message that will push out its subject's oldest one (a KV key at its
            # history) fits if that one is at least as large, as with nats-server.
            if state.bytes + incoming > config.max_bytes and (
                not replaces_oldest or self._oldest_size(subject) < incoming
            ):
                raise api_error("STREAM_STORE_FAILED", err="maximum bytes exceeded")

    def _oldest_size(self, subject: str) -> int:
        oldest = self.store.load_next(subject, 0)
        if oldest is None:
            return 0
        return self.accounted_size(oldest.subject, oldest.header, oldest.data)

    def accounted_size(self, subject: str, header: bytes | None, data: bytes) -> int:
        """A message's size as the stream's `max_bytes` counts it (nats-server's store
        record sizes), for the discard-new checks here and a batch's (batch.py)."""
        n = len(subject.encode()) + len(data)
        if self.config.storage == "memory":
            return n + (len(header) if header else 0) + 16
        return n + (34 + len(header) if header else 30)

    def _enforce_limits(self, subject: str) -> None:
        """discard old: drop the oldest messages (per subject for the per-subject limit).
        After every publish: each part is called only when its limit is set."""
        config = self.config
        if config.max_msgs_per_subject > 0:
            self._enforce_subject_limit(subject)
        if config.max_msgs > 0 or config.max_bytes > 0:
            self._enforce_stream_limits()

    def apply_limits(self, subjects: Iterable[str]) -> None:
        """After messages on `subjects` were stored by another path than a publish (a
        mirror's run): the discard-old limits (each subject's, then the stream's), what they
        removed reported (`on_removed`)."""
        try:
            for subject in subjects:
                self._enforce_subject_limit(subject)
            self._enforce_stream_limits()
        finally:
            if self._removed:
                self._report_removed()

    def enforce_all_limits(self) -> None:
        """After a config update that may have tightened limits."""
        try:
            if self.config.max_msgs_per_subject > 0:
                for subject in self.store.subject_counts(">"):
                    self._enforce_subject_limit(subject)
            self._enforce_stream_limits()
        finally:
            self._report_removed()

    def purge(self, subject: str, up_to_seq: int, keep: int) -> PurgeResult:
        """STREAM.PURGE: remove the messages of `subject` (every one when empty) below
        `up_to_seq`, or all but the last `keep`; the consumers hear of it (`on_purge`)."""
        result = self.store.purge(subject=subject or None, up_to_seq=up_to_seq, keep=keep)
        if self.on_purge is not None:
            self.on_purge(result, subject, keep)
        return result

    def remove(self, seq: int, *, erase: bool = False) -> bool:
        """STREAM.MSG.DELETE: remove message `seq` (overwritten first with `erase`);
        False if there is none."""
        if not self._remove(seq, erase=erase):
            return False
        self._report_removed()
        return True

    def _remove(self, seq: int, *, erase: bool = False) -> bool:
        """Remove one message on its own, noted for the consumers (`on_removed`)."""
        if not self.store.remove(seq, erase=erase):
            return False
        self._removed.append(seq)
        return True

    def _report_removed(self) -> None:
        # Emptied in place: the stream's `PlainPublish` holds this very list (ingress.py).
        removed = self._removed.copy()
        self._removed.clear()
        if removed and self.on_removed is not None:
            self.on_removed(removed)

    def _enforce_subject_limit(self, subject: str) -> None:
        limit = self.config.max_msgs_per_subject
        if limit <= 0:
            return
        store = self.store
        excess = store.subject_state(subject).messages - limit
        while excess > 0:
            oldest = store.load_next(subject, 0)
            if oldest is None:
                break
            self._remove(oldest.seq)
            excess -= 1

    def _enforce_stream_limits(self) -> None:
        config = self.config
        if config.discard == "new" or (config.max_msgs <= 0 and config.max_bytes <= 0):
            return
        store = self.store
        state = store.state()
        while state.messages and (
            0 < config.max_msgs < state.messages or 0 < config.max_bytes < state.bytes
        ):
            self._remove(state.first_seq)
            state = store.state()
