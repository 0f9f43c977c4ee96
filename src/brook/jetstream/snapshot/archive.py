"""What a Brook stream snapshot holds, and how it is written and read back (ADR 0008).

The bytes a snapshot sends are a snappy-framed stream (the framing any S2 reader decodes, as
the nats CLI's `stream backup` does while it receives) of a tar archive of Brook's own stream
directory, frozen at one moment:

    brook-snapshot.json      {"format": "brook.snapshot", "version": 1, "stream", "storage",
                              "state": {"messages", "first_seq", "last_seq"}}
    stream.json              the stream's definition, as in its directory (engine.py)
    consumers/<name>.json    each consumer's configuration and state, as in a durable's file
    data/meta.json           file streams: the file store (docs/storage-format.md), each
    data/msgs/<N>.seg          segment up to its length at the moment of the snapshot
    messages                 memory streams: their messages as MSG records of the same
                             format, then one STATE record (floor, last_seq, last_ts)

`freeze` takes the picture on the event loop (no I/O but opening descriptors); `tar_pieces`
and `CompressedReader` turn it into bytes later, in a worker thread. On the way back,
`unpack` checks and extracts an uploaded snapshot into a staging directory (in a worker
thread too): only the names above, regular files, within a byte budget.
"""

from __future__ import annotations

import json
import os
import re
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import cramjam

from brook.jetstream.consumer.files import CONSUMERS_DIR, consumer_record
from brook.jetstream.consumer.runner import ConsumerRunner
from brook.jetstream.definitions import DATA_DIR, STREAM_FILE, stream_record
from brook.jetstream.store.base import StoredMessage
from brook.jetstream.store.file import FileStore
from brook.jetstream.store.file import format as fmt
from brook.jetstream.store.file.frozen import FrozenLog
from brook.jetstream.store.file.recovery import META, MSGS
from brook.jetstream.store.file.segment import parse_segment_filename
from brook.jetstream.store.memory import MemorySnapshot
from brook.jetstream.stream import Stream

FORMAT = "brook.snapshot"
VERSION = 1
MANIFEST = "brook-snapshot.json"
MESSAGES = "messages"

READ_BYTES = 1024 * 1024  # one piece of a segment, read at once
METADATA_BYTES_MAX = 1024 * 1024  # the manifest and stream.json, read whole
READ_BYTES_MAX = 16 * 1024 * 1024  # the most `tarfile` may ask for at once (a header)
FRAME_INPUT_BYTES = 64 * 1024  # the compressor is flushed per snappy frame's worth of input
BLOCK = tarfile.BLOCKSIZE

SNAPPY_IDENTIFIER = b"\xff\x06\x00\x00sNaPpY"
S2_IDENTIFIER = b"\xff\x06\x00\x00S2sTwO"  # how nats-server's snapshots begin
_CONSUMER_FILE = re.compile(r"^consumers/([^/]+)\.json$")


class ArchiveError(ValueError):
    """An uploaded snapshot that cannot be restored (the message says why)."""


class ArchiveTooLarge(ArchiveError):
    """The snapshot's content exceeds the byte budget it was unpacked with."""


# ---------------------------------------------------------------------- taking a snapshot


@dataclass
class StreamImage:
    """A stream frozen at one moment; `close()` releases the frozen log's descriptors."""

    manifest: dict[str, Any]
    stream_record: bytes
    consumers: list[tuple[str, bytes]]
    log: FrozenLog | None = None
    memory: MemorySnapshot | None = None

    def close(self) -> None:
        if self.log is not None:
            self.log.close()


def freeze(
    stream: Stream, runners: list[ConsumerRunner], *, include_consumers: bool
) -> StreamImage:
    """Everything a snapshot of `stream` holds, as it is now (call on the event loop)."""
    store: Any = stream.store
    state = store.state()
    image = StreamImage(
        manifest={
            "format": FORMAT,
            "version": VERSION,
            "stream": stream.name,
            "storage": "file" if isinstance(store, FileStore) else "memory",
            "state": {
                "messages": state.messages,
                "first_seq": state.first_seq,
                "last_seq": state.last_seq,
            },
        },
        stream_record=stream_record(stream.config, stream.created_ns),
        consumers=[(r.name, consumer_record(r)) for r in runners] if include_consumers else [],
    )
    if image.manifest["storage"] == "file":
        image.log = store.freeze()
    else:
        image.memory = store.freeze()
    return image


