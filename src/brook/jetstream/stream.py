"""A stream: captures subjects into its store and answers each publish with a PubAck.

`Stream.ingest` applies nats-server's checks in the order nats-server 2.15.1 answers them
(checked by publishing messages that fail several checks at once; wire reference §4.3
lists an older order): sealed, `max_msg_size`, batch publishes (`stream_batches.py`:
fast ones by `fast_batch.py` and `_fast_batch`, each message then through the checks
below; atomic ones staged and committed by `batch.py` and `_in_batch`), header size, counter
increment (`counters.py`), expected stream, TTL permission, expected last subject
sequence, expected last sequence, duplicate `Nats-Msg-Id`, expected last msg id, rollup
permission, a counter's new total, TTL value, discard-new limits;
then stores, records the msg id and the message's TTL, applies the rollup and the
discard-old limits (§4.4; the limits and removals are `stream_limits.py`'s). What it did
is an `Ingested` (`ingested.py`). Every PubAck, success or error, leaves through the durability
gate in order: with a file store it is sent only after the group commit covering the
message has reached stable storage (`commit.py`), unless the stream was created with
`persist_mode: "async"` (`persist.py`).

Expiry (`max_age`, per-message TTLs, subject delete markers) is the stream's
`StreamExpiry` (`expiry.py`); `expire()` runs it and reports what it removed and stored.
The stream owns no expiry timer: the engine's `ExpiryTimer` (`expiry_timer.py`) runs
`expire()` when `expiry.next_wakeup_ns` is due. `expire()` also fires the message
schedules that are due (`schedules.fire_due`): a message with
`Nats-Schedule*` headers is checked after the expected sequences and before dedup, as
nats-server checks it, and each stored message keeps the stream's `ScheduleIndex` up to
date; a schedule due lowers `next_wakeup_ns` as a TTL does. Its staged atomic batches have
their own idle timer, on the same clock (`AtomicBatches.timer`, batch.py).

A full disk (`space.py`): a file stream asks `StoreSpace.admit` before storing (after the
header checks and dedup, where nats-server checks its storage limit) and answers 10023
"insufficient resources" when there is no room, as it does when the write fails with
ENOSPC all the same; nothing is stored then. Any other store failure is answered with
10077 and logged at most every 10 seconds. A failure after the message is stored (its
rollup or a limit's removals) leaves the message acknowledged and is logged.

Subject mappings (`reconfigure` compiles them): the stream's `subject_transform`
(`input_transform`) is applied by whoever hands it a message, before `ingest`, which
stores under the subject it is given; its `republish` publishes each stored message again
(`republish.py`).

The stream owns no sockets and no clock of its own: `now_ns` is injected, so expiry and
the duplicate window are exact in tests.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from brook.jetstream import counters
from brook.jetstream import ttl as ttls
from brook.jetstream.batch import BATCH_ID, AtomicBatches, BatchLimits
from brook.jetstream.commit import GroupCommitter
from brook.jetstream.dedup import MSG_ID, DedupWindow, header_value
from brook.jetstream.errors import ApiError, api_error
from brook.jetstream.expiry import StreamExpiry
from brook.jetstream.fast_batch import SUFFIX as FAST_SUFFIX
from brook.jetstream.fast_batch import FastBatches
from brook.jetstream.ingested import Batched, Counted, Ingested, plain_ingested
from brook.jetstream.ingress import Ingress, PlainPublish, Rearm, pub_ack
from brook.jetstream.models.stream_config import StreamConfig
from brook.jetstream.persist import BackgroundSync
from brook.jetstream.publish_headers import (
    EXPECTED_LAST_MSG_ID,
    EXPECTED_LAST_SEQ,
    EXPECTED_LAST_SUBJ_SEQ,
    EXPECTED_STREAM,
    MAX_HEADER_BYTES,
    ROLLUP,
    raw_msg_id,
    uint,
)
from brook.jetstream.republish import MessageSender, Republisher
from brook.jetstream.schedules import PREFIX as SCHEDULE_PREFIX
from brook.jetstream.schedules import ScheduleIndex, check_schedule, fire_due, schedule_stored
from brook.jetstream.sourcing import STREAM_SOURCE_HEADER
from brook.jetstream.store.base import MessageStore, PurgeResult, StoreError, StoreFullError
from brook.jetstream.stream_batches import StreamBatches
from brook.jetstream.stream_limits import StreamLimits
from brook.jetstream.stream_sourced import StreamSourcedRuns
from brook.protocol import headers as hdrs
from brook.routing.transform import SubjectTransform

if TYPE_CHECKING:
    from brook.jetstream.consumer_index import ConsumerIndex
    from brook.jetstream.quota import Quota
    from brook.jetstream.retention import StreamRetention
    from brook.jetstream.space import StoreSpace

log = logging.getLogger("brook.stream")

AckSender = Callable[[bytes, bytes], object]  # a plain publish: PubAcks, batch advisories
"""(reply subject, PubAck JSON) -> anything (ignored): `InternalClient.publish` itself"""

# An expiry that failed to write its removals (a full disk) is tried again this much later.
_EXPIRY_RETRY_NS = 1_000_000_000


class Stream(StreamBatches, StreamLimits, StreamSourcedRuns):
    def __init__(
        self,
        config: StreamConfig,
        store: MessageStore,
        *,
        now_ns: Callable[[], int],
        send_ack: AckSender,
        committer: GroupCommitter | None,
        created_ns: int,
        space: StoreSpace | None = None,
        send_message: MessageSender | None = None,
        batch_limits: BatchLimits | None = None,
        quota: Quota | None = None,
        domain: str = "",
    ) -> None:
        self.store = store
        # What every PubAck says after `"stream":`: the name, and the JetStream domain
        # when there is one (nats-server's `pubAck` template: stream, domain, seq).
        ack_stream = json.dumps(config.name).encode()
        if domain:
            ack_stream += b',"domain":' + json.dumps(domain).encode()
        self._send_message = send_message  # republish's way out (none: nothing republished)
        batch_limits = batch_limits or BatchLimits()
        # batch.py; its advisory names the JetStream domain, kept there rather than here
        # (past 29 instance attributes every attribute read of a publish gets slower)
        self.batches = AtomicBatches(
            batch_limits, now_ns, functools.partial(self._batch_abandoned, domain=domain)
        )
        self.fast_batches = FastBatches(  # fast_batch.py: replies through the durability gate
            batch_limits, now_ns, self._after_durable, ack_stream
        )
        # A batch's messages are being stored (`_commit`, `_fast_batch`): their
        # `Nats-Batch-*` headers are data then.
        self._committing = False
        # Message schedules (schedules.py), when the stream allows them: what is armed,
        # rebuilt from the stored messages; `_produced`: the header block of the message
        # a firing schedule is storing (exempt from the client's checks, and only it).
        self.schedules: ScheduleIndex | None = None
        self._produced: bytes | None = None
        self.now_ns = now_ns
        self._sourcing = False  # a source's message is being stored (`ingest_sourced`)
        self._configure(config)
        self.name: str = config.name
        self.created_ns = created_ns
        self._send_ack = send_ack
        self._committer = committer
        if committer is not None:
            committer.acks_by(send_ack, self._failed_ack)
        # What the stream stores with no PubAck waiting (a source's message, a schedule's)
        # is synced soon after, one commit request at a time (`sync_soon`); with
        # persist_mode "async" (persist.py) so is everything: PubAcks leave at once, the
        # fsync follows, and there is no committer to wait for. (One attribute for both:
        # past 29 instance attributes CPython 3.11 stops sharing a class's dict keys, and
        # every attribute read of the publish path gets slower.)
        self._soon_sync = BackgroundSync(committer) if committer is not None else None
        if committer is not None and config.persist_mode == "async":
            self._committer = None
        self.space = space  # file streams: room on the disk (module docstring)
        self.quota = quota  # the server's and account's store limits (quota.py), if any
        self._drop_uncommitted_batch()
        self.dedup = DedupWindow(lambda: self.config.duplicate_window, now_ns)
        # The Nats-Msg-Id of the newest message, for Nats-Expected-Last-Msg-Id.
        last = store.load_last(">")
        self.dedup.last_id = (header_value(last.header, MSG_ID) if last else None) or ""
        self._name_json = ack_stream
        self.consumer_count = 0
        # Set by the consumer registry (consumer/registry.py): interest and workqueue
        # retention (retention.py), and what a purge (STREAM.PURGE, a rollup) does to the
        # consumers (`ConsumerRegistry.purged`).
        self.retention: StreamRetention | None = None
        self.on_purge: Callable[[PurgeResult, str, int], None] | None = None
        # Messages removed on their own (a discard-old limit, max_age, a TTL, `remove`),
        # reported in order once the operation that removed them is done: nats-server's
        # store reports each such removal, and a consumer terminates a delivery of it
        # still pending (`ConsumerRegistry.removed`).
        self.on_removed: Callable[[list[int]], None] | None = None
        self._removed: list[int] = []
        # Subject delete markers an expiry stored, as (subject, sequence), reported once the
        # expiry is done, after its removals: the consumers whose filter matches one have
        # something new to deliver (`ConsumerRegistry.markers_stored`). (A publish says
        # what it stored by returning `Ingested`.)
        self.on_markers: Callable[[list[tuple[str, int]]], None] | None = None
        # What expires and when (expiry.py); the engine's timer reads `next_wakeup_ns`.
        self.expiry = StreamExpiry(
            self,
            remove=self._remove,
            removed=lambda seqs: self._removed.extend(seqs),
            enforce_limits=self._enforce_stream_limits,
        )
        self.dedup.rebuild(store)
        if config.allow_msg_ttl:
            self.expiry.rebuild()
        self.plain = self._plain_publish()

    def reconfigure(self, config: StreamConfig) -> None:
        """Take a new configuration, its subject mappings compiled once (the engine then
        makes the stream's `Ingress` anew: engine.py)."""
        self._configure(config)
        self.plain = self._plain_publish()

    def _configure(self, config: StreamConfig) -> None:
        self.config = config
        transform = config.subject_transform
        # The subject transform, None when there is none (or it has no destination).
        self.input_transform = (
            None if transform is None else SubjectTransform.compile(transform.src, transform.dest)
        )
        self._republish = Republisher.compile(config.republish, config.name, self._send_message)
        if not config.allow_atomic:
            self.batches.clear()  # as nats-server drops them when atomic publish is turned off
        if config.allow_msg_schedules and self.schedules is None:  # at open, or turned on
            self.schedules = ScheduleIndex.rebuild(self.store, self.now_ns())
        if not config.allow_batched:
            self.fast_batches.clear()

    def _plain_publish(self) -> PlainPublish | None:
        """The usual publish's short path (ingress.py, ADR 0062/0067), when nothing in
        the configuration asks for more than dedup, the limits and the store."""
        config = self.config
        if (
            config.sealed
            or config.allow_msg_counter
            or config.retention == "interest"
            or self._republish is not None
            or self.schedules is not None
        ):
            return None
        return PlainPublish(
            self,
            self.store,
            self.dedup,
            self.expiry,
            self._removed,
            self.now_ns,
            max_msg_size=config.max_msg_size,
            discard_new=config.discard == "new",
            max_age=config.max_age,
            limits=(config.max_msgs_per_subject > 0 or config.max_msgs > 0 or config.max_bytes > 0),
            quota=self.quota,
            space=self.space,
        )

    # ------------------------------------------------------------------ publishing

    def ingest(
        self, subject: bytes, reply: bytes | None, header: bytes | None, data: bytes
    ) -> Ingested:
        """Store a captured message under `subject` (the stream's `input_transform`
        applied already), (when there is a reply subject) acknowledge it, and
        say what was done. What it removed went to `on_removed` (and a rollup's purge to
        `on_purge`) before this returns."""
        try:
            # (a slice's compare, not `endswith`, which parses its arguments from a tuple)
            if (
                reply is not None
                and len(reply) > 4
                and reply[-4:] == FAST_SUFFIX
                and self._republish is None
            ):
                # A fast batch's message: its replies are the batch's (ADR 0066).
                result = self._fast_batch(subject, reply, header, data)
                if not self.config.no_ack:
                    return result
            else:
                plain = self.plain
                seq = (
                    plain.store(subject, header, data)
                    if plain is not None and self._produced is None
                    else 0
                )
                if seq:
                    result = plain_ingested(seq)
                elif self._republish is None:
                    result = self._ingest(
                        subject.decode("utf-8", "surrogateescape"), reply, header, data
                    )
                else:
                    result = self._ingest_republished(subject, reply, header, data)
        except ApiError as err:
            result = Ingested(0, False, False, err)
        self.answer(reply, result)
        return result

    def answer(self, reply: bytes | None, result: Ingested) -> None:
        """Answer what `ingest` did with a message (a PubAck through the durability gate,
        unless none is wanted), or see to its sync when nobody waits for it."""
        if reply is None or self.config.no_ack:
            if result.error is None and not result.duplicate and self._soon_sync is not None:
                # Nobody waits for it, yet it is not left in the write buffer (ADR 0051)
                # where only a later PubAck's sync would write it: synced soon, as the
                # stored messages of a source are.
                self._soon_sync.written()
            return
        if result.error is not None:
            ack = self._error_ack(result.error)
        elif result.duplicate:
            ack = pub_ack(self._name_json, -result.seq)
        elif type(result) is Batched:
            if result.replied:
                return
            if not result.count:
                self._send_ack(reply, b"")  # staged: the batch goes on
                return
            ack = b'{"stream":%b,"seq":%d,"batch":%b,"count":%d}' % (
                self._name_json,
                result.seq,
                json.dumps(result.batch_id).encode(),
                result.count,
            )
        elif self.config.allow_msg_counter:
            assert isinstance(result, Counted)
            ack = b'{"stream":%b,"seq":%d,"val":"%b"}' % (self._name_json, result.seq, result.total)
        else:
            ack = pub_ack(self._name_json, result.seq)
        committer = self._committer
        if committer is not None:  # `_after_durable`'s usual case inline (ADR 0062)
            committer.request_ack(reply, ack)
        else:
            self._after_durable(reply, ack)

    def ingress(
        self,
        consumers: ConsumerIndex[Any],
        stored: Callable[[list[Any], int], None],
        timer: Rearm,
    ) -> Ingress:
        """The stream's subscription handler (ingress.py): what it stores concerns
        `consumers` (told by `stored`), what brings an expiry forward re-arms `timer`.
        Made anew after each `reconfigure` (engine.py). The usual publish takes the
        compiled short path where its PubAck leaves by the committer or at once: not
        with `no_ack`, nor with persist_mode "async", whose sync follows the PubAck."""
        plain = self.plain
        if self.config.no_ack or (self._committer is None and self._soon_sync is not None):
            plain = None
        return Ingress(
            self,
            plain,
            self._committer,
            self._send_ack,
            self._name_json,
            consumers,
            stored,
            self.expiry,
            timer,
            self.config.max_age,
        )

    def ingest_sourced(self, subject: str, header: bytes, data: bytes) -> Ingested:
        """Store a message a source delivered (sources.py made its header and applied the
        stream's subject transform), as nats-server's `processJetStreamMsg` stores a
        sourced message: through the checks of a publish but those of what only a client
        may not do (a TTL or a rollup this stream does not allow, the `Nats-Stream-Source`
        header), dedup and limits included, then republished. The caller asks for the
        sync (`sync_soon`) once it noted what was stored. A run of them goes through
        `ingest_sourced_run` (stream_sourced.py), which stores its plain stretches
        together and hands every other message here."""
        self._sourcing = True
        try:
            if self._republish is None:
                return self._ingest(subject, None, header, data)
            raw = subject.encode("utf-8", "surrogateescape")
            return self._ingest_republished(raw, None, header, data)
        except ApiError as err:
            return Ingested(0, False, False, err)
        finally:
            self._sourcing = False

    def ingest_produced(self, subject: str, header: bytes, data: bytes) -> Ingested:
        """Store the message a firing schedule produced (schedules.py) as a publish
        without a reply, its scheduling headers exempt from a client's checks."""
        self._produced = header
        try:
            return self.ingest(subject.encode("utf-8", "surrogateescape"), None, header, data)
        finally:
            self._produced = None

    def sync_soon(self) -> None:
        """Messages stored with no PubAck waiting (a source's, a schedule's) become
        durable with a group commit soon after, asked for once however many are stored
        meanwhile (persist.py); for sources it also writes their positions."""
        if self._soon_sync is not None:
            self._soon_sync.written()

    def when_durable(self, callback: Callable[[BaseException | None], None]) -> None:
        """`callback` once what the stream stored so far is on stable storage: after its
        group commit (or at once where there is none: memory, the interval mode, or
        persist_mode "async", whose background sync is asked for)."""
        if self._committer is not None:
            self._committer.request(callback)
            return
        if self._soon_sync is not None:  # "async" (no committer): its background sync
            self._soon_sync.written()
        callback(None)

    def _ingest(
        self, subject: str, reply: bytes | None, header: bytes | None, data: bytes
    ) -> Ingested:
        if reply is not None and len(reply) > 4 and reply.endswith(FAST_SUFFIX):
            # (`ingest` hands it `_fast_batch` itself but on a stream that republishes)
            raw = subject.encode("utf-8", "surrogateescape")
            stored = self._fast_batch(raw, reply, header, data)
            return Batched(stored.seq, stored.kept, replied=True)
        config = self.config
        if config.sealed:
            raise api_error("STREAM_SEALED")
        size = len(data) + (len(header) if header else 0)
        if 0 <= config.max_msg_size < size:
            raise api_error("STREAM_MESSAGE_EXCEEDS_MAXIMUM")
        # `find`, not `in`: CPython 3.11's `bytes in bytes` first tries the needle as an
        # int and raises (and clears) a TypeError, 1,800 instructions per test (ADR 0057).
        if header is not None and header.find(BATCH_ID) >= 0:
            batch_id = hdrs.raw_value(header, BATCH_ID)
            # An empty id is no batch (nats-server); a batch's message being committed, or
            # the message a schedule stored by a batch produces, is stored as it is.
            if batch_id and not self._committing and header is not self._produced:
                return self._in_batch(batch_id, subject, header, data)
        if header and len(header) > MAX_HEADER_BYTES:
            raise api_error("STREAM_HEADER_EXCEEDS_MAXIMUM")
        block = None
        # Only a `Nats-Msg-Id` among the checked headers (the usual header): nothing
        # else to check but dedup, as below (`raw_msg_id`).
        plain_id = None
        if header:
            if header.find(counters.INCR) >= 0:  # first, even in a block parse refuses
                counters.check_increment(
                    header, data, config.allow_msg_counter, sourced=self._sourcing
                )
            if header.find(SCHEDULE_PREFIX) < 0:
                plain_id = raw_msg_id(header)
            if plain_id is None:
                try:
                    block = hdrs.parse(header)
                except hdrs.HeaderError:
                    block = None  # stored byte-exact; it carries no JetStream headers
        msg_id = ""
        rollup = None
        ttl = 0
        ttl_invalid = False
        if plain_id is not None:
            msg_id = plain_id
            if msg_id:
                seen = self.dedup.lookup(msg_id)
                if seen is not None:
                    return Ingested(seen, False, True)
        elif block is not None:
            expected = block.get(EXPECTED_STREAM)
            if expected is not None and expected != self.name:
                raise api_error("STREAM_NOT_MATCH")
            ttl_value = ttls.header_value(header)
            if ttl_value:  # an empty value is no TTL, on any stream
                try:
                    ttl = ttls.parse_ttl(ttl_value)
                except ttls.InvalidTTL:
                    ttl_invalid = True  # reported late, after the other header checks
                if ttl and not config.allow_msg_ttl:
                    if not self._sourcing:
                        raise api_error("MESSAGE_TTL_DISABLED")
                    ttl = 0  # a sourced message is stored as it came, not expired by it
            value = block.get(EXPECTED_LAST_SUBJ_SEQ)
            if value is not None:
                want = uint(value)
                last = self.store.subject_state(subject).last_seq
                if want is None or want != last:
                    raise api_error("STREAM_WRONG_LAST_SEQUENCE", seq=last)
            value = block.get(EXPECTED_LAST_SEQ)
            if value is not None:
                want = uint(value)
                last = self.store.state().last_seq
                if want is None or want != last:
                    raise api_error("STREAM_WRONG_LAST_SEQUENCE", seq=last)
            if (
                header is not None
                and SCHEDULE_PREFIX in header
                and header is not self._produced
                and not self._sourcing  # stored as it came: the origin checked it
            ):
                checked = check_schedule(self, header, subject)
                if checked is not header:  # a schedule, stored with `Nats-Rollup: sub`
                    header, block = checked, hdrs.parse(checked)
            if not self._sourcing and block.get(STREAM_SOURCE_HEADER):
                raise api_error("MESSAGE_SOURCE_HDR_NOT_ALLOWED")  # only sources write it
            msg_id = block.get(MSG_ID) or ""
            if msg_id:
                seen = self.dedup.lookup(msg_id)
                if seen is not None:
                    return Ingested(seen, False, True)
            value = block.get(EXPECTED_LAST_MSG_ID)
            last_id = self.dedup.last_id
            if value is not None and value != last_id:
                raise api_error("STREAM_WRONG_LAST_MSG_ID", id=last_id)
            rollup = block.get(ROLLUP) or None  # empty: none; any case (nats-server)
            if rollup is not None:
                rollup = rollup.lower()
                # A sourced rollup is applied whatever this stream allows (nats-server).
                if (not config.allow_rollup_hdrs or config.deny_purge) and not self._sourcing:
                    raise api_error("STREAM_ROLLUP_FAILED", err="rollup not permitted")
                if rollup not in ("sub", "all"):
                    raise api_error("STREAM_ROLLUP_FAILED", err=f'rollup value invalid: "{rollup}"')
        if config.allow_msg_counter:
            header, data = counters.count(self.store, subject, header, data, config.max_msg_size)
            size = len(data) + (len(header) if header else 0)
        quota = self.quota
        if quota is not None:
            quota.admit(self.accounted_size(subject, header, data))
        if ttl_invalid:
            raise api_error("MESSAGE_TTL_INVALID")
        space = self.space
        if space is not None and not space.admit(size):
            raise api_error("INSUFFICIENT_RESOURCES")
        # Interest retention keeps no message that no consumer's filter matches: as
        # nats-server, it still takes a sequence, gets its PubAck and applies its rollup,
        # and no discard-new limit refuses it.
        retention = self.retention
        unwanted = (
            config.retention == "interest"
            and retention is not None
            and not retention.wanted(subject)
        )
        if config.discard == "new" and not unwanted:
            self._check_discard_new(subject, header, data, rollup)
        now = self.now_ns()
        try:
            seq = self.store.store(subject, header, data, now)
        except StoreError as exc:
            raise self.store_refused(exc) from None
        if ttl:
            self.expiry.ttl_stored(seq, now, ttl)
        elif config.max_age > 0 and self.expiry.next_wakeup_ns is None:
            self.expiry.wake_by(now + config.max_age)
        if msg_id:
            self.dedup.remember(msg_id, seq, now)
        self.dedup.last_id = msg_id
        try:
            result = None
            if rollup is not None:
                purged = "" if rollup == "all" else subject
                result = self.store.purge(subject=purged or None, up_to_seq=seq)
            if self.schedules is not None:
                schedule_stored(self, seq, subject, header, now, kept=not unwanted)
            if unwanted:
                self.store.remove(seq)
            elif config.max_msgs_per_subject > 0 or config.max_msgs > 0 or config.max_bytes > 0:
                self._enforce_limits(subject)  # discard old: called only with a limit to keep
            if result is not None and self.on_purge is not None:
                # nats-server: a purge keeping the newest message (of `subject` for "sub";
                # none when it was not kept), whose consumers move as after STREAM.PURGE.
                self.on_purge(result, purged, 0 if unwanted else 1)
        except StoreError as exc:  # the message is stored: its ack stands
            self.write_failed(f"apply the rollup or limits after storing {seq}", exc)
        if self._removed:
            self._report_removed()
        if config.allow_msg_counter:
            return Counted(seq, not unwanted, total=counters.total_of(data), header=header)
        return Ingested(seq, not unwanted)

    def _ingest_republished(
        self, raw_subject: bytes, reply: bytes | None, header: bytes | None, data: bytes
    ) -> Ingested:
        """`_ingest`, then the republish of what it kept (republish.py): after the
        message, its rollup and its limits, before its PubAck, as nats-server."""
        subject = raw_subject.decode("utf-8", "surrogateescape")
        store = self.store
        last_on_subject = store.subject_state(subject).last_seq
        result = self._ingest(subject, reply, header, data)
        if result.kept:
            state = store.state()
            ts_ns = state.last_ts_ns if state.last_seq == result.seq else self.now_ns()
            assert self._republish is not None
            if isinstance(result, Counted):  # what was stored: the total, not the increment
                header, data = result.header, counters.payload_of(result.total)
            self._republish.stored(subject, result.seq, ts_ns, last_on_subject, header, data)
        return result

    # ------------------------------------------------------------------ expiry

    def expire(self) -> int | None:
        """Remove messages past max_age or past their own TTL (`expiry.py`), then fire
        the schedules that are due (`schedules.fire_due`); returns ns until the next expiry or
        schedule, or None when nothing is due ever. What it removed goes to
        `on_removed`, then the markers it stored (even before a failure) to `on_markers`."""
        now = self.now_ns()
        expiry = self.expiry
        try:
            wait = expiry.remove_due(now)
        except StoreError as exc:  # a full disk: try again a little later
            self.write_failed("expire messages", exc)
            wait = _EXPIRY_RETRY_NS
        self._report_removed()
        expiry.next_wakeup_ns = None if wait is None else now + wait
        markers = expiry.take_markers()
        if markers and self.on_markers is not None:
            self.on_markers(markers)
        if self.schedules is not None:
            fire_due(self, now)
        wake = expiry.next_wakeup_ns
        return None if wake is None else max(wake - now, 0)

    def store_refused(self, exc: StoreError) -> ApiError:
        """What a message whose write failed is answered (module docstring): 10023 for a
        full disk (the stream's space is full until there is room), 10077 for any other
        failure, logged; for one message (`_ingest`) and a source's run alike."""
        if isinstance(exc, StoreFullError):
            if self.space is not None:
                self.space.no_space(exc)
            return api_error("INSUFFICIENT_RESOURCES")
        self.write_failed("store a message", exc)
        return api_error("STREAM_STORE_FAILED", err=f"storage failure: {exc}")

    def write_failed(self, what: str, error: StoreError) -> None:
        """A store write failed: logged (rate-limited for file streams, `space.py`)."""
        message = f"stream {self.name}: cannot {what}"
        if self.space is not None:
            if isinstance(error, StoreFullError):
                self.space.no_space(error)
            else:
                self.space.write_failed(message, error)
        else:
            log.error("%s: %s", message, error)

    # ------------------------------------------------------------------ acknowledgements

    def _error_ack(self, err: ApiError) -> bytes:
        body = {"error": err.to_json(), "stream": self.name, "seq": 0}
        return json.dumps(body, separators=(",", ":")).encode()

    def _after_durable(self, reply: bytes, ack: bytes) -> None:
        committer = self._committer
        if committer is None:
            self._send_ack(reply, ack)
            if self._soon_sync is not None:  # "async": the fsync follows
                self._soon_sync.written()
            return

        committer.request_ack(reply, ack)

    def _failed_ack(self, error: BaseException) -> bytes:
        """The PubAck of a message whose sync failed (`GroupCommitter.acks_by`)."""
        failure = api_error("STREAM_STORE_FAILED", err=f"storage failure: {error}")
        return self._error_ack(failure)

    def close(self) -> None:
        self.batches.clear()  # its staged batches no longer count against the limit
        self.fast_batches.clear()
        self.store.close()
