"""A stream's sources (ADR 0020): what each stores, where it resumes, its link, its info.

`SourcedStream` is a sourcing stream's side of its links: it takes the messages a source
delivers, a run at a time, as `processInboundSourceMsg` takes each (the `Nats-Stream-Source`
header added, the origin's `Nats-Expected-*` and `Nats-Batch-*` dropped, the source's
subject transforms applied, then the stream's own subject transform) and hands the run to
`Stream.ingest_sourced_run` (stream_sourced.py, ADR 0049), which stores each under a new
sequence as the checks of a publish would (dedup included), its plain stretches together;
the source's position moves once per run, and the stream's group commit follows soon
(`Stream.sync_soon`).

Where a source resumes (`SourcePositions`): the origin sequence of the newest message it
stored, read back from the stored `Nats-Stream-Source` headers, newest first
(nats-server's `startingSequenceForSources`), and from a small record of every source's
position, `sources.db` beside the stream's definition (nats-server's `SourcesState`,
docs/storage-format.md), which survives a purge or the expiry of the sourced messages so
that the source is not sent back to its origin's start. The record is rewritten, when a
position changed, by the group commit after the store's fsync, with the positions and the
stream's last sequence as they were before that fsync; at open the messages from that
sequence on are read for newer positions. So the record is never ahead of the messages
on disk, and what it lacks the newest headers give.

Each source has its own `OriginLink` (link.py) whose kind is a `Source`: the consumer
request nats-server's `setupSourceConsumer` sends, and each delivery as
`processInboundSourceMsg` takes it (`Tracking.source_delivery`, then `SourcedStream`; an
in-process origin consumer's run that follows the last delivery, at once).

`sources_info` is stream info's `sources` (nats-server's `StreamSourceInfo` list).
"""

from __future__ import annotations

import logging
import struct
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brook import limits
from brook.jetstream.consumer.actions import DeliverRun
from brook.jetstream.fsutil import write_atomically
from brook.jetstream.link import OriginLink
from brook.jetstream.link_requests import (
    ACCOUNT,
    API_PREFIX,
    CreateRequest,
    api_subject,
    link_subject,
    origin_consumer_config,
    reset_request,
)
from brook.jetstream.link_runs import Delivered, Stored, drops_lines, origin_header
from brook.jetstream.models.consumer_json import format_time_with_offset
from brook.jetstream.models.info import format_ts_ns
from brook.jetstream.models.sources import StreamSource, go_hash
from brook.jetstream.models.transforms import subject_transform_json
from brook.jetstream.sourcing import (
    IDENTITY_HEADER,
    STREAM_SOURCE_HEADER,
    Tracking,
    Verdict,
    parse_source_header,
    source_header_parts,
    sourced_header,
)
from brook.jetstream.store.base import MessageStore
from brook.protocol import headers as hdrs
from brook.protocol.headers import raw_value
from brook.routing.transform import SubjectTransform

if TYPE_CHECKING:
    from brook.jetstream.ingested import Ingested, SourcedRun
    from brook.jetstream.stream import Stream
    from brook.jetstream.stream_sourced import SourcedMessage

log = logging.getLogger("brook.sources")

RECORD_FILE = "sources.db"
_RECORD_VERSION = 1
_RECORD_HEAD = struct.Struct("<BQQ")  # version, entries, stamp (nats-server's layout)
_STREAM_SOURCE_RAW = STREAM_SOURCE_HEADER.encode()
IDENTITY_MISMATCH = 10225  # the origin is not the stream of the identity sent
# nats-server asks for level 5 (origin identity); a Brook origin answers identity checks at
# its own level, which a request may not exceed there (ADR 0003).
_ASKED_LEVEL = str(min(5, limits.JETSTREAM_API_LEVEL))


@dataclass(frozen=True, slots=True)
class Position:
    """Where a source stands: the origin sequence of the last message it stored and the
    origin's identity then ("" if it did not say)."""

    seq: int = 0
    ident: str = ""