def _member(name: str, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mode = 0o600
    info.mtime = int(time.time())
    return info.tobuf(format=tarfile.PAX_FORMAT)


def _padding(size: int) -> bytes:
    return bytes(-size % BLOCK)


def _small(name: str, data: bytes) -> bytes:
    return _member(name, len(data)) + data + _padding(len(data))


def tar_pieces(image: StreamImage) -> Iterator[bytes]:
    """The tar archive of `image`, in pieces of at most about `READ_BYTES`."""
    manifest = json.dumps(image.manifest, indent=1).encode()
    yield _small(MANIFEST, manifest) + _small(STREAM_FILE, image.stream_record)
    for name, record in image.consumers:
        yield _small(f"{CONSUMERS_DIR}/{name}.json", record)
    if image.log is not None:
        log = image.log
        yield _small(f"{DATA_DIR}/{META}", log.meta)
        for filename, size in log.segments.items():
            yield _member(f"{DATA_DIR}/{MSGS}/{filename}", size)
            for offset in range(0, size, READ_BYTES):
                yield log.read(filename, offset, READ_BYTES)
            yield _padding(size)
    if image.memory is not None:
        yield from _memory_member(image.memory)
    yield bytes(2 * BLOCK)


def _memory_member(snap: MemorySnapshot) -> Iterator[bytes]:
    def record(m: StoredMessage) -> bytes:
        return fmt.encode_message(m.seq, m.ts_ns, m.subject.encode(), m.header or b"", m.data)

    state = fmt.encode_state(snap.first_seq, snap.last_seq, snap.last_ts_ns, time.time_ns())
    size = len(state) + sum(
        fmt.OVERHEAD + len(m.subject.encode()) + len(m.header or b"") + len(m.data)
        for m in snap.messages
    )
    yield _member(MESSAGES, size)
    batch: list[bytes] = []
    batch_bytes = 0
    for m in snap.messages:
        batch.append(record(m))
        batch_bytes += len(batch[-1])
        if batch_bytes >= READ_BYTES:
            yield b"".join(batch)
            batch, batch_bytes = [], 0
    yield b"".join(batch) + state + _padding(size)


class CompressedReader:
    """The snappy-framed bytes of an archive, read in exact amounts (worker thread)."""

    def __init__(self, pieces: Iterator[bytes]) -> None:
        self._pieces = pieces
        self._compressor = cramjam.snappy.Compressor()
        self._pending = 0  # input given to the compressor since its last flush
        self._out = bytearray()
        self._done = False
        self.total = 0  # bytes returned so far

    def read(self, n: int) -> bytes:
        """The next `n` bytes; fewer only at the end (then b"" once everything was read)."""
        while len(self._out) < n and not self._done:
            piece = next(self._pieces, None)
            if piece is None:
                self._out += bytes(self._compressor.finish())
                self._done = True
                break
            self._compressor.compress(piece)
            self._pending += len(piece)
            if self._pending >= FRAME_INPUT_BYTES:
                self._out += bytes(self._compressor.flush())
                self._pending = 0
        chunk = bytes(self._out[:n])
        del self._out[:n]
        self.total += len(chunk)
        return chunk


# ---------------------------------------------------------------------- restoring


def _frames(f: IO[bytes]) -> Iterator[bytes]:
    """The decompressed content of a snappy-framed file, frame group by frame group; every
    frame's CRC-32C is checked (by cramjam)."""
    head = f.read(len(SNAPPY_IDENTIFIER))
    if head == S2_IDENTIFIER:
        raise ArchiveError(
            "not a Brook snapshot: an S2 stream, as nats-server makes (Brook restores only "
            "its own snapshots)"
        )
    if head != SNAPPY_IDENTIFIER:
        raise ArchiveError("not a Brook snapshot: no snappy stream identifier")
    while True:
        group = bytearray(SNAPPY_IDENTIFIER)
        while len(group) < READ_BYTES:
            header = f.read(4)
            if not header:
                break
            if len(header) < 4:
                raise ArchiveError("snapshot ends inside a frame header")
            length = int.from_bytes(header[1:], "little")
            body = f.read(length)
            if len(body) < length:
                raise ArchiveError("snapshot ends inside a frame")
            group += header + body
        if len(group) == len(SNAPPY_IDENTIFIER):
            return
        try:
            yield bytes(cramjam.snappy.decompress(bytes(group)))
        except Exception as exc:  # cramjam.DecompressionError
            raise ArchiveError(f"damaged snapshot: {exc}") from None


class _Decompressed:
    """A read-only file object over `_frames`, for `tarfile`'s stream mode."""

    def __init__(self, f: IO[bytes]) -> None:
        self._frames = _frames(f)
        self._buf = b""
        self._pos = 0  # what of `_buf` was read (slicing the rest off each time is quadratic)

    def read(self, n: int = -1) -> bytes:
        if n < 0 or n > READ_BYTES_MAX:  # an entry's data is read in pieces (`_read_all`)
            raise ArchiveError("snapshot holds an oversized tar header")
        while len(self._buf) - self._pos < n:
            frame = next(self._frames, None)
            if frame is None:
                break
            self._buf = self._buf[self._pos :] + frame
            self._pos = 0
        out = self._buf[self._pos : self._pos + n]
        self._pos += len(out)
        return out


@dataclass
class Unpacked:
    """A checked snapshot: its manifest, definition and consumer records; a file store's
    files are in the staging directory, a memory store's messages in `messages`."""

    manifest: dict[str, Any]
    stream: dict[str, Any]
    consumers: dict[str, bytes] = field(default_factory=dict)
    messages: MemorySnapshot | None = None
    content_bytes: int = 0


def _pieces(src: IO[bytes], size: int) -> Iterator[bytes]:
    """The next `size` bytes of `src`, in pieces of at most `READ_BYTES`."""
    left = size
    while left:
        data = src.read(min(left, READ_BYTES))
        if not data:
            raise ArchiveError("snapshot ends inside a file")
        yield data
        left -= len(data)


def _read_all(src: IO[bytes], size: int, limit: int | None = None) -> bytes:
    if limit is not None and size > limit:
        raise ArchiveError(f"an entry of {size} bytes where at most {limit} are expected")
    return b"".join(_pieces(src, size))


def _copy_to(src: IO[bytes], path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as out:
        for data in _pieces(src, size):
            out.write(data)
        out.flush()
        os.fsync(out.fileno())


def unpack(upload: Path, staging: Path, *, budget: int) -> Unpacked:
    """Check the snapshot in `upload` and extract its file store into `staging/data`.

    `budget` bounds the content's total size (-1: no bound); past it `ArchiveTooLarge`.
    Anything not of Brook's snapshot layout (module docstring) is an `ArchiveError`."""
    manifest: dict[str, Any] | None = None
    stream: dict[str, Any] | None = None
    unpacked_bytes = 0
    seen: set[str] = set()
    consumers: dict[str, bytes] = {}
    messages: bytes | None = None
    try:
        with open(upload, "rb") as f, tarfile.open(fileobj=_Decompressed(f), mode="r|") as archive:  # type: ignore[call-overload]
            for info in archive:
                name = info.name
                if not info.isreg() or name in seen:
                    raise ArchiveError(f"unexpected entry {name!r}")
                seen.add(name)
                unpacked_bytes += info.size
                if 0 <= budget < unpacked_bytes:
                    raise ArchiveTooLarge(f"content exceeds {budget} bytes")
                src = archive.extractfile(info)
                assert src is not None  # a regular file
                if manifest is None and name != MANIFEST:
                    raise ArchiveError(f"{MANIFEST} must come first, found {name!r}")
                if name == MANIFEST:
                    manifest = _json(_read_all(src, info.size, METADATA_BYTES_MAX), name)
                elif name == STREAM_FILE:
                    stream = _json(_read_all(src, info.size, METADATA_BYTES_MAX), name)
                elif match := _CONSUMER_FILE.match(name):
                    consumers[match.group(1)] = _read_all(src, info.size)
                elif name == MESSAGES:
                    messages = _read_all(src, info.size)
                elif name == f"{DATA_DIR}/{META}" or _is_segment(name):
                    _copy_to(src, staging / name, info.size)
                else:
                    raise ArchiveError(f"unexpected entry {name!r}")
    except tarfile.TarError as exc:
        raise ArchiveError(f"damaged snapshot: {exc}") from None
    if manifest is None or stream is None:
        raise ArchiveError("snapshot without its manifest or stream definition")
    if manifest.get("format") != FORMAT or not isinstance(manifest.get("version"), int):
        raise ArchiveError("not a Brook snapshot manifest")
    if manifest["version"] > VERSION:
        raise ArchiveError(f"snapshot format version {manifest['version']} is newer than Brook's")
    out = Unpacked(manifest, stream, consumers, content_bytes=unpacked_bytes)
    if manifest.get("storage") == "memory":
        if messages is None:
            raise ArchiveError(f"memory stream snapshot without {MESSAGES}")
        out.messages = _decode_messages(messages)
    elif messages is not None or not (staging / DATA_DIR / META).is_file():
        raise ArchiveError("file stream snapshot without its file store")
    return out


def _json(data: bytes, name: str) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise ArchiveError(f"{name}: {exc}") from None
    if not isinstance(value, dict):
        raise ArchiveError(f"{name}: not a JSON object")
    return value


def _is_segment(name: str) -> bool:
    prefix = f"{DATA_DIR}/{MSGS}/"
    return name.startswith(prefix) and parse_segment_filename(name[len(prefix) :]) is not None


def _decode_messages(buf: bytes) -> MemorySnapshot:
    """The `messages` member: MSG records, then one STATE record; any damage is an error."""
    messages: list[StoredMessage] = []
    state: tuple[int, int, int] | None = None
    for item in fmt.scan(buf, len(buf)):
        if isinstance(item, fmt.Damage) or state is not None:
            raise ArchiveError(f"{MESSAGES}: damaged or misplaced record")
        offset, length, rtype, seq, ts, _flags, sl, hl, _dl = item
        if rtype == fmt.T_STATE:
            last_seq, last_ts = fmt.decode_state(buf, offset)
            state = (seq, last_seq, last_ts)
            continue
        if rtype != fmt.T_MSG:
            raise ArchiveError(f"{MESSAGES}: unexpected record type {rtype}")
        a = offset + fmt.HEADER_SIZE
        b, c = a + sl, a + sl + hl
        subject = buf[a:b].decode("utf-8", "surrogateescape")
        data = buf[c : offset + length - fmt.CRC_SIZE]
        messages.append(StoredMessage(seq, subject, buf[b:c] or None, data, ts))
    if state is None:
        raise ArchiveError(f"{MESSAGES}: no closing STATE record")
    return MemorySnapshot(state[0], state[1], state[2], messages)
