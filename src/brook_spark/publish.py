"""Idempotent, pipelined publishing of Arrow rows into JetStream.

Every row becomes one HPUB with a `Nats-Msg-Id`: the user's key column, or an id derived from
where the row sits in the job (`<writeId>:<partition>:<row>` for batch writes,
`<queryId>:<batchId>:<partition>:<row>` for streaming writes). A retried task or a replayed
micro-batch publishes the same ids again and the server's duplicate window drops them, with
a PubAck that says `duplicate` and carries the original sequence.

Up to `maxPending` publishes are in flight; each has its own reply subject under one
wildcard inbox, so acknowledgements are matched without a future per message. Frames still
unacknowledged after the request timeout are sent again (same ids, so this is safe), a few
times, before the task fails. Any PubAck error fails the task: Spark retries it, and dedup
makes the retry harmless.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from brook_spark.options import validate_subject
from brook_spark.wire import RawClient, encode_headers, parse_status

RESEND_ATTEMPTS = 3
# The PubAck of a stored or duplicate message as nats-server and Brook write it.
_PUBACK = re.compile(
    rb'\{"stream":"[^"\\]*",(?:"domain":"[^"\\]*",)?"seq":(\d+)(,"duplicate": ?true)?\}\s*'
)


class PublishError(RuntimeError):
    pass


@dataclass
class PublishReport:
    published: int = 0
    duplicates: int = 0
    first_seq: int = 0
    last_seq: int = 0
    # Rows acknowledged in fast batches (fastbatch.py): stored or dropped as duplicates,
    # which the server does not tell apart there.
    batched: int = 0


class Publisher:
    """Runs on the runtime loop; `send` queues frames, `finish` waits for every PubAck.

    Frames come whole from `frames_for`: the reply subject of a row's frame is
    `<reply_prefix><row>`, so an acknowledgement names its row and `_in_flight` maps rows to
    their frames (for a resend). Frames go to nats-py's write buffer a window's worth at a
    time, and acks are matched by one regex (`_PUBACK`) rather than a JSON parse each
    (ADR 0050); anything else a server answers goes through `_ack_slow`.
    """

    def __init__(self, nc: RawClient, max_pending: int, timeout_s: float) -> None:
        self.nc = nc
        self.max_pending = max_pending
        self.timeout_s = timeout_s
        self.report = PublishReport()
        self._in_flight: dict[int, bytes] = {}
        self._error: Exception | None = None
        self._progress = asyncio.Event()
        self.reply_prefix = b""

    # A row's reply subject is `<reply_prefix><row>` (frames_for; fastbatch.py's differ).
    reply_suffix = b""
    reply_base = 0

    async def open(self) -> None:
        inbox = self.nc.new_inbox()
        self.reply_prefix = f"{inbox}.".encode()
        self._sub = await self.nc.raw_subscribe(inbox + ".*", self._on_ack)

    async def close(self) -> None:
        await self.nc.raw_unsubscribe(self._sub)

    async def send(self, first_row: int, frames: list[bytes]) -> None:
        """Queue the frames of rows `first_row`, `first_row + 1`, ..., waiting for window
        space: refilled in bulk once half the window is acknowledged, one write per refill."""
        at = 0
        while at < len(frames):
            room = self.max_pending - len(self._in_flight)
            if room <= 0:
                await self.nc.flush_frames()
                await self._wait(lambda: len(self._in_flight) <= self.max_pending // 2)
                continue
            part = frames[at : at + room]
            rows = range(first_row + at, first_row + at + len(part))
            self._in_flight.update(zip(rows, part, strict=True))
            self.nc.raw_publish_many(part)
            at += len(part)
        await self.nc.flush_frames()
        self._check()

    async def finish(self) -> PublishReport:
        await self.nc.flush_frames()
        await self._wait(lambda: not self._in_flight)
        self._check()
        return self.report

    async def _wait(self, ready: Any) -> None:
        attempts = 0
        while not ready():
            self._check()
            self._progress.clear()
            try:
                await asyncio.wait_for(self._progress.wait(), self.timeout_s)
            except TimeoutError:
                attempts += 1
                if attempts > RESEND_ATTEMPTS:
                    raise PublishError(
                        f"{len(self._in_flight)} publishes unacknowledged after "
                        f"{attempts} waits of {self.timeout_s}s (option 'requestTimeout')"
                    ) from None
                # Same Nats-Msg-Id, so a message that did arrive is dropped as a duplicate.
                self.nc.raw_publish_many(list(self._in_flight.values()))
                await self.nc.flush_frames()
        self._check()

    def _check(self) -> None:
        if self._error is not None:
            raise self._error

    def _on_ack(self, subject: bytes, reply: bytes, data: bytes, header: bytes | None) -> None:
        try:
            row = int(subject[len(self.reply_prefix) :])
        except ValueError:
            return  # not one of ours
        frame = self._in_flight.pop(row, None)
        if frame is None:
            return  # the ack of a frame that was resent and already acknowledged
        self._progress.set()
        match = _PUBACK.fullmatch(data) if header is None else None
        if match is None:
            self._ack_slow(frame, data, header)
            return
        self._count(int(match.group(1)), match.group(2) is not None)

    def _count(self, seq: int, duplicate: bool) -> None:
        report = self.report
        if duplicate:
            report.duplicates += 1
            return
        report.published += 1
        if not report.first_seq or seq < report.first_seq:
            report.first_seq = seq
        if seq > report.last_seq:
            report.last_seq = seq

    def _ack_slow(self, frame: bytes, data: bytes, header: bytes | None) -> None:
        """A status, an error or a PubAck shaped differently from `_PUBACK`."""
        subject = frame.split(b" ", 2)[1].decode()
        if header is not None:
            status = parse_status(header)
            if status is not None and status[0] == 503:
                self._error = PublishError(
                    f"no stream captures subject '{subject}': create a stream for it first"
                )
                return
        try:
            ack = json.loads(data)
        except ValueError:
            self._error = PublishError(
                f"unexpected reply to a publish on '{subject}': {data[:200]!r}"
            )
            return
        error = ack.get("error")
        if error:
            self._error = PublishError(
                f"publish to '{subject}' refused: {error.get('description')} "
                f"(err_code {error.get('err_code')})"
            )
            return
        self._count(int(ack.get("seq", 0)), bool(ack.get("duplicate")))


# --------------------------------------------------------------------------- rows to frames


@dataclass(frozen=True)
class RowLayout:
    """Where the write columns are, checked once per task against the Arrow schema."""

    data: int
    subject: int | None
    headers: int | None
    headers_multi: bool
    msg_id: int | None


def layout_for(schema: pa.Schema, msg_id_column: str | None) -> RowLayout:
    def index(name: str) -> int | None:
        i = schema.get_field_index(name)
        return None if i < 0 else int(i)

    data = index("data")
    if data is None:
        raise PublishError("the DataFrame has no 'data' column (binary or string)")
    headers = index("headers")
    multi = False
    if headers is not None:
        value_type = schema.field(headers).type.item_type
        multi = pa.types.is_list(value_type) or pa.types.is_large_list(value_type)
    id_name = msg_id_column or "msg_id"
    return RowLayout(
        data=data,
        subject=index("subject"),
        headers=headers,
        headers_multi=multi,
        msg_id=index(id_name),
    )


def frames_for(
    batch: pa.RecordBatch,
    layout: RowLayout,
    *,
    default_subject: str | None,
    id_prefix: str,
    first_row: int,
    expected_stream: str | None,
    max_payload: int,
    reply_prefix: bytes,
    reply_suffix: bytes = b"",
    reply_base: int = 0,
) -> list[bytes]:
    """One whole HPUB frame per row, replying to `<reply_prefix><row + reply_base><reply_suffix>`
    (a fast batch's replies name the batch sequence, `row + 1`, and an operation: fastbatch.py).

    Message ids are the `msg_id` column's or derived from the row's position. Columns are
    checked in bulk (subjects once per distinct value, payload sizes with one Arrow pass);
    rows are formatted one `%` each. Only a `headers` column, or ids with line breaks that
    `encode_headers` must refuse by row, take the row-by-row header encoding.
    """
    n = batch.num_rows
    subjects = _subjects(batch, layout, default_subject, first_row)
    payloads = _payloads(batch, layout, first_row, max_payload)
    ids: list[Any] | None = None
    if layout.msg_id is not None:
        ids = batch.column(layout.msg_id).to_pylist()
    rows = range(first_row, first_row + n)
    if layout.headers is not None or not _plain_ids(ids, id_prefix, expected_stream):
        headers = _header_blocks(batch, layout, ids, id_prefix, first_row, expected_stream)
    else:
        tail = b"\r\n\r\n"
        if expected_stream is not None:
            tail = b"\r\nNats-Expected-Stream: %b\r\n\r\n" % expected_stream.encode()
        prefix = id_prefix.encode()
        if ids is None:
            headers = [b"NATS/1.0\r\nNats-Msg-Id: %b:%d%b" % (prefix, row, tail) for row in rows]
        else:
            headers = [
                b"NATS/1.0\r\nNats-Msg-Id: %b%b"
                % ((f"{id_prefix}:{row}" if v is None else str(v)).encode(), tail)
                for row, v in zip(rows, ids, strict=True)
            ]
    replies = range(first_row + reply_base, first_row + reply_base + n)
    return [
        b"HPUB %b %b%d%b %d %d\r\n%b%b\r\n"
        % (subject, reply_prefix, reply, reply_suffix, len(h), len(h) + len(p), h, p)
        for subject, reply, h, p in zip(subjects, replies, headers, payloads, strict=True)
    ]


def _payloads(batch: pa.RecordBatch, layout: RowLayout, first_row: int, limit: int) -> list[bytes]:
    column = batch.column(layout.data)
    if pa.types.is_string(column.type):
        column = column.cast(pa.binary())  # UTF-8 bytes as they are
    elif pa.types.is_large_string(column.type):
        column = column.cast(pa.large_binary())
    sizes = pc.binary_length(column)
    largest = pc.max(sizes).as_py()
    if largest is not None and largest > limit:
        row = sizes.to_pylist().index(largest)
        raise PublishError(
            f"row {first_row + row}: payload of {largest} bytes exceeds the server's "
            f"max_payload of {limit}"
        )
    return [b"" if p is None else p for p in column.to_pylist()]


def _subjects(
    batch: pa.RecordBatch, layout: RowLayout, default: str | None, first_row: int
) -> list[bytes]:
    """Each row's subject as bytes; every distinct subject is checked once."""
    n = batch.num_rows
    values: list[str | None] = (
        batch.column(layout.subject).to_pylist() if layout.subject is not None else [None] * n
    )
    if default is not None:
        values = [default if v is None else v for v in values]
    encoded: dict[str | None, bytes] = {}
    for subject in dict.fromkeys(values):
        if subject is None:
            row = first_row + values.index(None)
            raise PublishError(
                f"row {row} has no subject: give a 'subject' column or the 'subject' option"
            )
        problem = validate_subject(subject, wildcards=False)
        if problem:
            row = first_row + values.index(subject)
            raise PublishError(f"row {row}: cannot publish to {subject!r}: {problem}")
        encoded[subject] = subject.encode()
    return [encoded[v] for v in values]


def _plain_ids(ids: list[Any] | None, id_prefix: str, expected_stream: str | None) -> bool:
    """True when no id or header value needs `encode_headers`' per-row refusal."""
    texts = [id_prefix, expected_stream or ""]
    if ids is not None:
        texts.extend(v for v in ids if isinstance(v, str))
    return not any("\r" in t or "\n" in t for t in texts)


def _header_blocks(
    batch: pa.RecordBatch,
    layout: RowLayout,
    ids: list[Any] | None,
    id_prefix: str,
    first_row: int,
    expected_stream: str | None,
) -> list[bytes]:
    """Header blocks row by row: the `headers` column's pairs after the id."""
    headers = batch.column(layout.headers).to_pylist() if layout.headers is not None else None
    blocks = []
    for i in range(batch.num_rows):
        row = first_row + i
        msg_id = ids[i] if ids is not None else None
        pairs: list[tuple[str, str]] = [
            ("Nats-Msg-Id", f"{id_prefix}:{row}" if msg_id is None else str(msg_id))
        ]
        if expected_stream is not None:
            pairs.append(("Nats-Expected-Stream", expected_stream))
        if headers is not None and headers[i]:
            for key, value in headers[i]:
                if value is None or key == "Nats-Msg-Id":  # the id comes from msg_id
                    continue
                if layout.headers_multi:
                    pairs.extend((key, v) for v in value if v is not None)
                else:
                    pairs.append((key, value))
        try:
            blocks.append(encode_headers(pairs))
        except ValueError as exc:
            raise PublishError(f"row {row}: {exc}") from None
    return blocks
