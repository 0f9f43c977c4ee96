"""Record encoding and decoding for the file store: pure functions over bytes, no I/O.

Governed by docs/storage-format.md (section 5); every constant and rule here is stated there
byte by byte, so this module, the recovery code and `check.py` agree with any independent
reader. Validation checks the magic and version before trusting a length, and the CRC before
trusting anything else, so damaged bytes are never followed.
"""

from __future__ import annotations

import mmap
import struct
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Final

# What records are parsed from: a whole segment (mmap) or bytes read back with pread().
Buffer = bytes | bytearray | mmap.mmap

MAGIC: Final = b"\xb7\x5e"
VERSION: Final = 1
# What resynchronisation searches for after damage: the start of a version-1 record.
SYNC_MARK: Final = MAGIC + bytes([VERSION])

T_MSG: Final = 1
T_DELETE: Final = 2
T_STATE: Final = 3
TYPE_NAMES: Final = {T_MSG: "MSG", T_DELETE: "DELETE", T_STATE: "STATE"}
# The first 4 bytes of every MSG record: magic, version, type.
MSG_PREFIX: Final = SYNC_MARK + bytes([T_MSG])

F_ERASED: Final = 0x01  # MSG: content overwritten with zeros; DELETE: erase was requested

# magic, version, type, length, seq, ts_ns, flags, reserved, subj_len, hdr_len, data_len
HEADER: Final = struct.Struct("<2sBBIQqBBHII")
HEADER_SIZE: Final = HEADER.size  # 36
# The same 36 bytes as a reader of MSG records takes them (`Reader._read_run`): magic,
# version and type as one 4-byte prefix compared with `MSG_PREFIX`, the reserved byte
# skipped; 8 fields instead of 11 make a delivery's read of each record cheaper.
MSG_HEADER: Final = struct.Struct("<4sIQqBxHII")
# The same header after its `MSG_PREFIX` with flags 0 (and the reserved byte 0): the two
# as pad bytes, so a stored message's header packs 6 fields rather than 11 (about 400
# instructions a record fewer, callgrind; ADR 0069).
_MSG_PLAIN: Final = struct.Struct("<IQqxxHII")
CRC_SIZE: Final = 4
OVERHEAD: Final = HEADER_SIZE + CRC_SIZE  # 40: the smallest possible record
CRC_FIELD: Final = struct.Struct("<I")
# Bound once: compiled code reads a Final from a C static, `zlib.crc32` from the module
# (a lookup per record written).
_crc32: Final = zlib.crc32
# The CRC-32 of a whole record, its CRC field included, when that field is right: CRC-32's
# residue, the same for any bytes followed by their CRC-32 in little-endian order. A
# reader checks a record by one `crc32` call (`Reader._read_run`), exactly as by comparing
# the field with the CRC of the bytes before it.
CRC_RESIDUE: Final = 0x2144DF1C
_STATE_BODY: Final = struct.Struct("<Qq")

MAX_SUBJECT_BYTES: Final = 0xFFFF
MAX_RECORD_BYTES: Final = 0x7FFFFFFF  # lengths share a u32 column with a flag bit in memory
MAX_RANGES_PER_RECORD: Final = 4096


class RecordError(ValueError):
    """Bytes that are not a valid record (the message says which rule failed)."""


@dataclass(frozen=True, slots=True)
class Damage:
    """A run of bytes in a segment that holds no valid record.

    `tail` is True when no valid record follows it (a torn tail: safe to truncate)."""

    offset: int
    length: int
    reason: str
    tail: bool


# A valid record as the scanner reports it, kept a plain tuple because replay handles
# millions: (offset, length, type, seq, ts_ns, flags, subj_len, hdr_len, data_len).
RecordInfo = tuple[int, int, int, int, int, int, int, int, int]


def _finish(head: bytes, *body: bytes) -> bytes:
    rec = b"".join((head, *body))
    return rec + _crc32(rec).to_bytes(4, "little")  # CRC_FIELD (a compiled primitive)


def encode_message(
    seq: int, ts_ns: int, subject: bytes, header: bytes, data: bytes, flags: int = 0
) -> bytes:
    """A MSG record. `header` is b"" for none (an empty header is no header)."""
    sl, hl, dl = len(subject), len(header), len(data)
    if not 0 < sl <= MAX_SUBJECT_BYTES:
        raise RecordError(f"subject length {sl} outside 1..{MAX_SUBJECT_BYTES}")
    length = OVERHEAD + sl + hl + dl
    if length > MAX_RECORD_BYTES:
        raise RecordError(f"record of {length} bytes exceeds {MAX_RECORD_BYTES}")
    try:
        if flags:
            head = HEADER.pack(MAGIC, VERSION, T_MSG, length, seq, ts_ns, flags, 0, sl, hl, dl)
            rec = b"".join((head, subject, header, data))
        else:
            head = _MSG_PLAIN.pack(length, seq, ts_ns, sl, hl, dl)
            rec = b"".join((MSG_PREFIX, head, subject, header, data))
    except struct.error as exc:  # a timestamp outside i64, say
        raise RecordError(str(exc)) from exc
    return rec + _crc32(rec).to_bytes(4, "little")  # `_finish`, inline: once per publish


