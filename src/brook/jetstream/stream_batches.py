"""A stream's batches: atomic batches (`allow_atomic`, batch.py) staged and committed
through the checks of a publish, fast batches (`allow_batched`, fast_batch.py) stored at
once with their replies, the advisory of an abandoned batch, and what a crash left of a
commit cut off when the stream opens (ADR 0019)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from brook.jetstream import versioning
from brook.jetstream.batch import (
    AtomicBatches,
    Commit,
    abandoned_advisory,
    check_commit,
    uncommitted_tail,
)
from brook.jetstream.errors import ApiError, api_error
from brook.jetstream.fast_batch import FastBatches, parse_reply
from brook.jetstream.ingested import Batched, Ingested, plain_ingested
from brook.jetstream.store.base import StoreError
from brook.protocol import headers as hdrs

if TYPE_CHECKING:
    from brook.jetstream.ingress import PlainPublish
    from brook.jetstream.models.stream_config import StreamConfig
    from brook.jetstream.store.base import MessageStore
    from brook.jetstream.stream import Stream

log = logging.getLogger("brook.stream")


class StreamBatches:
    """`Stream`'s batches part (a mixin, ADR 0031)."""

    if TYPE_CHECKING:  # what it uses of `Stream`, which sets all of it
        name: str
        config: StreamConfig
        store: MessageStore
        now_ns: Callable[[], int]
        batches: AtomicBatches
        fast_batches: FastBatches
        _committing: bool
        on_markers: Callable[[list[tuple[str, int]]], None] | None
        _send_ack: Callable[[bytes, bytes], object]

        def write_failed(self, what: str, error: StoreError) -> None: ...

        plain: PlainPublish | None

        def _ingest(
            self, subject: str, reply: bytes | None, header: bytes | None, data: bytes
        ) -> Ingested: ...

    def _drop_uncommitted_batch(self) -> None:
        """Remove what a crash left of a batch's commit (batch.py), before anything reads
        the store: no consumer saw it, no PubAck named it. Only a stream that takes atomic
        batches has any, as nats-server looks only there."""
        if not self.config.allow_atomic:
            return
        tail = uncommitted_tail(self.store)
        if not tail:
            return
        try:
            self.store.truncate(tail.start - 1)
        except StoreError as exc:
            self.write_failed("remove an uncommitted atomic batch", exc)
            return
        log.warning(
            "stream %s: cut off messages %d-%d, an atomic batch whose commit a crash cut short",
            self.name,
            tail.start,
            tail.stop - 1,
        )

    def _in_batch(self, batch_id: bytes, subject: str, header: bytes, data: bytes) -> Batched:
        """One message of an atomic batch (batch.py): staged, or the commit, which stores
        the whole batch, each message through the checks of a publish, or nothing."""
        if not self.config.allow_atomic:
            raise api_error("ATOMIC_PUBLISH_DISABLED")
        commit = self.batches.add(batch_id, subject, header, data)
        if commit is None:
            return Batched(0, False)
        return self._commit(commit)

    def _fast_batch(
        self, raw_subject: bytes, reply: bytes, header: bytes | None, data: bytes
    ) -> Ingested:
        """One message (or ping) of a fast batch (fast_batch.py), after the checks a
        publish has before its batch's (sealed, `max_msg_size`): stored at once through
        the checks of a publish, its replies (flow acks, gaps, errors, the PubAck) sent by
        the batch. Returns what the stream stored, for the consumers (`Ingested(0, False)`
        for nothing); raises the `ApiError` to answer as a plain publish's. `Stream.ingest`
        hands it a fast batch's message first thing (ADR 0066)."""
        config = self.config
        if config.sealed:
            raise api_error("STREAM_SEALED")
        if 0 <= config.max_msg_size < len(data) + (len(header) if header else 0):
            raise api_error("STREAM_MESSAGE_EXCEEDS_MAXIMUM")
        if not config.allow_batched:
            raise api_error("BATCH_PUBLISH_DISABLED")
        op = parse_reply(reply)
        refused = False
        if header and hdrs.raw_value(header, versioning.REQUIRED_API_LEVEL_HEADER):
            refused = versioning.refuses(header)  # once the batch is found (fast_batch.py)
            header = versioning.without_header(header) or None  # else kept out, as nats-server
        batches = self.fast_batches
        b = batches.begin(op, reply, level_refused=refused)
        if b is None:
            return Ingested(0, False)
        try:
            # A Spark write's rows, say: the usual publish's short path when the stream
            # and the header allow it (ADR 0062/0067), else every check of a publish.
            plain = self.plain
            seq = plain.store(raw_subject, header, data) if plain is not None else 0
            if seq:
                stored = plain_ingested(seq)
            else:
                self._committing = True
                try:
                    subject = raw_subject.decode("utf-8", "surrogateescape")
                    stored = self._ingest(subject, None, header, data)
                finally:
                    self._committing = False
        except ApiError as err:
            batches.refused(b, op, reply, err)
            return Ingested(0, False)
        if batches.stored(b, op, reply, stored.seq, stored.duplicate):
            return stored  # stored now (not a duplicate): seq and kept as the stream says
        return Ingested(0, False)

    def _batch_abandoned(self, batch_id: str, reason: str, *, domain: str = "") -> None:
        """Announce an abandoned batch as nats-server does (batch.py), naming the
        JetStream `domain` the stream is in ("": none)."""
        advisory = abandoned_advisory(self.name, batch_id, reason, self.now_ns(), domain)
        self._send_ack(*advisory)

    def _commit(self, commit: Commit) -> Batched:
        check_commit(cast("Stream", self), commit)  # the mixin's only user
        stored: list[tuple[str, int]] = []
        seq = 0
        self._committing = True
        try:
            for message in commit.messages:
                result = self._ingest(message.subject, None, message.header, message.data)
                seq = result.seq
                if result.kept:
                    stored.append((message.subject, seq))
        finally:
            self._committing = False
        if stored and self.on_markers is not None:
            self.on_markers(stored)
        return Batched(seq, False, batch_id=commit.batch_id, count=len(commit.messages))