# ---------------------------------------------------------------------- the record


def encode_record(stamp: int, positions: dict[str, Position]) -> bytes:
    """nats-server's `sources.db` layout: a version byte, the number of entries and the
    stamp (the stream's last sequence + 1 when the positions were taken) as little-endian
    uint64s, then per source its internal name, position and identity as uvarint-length
    strings and a uvarint. Entries are sorted by name, so equal positions give equal
    bytes; unlike nats-server, a source that stored nothing yet is written too (0), so
    that opening the stream need not read every message to learn it."""
    out = bytearray(_RECORD_HEAD.pack(_RECORD_VERSION, len(positions), stamp))
    for iname in sorted(positions):
        position = positions[iname]
        for value in (iname.encode(), position.seq, position.ident.encode()):
            if isinstance(value, int):
                _uvarint(out, value)
            else:
                _uvarint(out, len(value))
                out += value
    return bytes(out)


def decode_record(data: bytes) -> tuple[int, dict[str, Position]]:
    """(stamp, positions) of a record; ValueError if it is not one."""
    if len(data) < _RECORD_HEAD.size:
        raise ValueError("shorter than its header")
    version, count, stamp = _RECORD_HEAD.unpack_from(data)
    if version != _RECORD_VERSION:
        raise ValueError(f"unknown version {version}")
    offset = _RECORD_HEAD.size
    positions: dict[str, Position] = {}
    for _ in range(count):
        iname, offset = _string(data, offset)
        seq, offset = _read_uvarint(data, offset)
        ident, offset = _string(data, offset)
        positions[iname] = Position(seq, ident)
    if offset != len(data):
        raise ValueError("bytes after its last entry")
    return stamp, positions


def _uvarint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)