def encode_messages(
    seq: int, messages: Iterable[tuple[str, bytes | None, bytes, int]]
) -> tuple[list[bytes], str]:
    """The MSG records of `messages` (subject, header or None, data, timestamp) at
    consecutive sequences from `seq`, each as `encode_message` makes it, in one loop (a
    mirror's catch-up stores runs of thousands). It stops before the first message it
    cannot encode and says why ("": all were)."""
    records: list[bytes] = []
    append = records.append
    pack = HEADER.pack
    crc_pack = CRC_FIELD.pack
    crc32 = zlib.crc32
    text, subj = "", b""  # the last subject and its encoding (a run repeats a few)
    for subject, header, data, ts_ns in messages:
        if subject is not text:
            text, subj = subject, subject.encode()
        hdr = header or b""
        sl, hl, dl = len(subj), len(hdr), len(data)
        length = OVERHEAD + sl + hl + dl
        if not 0 < sl <= MAX_SUBJECT_BYTES:
            return records, f"subject length {sl} outside 1..{MAX_SUBJECT_BYTES}"
        if length > MAX_RECORD_BYTES:
            return records, f"record of {length} bytes exceeds {MAX_RECORD_BYTES}"
        try:
            head = pack(MAGIC, VERSION, T_MSG, length, seq, ts_ns, 0, 0, sl, hl, dl)
        except struct.error as exc:  # a timestamp outside i64, say
            return records, str(exc)
        record = b"".join((head, subj, hdr, data))
        append(record + crc_pack(crc32(record)))
        seq += 1
    return records, ""


def encode_delete(
    last_seq: int, ts_ns: int, ranges: Sequence[tuple[int, int]], *, erase: bool = False
) -> bytes:
    """A DELETE record removing every sequence in the inclusive `ranges` (1..4096 pairs)."""
    if not 0 < len(ranges) <= MAX_RANGES_PER_RECORD:
        raise RecordError(f"{len(ranges)} ranges per DELETE record")
    flat: list[int] = []
    for lo, hi in ranges:
        if not 0 < lo <= hi <= last_seq:
            raise RecordError(f"range {lo}..{hi} invalid with last_seq {last_seq}")
        flat += (lo, hi)
    body = struct.pack(f"<{len(flat)}Q", *flat)
    length = OVERHEAD + len(body)
    flags = F_ERASED if erase else 0
    head = HEADER.pack(MAGIC, VERSION, T_DELETE, length, last_seq, ts_ns, flags, 0, 0, 0, len(body))
    return _finish(head, body)


def encode_state(floor: int, last_seq: int, last_ts_ns: int, ts_ns: int) -> bytes:
    """A STATE record: every sequence below `floor` is removed; `last_seq`/`last_ts_ns`."""
    body = _STATE_BODY.pack(last_seq, last_ts_ns)
    head = HEADER.pack(MAGIC, VERSION, T_STATE, OVERHEAD + 16, floor, ts_ns, 0, 0, 0, 0, 16)
    return _finish(head, body)


def erased_image(record: bytes) -> bytes:
    """The same MSG record with subject, header and data zeroed, flagged ERASED, re-CRC'd:
    same length and sequence, so the segment still parses (storage-format.md 6.3)."""
    fields = HEADER.unpack_from(record, 0)
    length = fields[3]
    head = HEADER.pack(*fields[:6], fields[6] | F_ERASED, *fields[7:])
    return _finish(head, bytes(length - OVERHEAD))


def decode_ranges(record: Buffer, offset: int, data_len: int) -> list[tuple[int, int]]:
    """The (lo, hi) pairs of a validated DELETE record starting at `offset`."""
    flat = struct.unpack_from(f"<{data_len // 8}Q", record, offset + HEADER_SIZE)
    return list(zip(flat[0::2], flat[1::2], strict=True))


def decode_state(record: Buffer, offset: int) -> tuple[int, int]:
    """(last_seq, last_ts_ns) of a validated STATE record starting at `offset`."""
    last_seq, last_ts = _STATE_BODY.unpack_from(record, offset + HEADER_SIZE)
    return int(last_seq), int(last_ts)


def validate(buf: Buffer, offset: int, end: int) -> RecordInfo | str:
    """The record at `offset` if it is valid (storage-format.md 5.1 checks 1-5), else the
    reason it is not. Only bytes below `end` are considered."""
    if end - offset < OVERHEAD:
        return "incomplete header"
    magic, version, rtype, length, seq, ts, flags, _r, sl, hl, dl = HEADER.unpack_from(buf, offset)
    if magic != MAGIC:
        return "bad magic"
    if version != VERSION:
        return f"unknown version {version}"
    if rtype not in TYPE_NAMES:
        return f"unknown record type {rtype}"
    if length != OVERHEAD + sl + hl + dl:
        return "length fields disagree"
    if length > end - offset:
        return "incomplete record"
    view = memoryview(buf)
    crc_at = offset + length - CRC_SIZE
    if zlib.crc32(view[offset:crc_at]) != CRC_FIELD.unpack_from(buf, crc_at)[0]:
        return "bad CRC"
    shape = _shape_error(buf, offset, rtype, seq, sl, hl, dl)
    if shape:
        return shape
    return (offset, length, rtype, seq, ts, flags, sl, hl, dl)


