"""A stream's sources (ADR 0020): what each source stored, where it resumes, its info.

`SourcedStream` is a sourcing stream's side of its links: it takes each message a source
delivers as `processInboundSourceMsg` does (the `Nats-Stream-Source` header added, the
origin's `Nats-Expected-*` and `Nats-Batch-*` dropped, the source's subject transforms
applied) and hands it to `Stream.ingest_sourced`, which stores it under a new sequence
through the checks of a publish (dedup included) and the stream's group commit.

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

`sources_info` is stream info's `sources` (nats-server's `StreamSourceInfo` list).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brook.jetstream.errors import ApiError
from brook.jetstream.fsutil import write_atomically
from brook.jetstream.models.sources import StreamSource, go_hash
from brook.jetstream.models.transforms import subject_transform_json
from brook.jetstream.sourcing import (
    STREAM_SOURCE_HEADER,
    parse_source_header,
    source_header,
    sourced_header,
)
from brook.jetstream.store.base import MessageStore
from brook.protocol import headers as hdrs
from brook.routing.transform import SubjectTransform

if TYPE_CHECKING:
    from brook.jetstream.stream import Ingested, Stream

log = logging.getLogger("brook.sources")

RECORD_FILE = "sources.db"
_RECORD_VERSION = 1
_RECORD_HEAD = struct.Struct("<BQQ")  # version, entries, stamp (nats-server's layout)
_STREAM_SOURCE_RAW = STREAM_SOURCE_HEADER.encode()


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
        self._changes = 0  # bumped by every change, on the event loop
        self._written = 0  # the `_changes` the record on disk holds, in the sync thread

    def recover(self, store: MessageStore, sources: Sequence[StreamSource]) -> None:
        """Find where each of `sources` not known yet stands (at open: every one): the
        record, then the headers of the messages stored since it (all of them for a
        source it does not know), newest first. A source found in neither starts at 0
        (its origin's start, or its start options). Sources no longer configured are
        forgotten."""
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
        if positions != (self.positions or record):
            self._changes += 1
        self.positions = positions

    def stored(self, iname: str, seq: int, ident: str) -> None:
        """The source `iname` stored (or found a duplicate of) origin message `seq`."""
        self.positions[iname] = Position(seq, ident)
        self._changes += 1

    def sync(self, store: MessageStore) -> None:
        """The group commit of a sourcing file stream (in its worker thread): fsync the
        store, then rewrite the record if a position changed, with the positions and the
        last sequence taken before the fsync, which covers every message they count. A
        record that cannot be written is logged and tried again at the next commit: the
        messages are durable, and their headers still say where each source stands."""
        changes = self._changes
        if changes == self._written:  # no sources, or none stored since the last record
            store.sync()
            return
        stamp = store.state().last_seq + 1
        positions = dict(self.positions)
        store.sync()
        if changes == self._written or self._path is None:
            return
        try:
            write_atomically(self._path, encode_record(stamp, positions))
        except OSError as exc:
            log.error("cannot write %s: %s; written at the next commit", self._path, exc)
            return
        self._written = changes

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


Stored = Callable[[str, int], None]
"""(subject, sequence) of a message a source stored: the engine tells its consumers."""


@dataclass(slots=True)
class SourceStatus:
    """What stream info shows of one source's link: `lag` (origin messages left to
    deliver), when its origin's consumer was last heard from (0: never) and the error
    that stops it, if any."""

    lag: int = 0
    last_active_ns: int = 0
    error: ApiError | None = None


class SourcedStream:
    """A sourcing stream's sources: their transforms, positions and status (module
    docstring). Built with the stream; `configure` again after an update."""

    def __init__(self, stream: Stream, positions: SourcePositions, stored: Stored) -> None:
        self.stream = stream
        self.positions = positions
        self._stored = stored
        self.sources: dict[str, StreamSource] = {}
        self.status: dict[str, SourceStatus] = {}
        self._transforms: dict[str, list[SubjectTransform | None]] = {}
        self.configure(stream.config.sources)

    def configure(self, sources: Sequence[StreamSource]) -> None:
        """Take the stream's (new) sources; a source kept keeps its position and status."""
        self.sources = {source.iname: source for source in sources}
        self.status = {iname: self.status.get(iname) or SourceStatus() for iname in self.sources}
        self._transforms = {
            iname: [SubjectTransform.compile(t.src, t.dest) for t in source.subject_transforms]
            for iname, source in self.sources.items()
        }
        self.positions.recover(self.stream.store, sources)

    def ingest(
        self,
        iname: str,
        subject: str,
        reply: str,
        header: bytes | None,
        data: bytes,
        ident: str,
        origin_seq: int,
    ) -> Ingested:
        """One message of source `iname` delivered with ack `reply` (origin sequence
        `origin_seq`) from the origin's `subject`: stored as nats-server's
        `processInboundSourceMsg` stores it. A duplicate `Nats-Msg-Id` counts as stored;
        after an error nothing is, and the source asks again from the same sequence."""
        header = sourced_header(header, source_header(iname, reply, subject, ident))
        for transform in self._transforms[iname]:
            if transform is not None:
                mapped = transform.match(subject.encode("utf-8", "surrogateescape"))
                if mapped is not None:
                    subject = mapped.decode("utf-8", "surrogateescape")
                    break
        result, subject = self.stream.ingest_sourced(subject, header, data)
        if result.error is None:
            self.positions.stored(iname, origin_seq, ident)
            if result.kept:
                self._stored(subject, result.seq)
        return result


def sources_info(sourced: SourcedStream, now_ns: int) -> list[dict[str, Any]]:
    """nats-server's `sourcesInfo`: per source its name, `external`, `lag`, `seq` (the
    last origin sequence stored, left out while 0), `active` (ns since its origin's
    consumer was last heard from, -1: never), `error`, and its filter or transforms."""
    out = []
    for iname, source in sourced.sources.items():
        status = sourced.status[iname]
        info: dict[str, Any] = {"name": source.name}
        if source.external is not None:
            info["external"] = {"api": source.external.api, "deliver": source.external.deliver}
        info["lag"] = status.lag
        seq = sourced.positions.positions.get(iname, Position()).seq
        if seq:
            info["seq"] = seq
        info["active"] = now_ns - status.last_active_ns if status.last_active_ns else -1
        if status.error is not None:
            info["error"] = status.error.to_json()
        if source.filter_subject:
            info["filter_subject"] = source.filter_subject
        if source.subject_transforms:
            info["subject_transforms"] = [
                subject_transform_json(t) for t in source.subject_transforms
            ]
        out.append(info)
    return out