def _read_uvarint(data: bytes, offset: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if offset >= len(data) or shift > 63:
            raise ValueError("truncated or overlong number")
        byte = data[offset]
        offset += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, offset
        shift += 7


def _string(data: bytes, offset: int) -> tuple[str, int]:
    length, offset = _read_uvarint(data, offset)
    if offset + length > len(data):
        raise ValueError("truncated string")
    return data[offset : offset + length].decode("utf-8", "surrogateescape"), offset + length


# ---------------------------------------------------------------------- positions


class SourcePositions:
    """Every source's position in one stream, and its record (module docstring). `path`
    is the record's file, None for a memory stream (whose messages a restart loses)."""

    def __init__(self, path: Path | None) -> None:
        self._path = path
        self.positions: dict[str, Position] = {}
        # The record's stamp for `positions`: every message they count is below it. Set
        # on the event loop right after them (`stored`), so that the sync thread, which
        # reads it first, never pairs a newer stamp with older positions.
        self._stamp = 0
        self._store: MessageStore | None = None  # the stream's, from `recover` on
        self._changes = 0  # bumped by every change, on the event loop
        self._written = 0  # the `_changes` the record on disk holds, in the sync thread
        self._writing = threading.Lock()

    def recover(self, store: MessageStore, sources: Sequence[StreamSource]) -> None:
        """Find where each of `sources` not known yet stands (at open: every one): the
        record, then the headers of the messages stored since it (all of them for a
        source it does not know), newest first. A source found in neither starts at 0
        (its origin's start, or its start options). Sources no longer configured are
        forgotten."""
        self._store = store
        wanted = {source.iname: source for source in sources}
        known = {iname: p for iname, p in self.positions.items() if iname in wanted}
        stamp, record = self._read() if len(known) < len(wanted) else (0, {})
        found: dict[str, Position] = {}
        missing = {iname for iname in wanted if iname not in known}
        # Those the record does not know must be looked for in every message.
        unknown = {iname for iname in missing if iname not in record}
        state = store.state()
        seq = state.last_seq
        while seq >= state.first_seq and len(found) < len(missing):
            if seq < stamp and unknown <= found.keys():
                break  # the record knows the rest as of `stamp`
            message = store.load(seq)
            seq -= 1
            if message is None or not message.header:
                continue
            value = hdrs.raw_value(message.header, _STREAM_SOURCE_RAW)
            if value is None:
                continue
            position = parse_source_header(value.decode("utf-8", "surrogateescape"))
            if position is None:
                continue
            if position.iname:
                if position.iname in missing and position.iname not in found:
                    found[position.iname] = Position(position.seq, position.ident)
                continue
            # A header from before nats-server 2.10: it matches every source of that name.
            for iname in missing - found.keys():
                if position.stream in _header_names(wanted[iname]):
                    found[iname] = Position(position.seq)
        positions = {
            iname: known.get(iname) or found.get(iname) or record.get(iname) or Position()
            for iname in wanted
        }
        changed = positions != (self.positions or record)
        self.positions = positions
        self._stamp = max(self._stamp, stamp)
        if changed:
            self._stamp = state.last_seq + 1
            # Written now, not at the next commit: none may come before the messages
            # these positions were read from are purged (a restart, then a purge).
            self._changes += 1
            self.sync(store)

    def stored(self, iname: str, seq: int, ident: str) -> None:
        """The source `iname` stored (or found a duplicate of) origin message `seq`: the
        last message stored so far counts it."""
        self.positions[iname] = Position(seq, ident)
        if self._store is not None:
            self._stamp = self._store.last_seq() + 1
        self._changes += 1

    def sync(self, store: MessageStore) -> None:
        """The group commit of a sourcing file stream (in its worker thread; on the event
        loop when `recover` changed a position): fsync the store, then rewrite the record
        if a position changed, with the stamp and positions noted on the event loop, read
        before the fsync, which covers every message they count (the store serialises
        its syncs). A
        record that cannot be written is logged and tried again at the next commit: the
        messages are durable, and their headers still say where each source stands."""
        changes = self._changes
        if changes == self._written:  # no sources, or none stored since the last record
            store.sync()
            return
        with self._writing:  # the event loop's and the commit's, one at a time
            # The stamp first, then the positions: positions newer than the stamp are
            # safe (a restart reads the headers from the stamp on), a stamp newer than
            # the positions would skip the messages between (stored, not yet counted).
            stamp = self._stamp
            positions = dict(self.positions)
            store.sync()
            if self._path is None:
                return
            try:
                write_atomically(self._path, encode_record(stamp, positions))
            except OSError as exc:
                log.error("cannot write %s: %s; written at the next commit", self._path, exc)
                return
            self._written = max(self._written, changes)

    def _read(self) -> tuple[int, dict[str, Position]]:
        if self._path is None:
            return 0, {}
        try:
            data = self._path.read_bytes()
        except FileNotFoundError:
            return 0, {}
        try:
            return decode_record(data)
        except ValueError as exc:
            log.warning("%s is damaged (%s): positions read from the messages", self._path, exc)
            return 0, {}


def _header_names(source: StreamSource) -> tuple[str, ...]:
    """The stream names an older `Nats-Stream-Source` header may give for `source`."""
    if source.external is None:
        return (source.name,)
    return (source.name, f"{source.name}:{go_hash(source.external.api)}")


# ---------------------------------------------------------------------- ingest


SourceItem = tuple[int, str, bytes | None, bytes]
"""A message a source delivered, to store: its origin sequence, the origin's subject, its
header (the origin's `Nats-Expected-*` and `Nats-Batch-*` removed: `origin_header`), data."""


class SourcedStream:
    """A sourcing stream's sources: their transforms, positions and links (module
    docstring). Built with the stream; `configure` again after an update. The engine
    gives each source its `OriginLink` (`links`, by internal name)."""

    def __init__(self, stream: Stream, positions: SourcePositions, stored: Stored) -> None:
        self.stream = stream
        self.positions = positions
        self._stored = stored
        self.sources: dict[str, StreamSource] = {}
        self.links: dict[str, OriginLink] = {}
        self._transforms: dict[str, list[SubjectTransform | None]] = {}
        self.configure(stream.config.sources)

    def configure(self, sources: Sequence[StreamSource]) -> None:
        """Take the stream's (new) sources; a source kept keeps its position."""
        self.sources = {source.iname: source for source in sources}
        self._transforms = {
            iname: [SubjectTransform.compile(t.src, t.dest) for t in source.subject_transforms]
            for iname, source in self.sources.items()
        }
        self.positions.recover(self.stream.store, sources)

    def ingest(
        self,
        iname: str,
        subject: str,
        header: bytes | None,
        data: bytes,
        origin_seq: int,
        ident: str,
    ) -> Ingested:
        """One message of source `iname` (`ingest_run` of it alone): what it came to."""
        done = self.ingest_run(iname, [(origin_seq, subject, header, data)], ident)
        assert done.last is not None
        return done.last

    def ingest_run(self, iname: str, run: Sequence[SourceItem], ident: str) -> SourcedRun:
        """Messages of source `iname` (each with its origin sequence and the origin's
        subject; the origin's identity is `ident`), stored as nats-server's
        `processInboundSourceMsg` stores each: the `Nats-Stream-Source` header written
        (`sourced_header`), the source's first subject transform that matches applied,
        then the stream's own, and stored by `Stream.ingest_sourced_run` (dedup, limits,
        republish: those of a publish), up to the first the stream refuses. Only a
        message stored moves the source's position (a duplicate `Nats-Msg-Id` does not,
        as in nats-server's store, and is found a duplicate again if asked again after a
        restart), once per run, before the one group commit the run asks for; the
        consumers hear of what was kept in one call."""
        head, middle, tail = source_header_parts(iname, ident)
        transforms = [t for t in self._transforms[iname] if t is not None]
        stream = self.stream
        transform = stream.input_transform  # as nats-server: after the source's own
        messages: list[SourcedMessage] = []
        for origin_seq, subject, header, data in run:
            value = f"{head}{origin_seq}{middle}{subject}{tail}"
            for source_transform in transforms:
                mapped = source_transform.match(subject.encode("utf-8", "surrogateescape"))
                if mapped is not None:
                    subject = mapped.decode("utf-8", "surrogateescape")
                    break
            if transform is not None:
                subject = transform.apply(subject.encode("utf-8", "surrogateescape")).decode(
                    "utf-8", "surrogateescape"
                )
            messages.append((subject, sourced_header(header, value), data))
        done = stream.ingest_sourced_run(messages)
        if done.stored:
            # Noted before the group commit is asked for: its sync thread reads it.
            self.positions.stored(iname, run[done.stored - 1][0], ident)
            stream.sync_soon()
        if done.kept:
            self._stored(done.kept)
        return done


# ---------------------------------------------------------------------- the link


def consumer_name(stream_name: str, source: StreamSource, sources: Sequence[StreamSource]) -> str:
    """nats-server's `JS_SRC_<createSourcingConsumerHash>`: the hash of the stream's
    stable hash, with the source's internal name when the stream sources that origin
    more than once."""
    stable = go_hash(f"{stream_name} {ACCOUNT}")
    if sum(1 for other in sources if other.name == source.name) > 1:
        stable = f"{stable} {source.iname}"
    return f"JS_SRC_{go_hash(stable)}"


class Source:
    """One source's kind of link (`link.LinkKind`): the consumer request nats-server's
    `setupSourceConsumer` sends, and each delivery as `processInboundSourceMsg` takes it
    (`Tracking.source_delivery`, then `SourcedStream.ingest_run`). The origin's identity
    (`Nats-Stream-Identity`) is sent with the request: an origin deleted and recreated
    since refuses it (10225), and the source starts over from the new origin's start."""

    setup_error = "SOURCE_CONSUMER_SETUP_FAILED"
    requires_ack_fc = "SOURCE_CONSUMER_REQUIRES_ACK_FC"

    def __init__(self, sourced: SourcedStream, source: StreamSource) -> None:
        self.sourced = sourced
        self.source = source
        self.iname = source.iname
        position = sourced.positions.positions[self.iname]
        # The origin sequence the next consumer starts after (nats-server's `si.sseq`):
        # the last stored or found a duplicate, or before the one that failed to store.
        self.resume_after = position.seq
        self.ident = position.ident
        self._recreated = False  # the origin refused the identity: start over
        self._consumer = ""  # the name of the consumer last asked for

    def create_request(self) -> CreateRequest:
        source = self.source
        header = hdrs.encode(
            [("Nats-Required-Api-Level", _ASKED_LEVEL), (IDENTITY_HEADER.decode(), self.ident)]
        )
        if source.consumer is not None:  # created beforehand on the origin (ADR-60)
            return reset_request(source, header)
        stream = self.sourced.stream
        seq = self.resume_after + 1
        self._consumer = consumer_name(stream.name, source, stream.config.sources)
        config: dict[str, Any] = {"name": self._consumer, "deliver_policy": "all"}
        if seq > 1:
            config |= {"deliver_policy": "by_start_sequence", "opt_start_seq": seq}
        elif source.opt_start_seq > 0:
            config |= {"deliver_policy": "by_start_sequence", "opt_start_seq": source.opt_start_seq}
        else:
            state = stream.store.state()
            last_ts = state.last_ts_ns if state.last_seq else 0
            start = None
            if source.opt_start_time is not None:
                if last_ts and source.opt_start_time < last_ts:
                    start = format_ts_ns(last_ts)
                else:
                    start = format_time_with_offset(
                        source.opt_start_time, source.opt_start_time_offset
                    )
            elif state.first_seq > 1 and last_ts and not self._recreated:
                start = format_ts_ns(last_ts)  # a stream purged since: after its last
            if start is not None:
                config |= {"deliver_policy": "by_start_time", "opt_start_time": start}
        external = source.external
        prefix = f"{external.deliver}.S" if external is not None and external.deliver else "$JS.S"
        metadata = {"_nats.src.acc": ACCOUNT, "_nats.src.stream": stream.name}
        config |= origin_consumer_config(source, link_subject(prefix), metadata)
        subject = f"{API_PREFIX}.CONSUMER.CREATE.{source.name}"
        if "filter_subject" in config:
            subject += f".{config['name']}.{config['filter_subject']}"
        if external is not None:
            subject = subject.replace(API_PREFIX, external.api, 1).replace("..", ".")
        body = {"stream_name": source.name, "config": config, "action": ""}
        return CreateRequest(subject, header, body)

    def refused(self, err_code: int) -> bool:
        """The origin refused the consumer; True when the source starts over at once:
        the origin is not the one it was copying (deleted and recreated)."""
        if err_code != IDENTITY_MISMATCH:
            return False
        log.warning(
            "source %s of stream %s was recreated: copying it from its start",
            self.source.name,
            self.sourced.stream.name,
        )
        self.ident, self._recreated, self.resume_after = "", True, 0
        self.sourced.positions.stored(self.iname, 0, "")  # info shows no `seq` now
        return True

    def created(self, info: dict[str, Any], tracking: Tracking, header: bytes | None) -> None:
        """Deliveries count from the position, or from what the origin says it delivered
        before this consumer's start (an origin that lost messages: nothing to skip)."""
        ident = raw_value(header, IDENTITY_HEADER) if header else None
        reply_ident = ident.decode("utf-8", "surrogateescape") if ident else ""
        seq = self.resume_after
        if self._recreated or (reply_ident and self.ident and reply_ident != self.ident):
            seq = 0
        self.ident, self._recreated = reply_ident, False
        delivered = int(info.get("delivered", {}).get("stream_seq", 0))
        tracking.sseq = self.resume_after = max(seq, delivered)
        tracking.dseq = 0

    def delivered(self, tracking: Tracking, run: list[Delivered]) -> bool:
        """Each delivery checked in order (`Tracking.source_delivery`), those to store
        stored together (`_store`); False at the first that asks for a new consumer,
        after storing those before it."""
        items: list[SourceItem] = []
        before: list[tuple[int, int]] = []  # the tracking before each item
        retry = False
        for (consumer, delivered, seq, dseq, _, _), subject, header, data in run:
            sseq_before, dseq_before = tracking.sseq, tracking.dseq
            verdict = tracking.source_delivery(consumer, seq, dseq, delivered)
            if verdict is Verdict.RETRY:
                retry = True
                break
            if verdict is Verdict.STORE:
                items.append((seq, subject, header, data))
                before.append((sseq_before, dseq_before))
        return self._store(tracking, items, before.__getitem__) and not retry

    def delivered_run(self, tracking: Tracking, run: DeliverRun) -> bool | None:
        """`delivered`'s common case at once: the current consumer's run follows the last
        delivery seen with origin sequences past the last stored, so each is to store
        (`Tracking.source_delivery` says so of each); None otherwise, having changed
        nothing. The headers are the origin's as stored: `origin_header` applies."""
        msgs = run.msgs
        first_dseq = run.first_consumer_seq
        if first_dseq != tracking.dseq + 1 or msgs[0].seq <= tracking.sseq:
            return None
        sseq = tracking.sseq
        items: list[SourceItem] = [
            (
                m.seq,
                m.subject,
                (origin_header(m.header) if drops_lines(m.header) else m.header)
                if m.header
                else None,
                m.data,
            )
            for m in msgs
        ]
        tracking.sseq, tracking.dseq = msgs[-1].seq, first_dseq + len(msgs) - 1

        def before(k: int) -> tuple[int, int]:
            return (msgs[k - 1].seq if k else sseq), first_dseq + k - 1

        return self._store(tracking, items, before)

    def _store(
        self,
        tracking: Tracking,
        items: list[SourceItem],
        before: Callable[[int], tuple[int, int]],
    ) -> bool:
        """Store `items` (`SourcedStream.ingest_run`). When the stream refused one (a
        discard-new limit, a full disk) the tracking goes back to what it was before
        that one (`before`), which is asked for again: False."""
        if not items:
            return True
        done = self.sourced.ingest_run(self.iname, items, self.ident)
        if done.error is None:
            self.resume_after = items[-1][0]
            return True
        tracking.sseq, tracking.dseq = before(done.taken)
        self.resume_after = items[done.taken][0] - 1
        return False

    def when_durable(self, callback: Callable[[BaseException | None], None]) -> None:
        self.sourced.stream.when_durable(callback)

    def delete_subject(self) -> str | None:
        if self.source.consumer is not None or not self._consumer:
            return None
        return api_subject(self.source, f"DELETE.{self.source.name}.{self._consumer}")


# ---------------------------------------------------------------------- info


def sources_info(sourced: SourcedStream, now_ns: int) -> list[dict[str, Any]]:
    """nats-server's `sourcesInfo`: per source its name, `external`, `lag`, `seq` (the
    last origin sequence stored, left out while 0), `active` (ns since its origin's
    consumer was last heard from, -1: never), `error`, and its filter or transforms."""
    out = []
    for iname, source in sourced.sources.items():
        link = sourced.links.get(iname)
        info: dict[str, Any] = {"name": source.name}
        if source.external is not None:
            info["external"] = {"api": source.external.api, "deliver": source.external.deliver}
        info["lag"] = link.lag if link is not None else 0
        seq = sourced.positions.positions.get(iname, Position()).seq
        if seq:
            info["seq"] = seq
        last = link.last_active_ns if link is not None else 0
        info["active"] = now_ns - last if last else -1
        if link is not None and link.error is not None:
            info["error"] = link.error.to_json()
        if source.filter_subject:
            info["filter_subject"] = source.filter_subject
        if source.subject_transforms:
            info["subject_transforms"] = [
                subject_transform_json(t) for t in source.subject_transforms
            ]
        out.append(info)
    return out