def _shape_error(buf: Buffer, offset: int, rtype: int, seq: int, sl: int, hl: int, dl: int) -> str:
    if rtype == T_MSG:
        return "" if sl > 0 else "MSG without subject"
    if sl or hl:
        return f"{TYPE_NAMES[rtype]} with subject or header"
    if rtype == T_STATE:
        return "" if dl == 16 else "STATE body is not 16 bytes"
    if dl == 0 or dl % 16 or dl > 16 * MAX_RANGES_PER_RECORD:
        return "DELETE body is not 1..4096 ranges"
    for lo, hi in decode_ranges(buf, offset, dl):
        if not 0 < lo <= hi <= seq:
            return f"DELETE range {lo}..{hi} invalid"
    return ""


# magic, version, type, length, seq: a header's first 16 bytes
_CLAIM: Final = struct.Struct("<2sBBIQ")


def claimed_seq(buf: Buffer, offset: int, end: int) -> int | None:
    """The sequence in the header of a MSG record cut short at `end` (storage-format.md
    7.6), or None when fewer than 16 bytes of it remain or they do not begin a MSG record
    longer than what remains. Nothing here is covered by a CRC: the caller trusts it only
    for the one sequence the log expects next."""
    if end - offset < _CLAIM.size:
        return None
    magic, version, rtype, length, seq = _CLAIM.unpack_from(buf, offset)
    if magic != MAGIC or version != VERSION or rtype != T_MSG or length <= end - offset:
        return None
    return int(seq)


def scan(buf: Buffer, end: int, start: int = 0) -> Iterator[RecordInfo | Damage]:
    """Every valid record in `buf[start:end]` in order, and a `Damage` for every run of
    bytes between them that holds none (storage-format.md 7.1, 7.2)."""
    offset = start
    unpack, crc32, view = HEADER.unpack_from, zlib.crc32, memoryview(buf)
    try:
        while offset < end:
            # A MSG record, the common case, checked inline (the same checks as `validate`'s,
            # the CRC by its residue); anything else, or any doubt, goes through `validate`.
            if end - offset >= OVERHEAD:
                fields = unpack(buf, offset)
                length = fields[3]
                if (
                    fields[2] == T_MSG
                    and fields[0] == MAGIC
                    and fields[1] == VERSION
                    and fields[8] > 0
                    and length == OVERHEAD + fields[8] + fields[9] + fields[10]
                    and length <= end - offset
                    and crc32(view[offset : offset + length]) == CRC_RESIDUE
                ):
                    yield (offset, length, T_MSG, fields[4], fields[5], fields[6], *fields[8:])
                    offset += length
                    continue
            info = validate(buf, offset, end)
            if not isinstance(info, str):
                yield info
                offset += info[1]
                continue
            nxt = resync(buf, offset + 1, end)
            stop = end if nxt < 0 else nxt
            yield Damage(offset, stop - offset, info, nxt < 0)
            offset = stop

    finally:
        view.release()  # the caller closes its mmap next, which no export may outlive


def resync(buf: Buffer, start: int, end: int) -> int:
    """Offset of the next valid record at or after `start`, or -1."""
    pos = start
    while True:
        pos = buf.find(SYNC_MARK, pos, end)
        if pos < 0:
            return -1
        if not isinstance(validate(buf, pos, end), str):
            return pos
        pos += 1


@dataclass(frozen=True, slots=True)
class Message:
    seq: int
    ts_ns: int
    flags: int
    subject: bytes
    header: bytes
    data: bytes


def decode_message(record: bytes) -> Message:
    """A whole MSG record read back from disk; raises RecordError if it is not valid."""
    info = validate(record, 0, len(record))
    if isinstance(info, str):
        raise RecordError(info)
    _o, length, rtype, seq, ts, flags, sl, hl, _dl = info
    if rtype != T_MSG or length != len(record):
        raise RecordError(f"expected one MSG record, found {TYPE_NAMES[rtype]}")
    a = HEADER_SIZE + sl
    b = a + hl
    return Message(
        seq, ts, flags, record[HEADER_SIZE:a], record[a:b], record[b : length - CRC_SIZE]
    )


def accounted_size(subj_len: int, hdr_len: int, data_len: int) -> int:
    """Bytes the file store accounts for a message (nats-server `fileStoreMsgSize`)."""
    return subj_len + data_len + (34 + hdr_len if hdr_len else 30)
