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
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from brook_spark.options import validate_subject
from brook_spark.wire import RawClient, encode_headers, hpub_frame, parse_status

RESEND_ATTEMPTS = 3


class PublishError(RuntimeError):
    pass


@dataclass
class PublishReport:
    published: int = 0
    duplicates: int = 0
    first_seq: int = 0
    last_seq: int = 0


class Publisher:
    """Runs on the runtime loop; `send` queues frames, `finish` waits for every PubAck."""

    def __init__(self, nc: RawClient, max_pending: int, timeout_s: float) -> None:
        self.nc = nc
        self.max_pending = max_pending
        self.timeout_s = timeout_s
        self.report = PublishReport()
        self._in_flight: dict[bytes, tuple[bytes, str]] = {}
        self._next = 0
        self._error: Exception | None = None
        self._progress = asyncio.Event()

    async def open(self) -> None:
        self._inbox = self.nc.new_inbox()
        self._sub = await self.nc.raw_subscribe(self._inbox + ".*", self._on_ack)

    async def close(self) -> None:
        await self.nc.raw_unsubscribe(self._sub)

    async def send(self, frames: list[tuple[str, bytes, bytes]]) -> None:
        """Queue (subject, header block, payload) frames, waiting for window space."""
        for subject, header, payload in frames:
            if len(self._in_flight) >= self.max_pending:
                # Refill in bulk once half the window is acknowledged: one write per refill
                # rather than one per acknowledgement.
                await self.nc.flush_frames()
                await self._wait(lambda: len(self._in_flight) <= self.max_pending // 2)
            self._next += 1
            reply = f"{self._inbox}.{self._next}"
            frame = hpub_frame(subject, reply, header, payload)
            self._in_flight[reply.encode()] = (frame, subject)
            self.nc.raw_publish_nowait(frame)
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
                for frame, _subject in list(self._in_flight.values()):
                    self.nc.raw_publish_nowait(frame)
                await self.nc.flush_frames()
        self._check()

    def _check(self) -> None:
        if self._error is not None:
            raise self._error

    def _on_ack(self, subject: bytes, reply: bytes, data: bytes, header: bytes | None) -> None:
        entry = self._in_flight.pop(subject, None)
        if entry is None:
            return  # the ack of a frame that was resent and already acknowledged
        self._progress.set()
        if header is not None:
            status = parse_status(header)
            if status is not None and status[0] == 503:
                self._error = PublishError(
                    f"no stream captures subject '{entry[1]}': create a stream for it first"
                )
                return
        try:
            ack = json.loads(data)
        except ValueError:
            self._error = PublishError(
                f"unexpected reply to a publish on '{entry[1]}': {data[:200]!r}"
            )
            return
        error = ack.get("error")
        if error:
            self._error = PublishError(
                f"publish to '{entry[1]}' refused: {error.get('description')} "
                f"(err_code {error.get('err_code')})"
            )
            return
        seq = int(ack.get("seq", 0))
        if ack.get("duplicate"):
            self.report.duplicates += 1
        else:
            self.report.published += 1
            if not self.report.first_seq or seq < self.report.first_seq:
                self.report.first_seq = seq
            self.report.last_seq = max(self.report.last_seq, seq)


# --------------------------------------------------------------------------- rows to frames


@dataclass(frozen=True)
class RowLayout:
    """Where the write columns are, checked once per task against the Arrow schema."""

    data: int
    data_is_text: bool
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
        data_is_text=pa.types.is_string(schema.field(data).type)
        or pa.types.is_large_string(schema.field(data).type),
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
) -> Iterator[tuple[str, bytes, bytes]]:
    """(subject, header block, payload) per row; ids derived from the row's position."""
    data = batch.column(layout.data).to_pylist()
    subjects = batch.column(layout.subject).to_pylist() if layout.subject is not None else None
    headers = batch.column(layout.headers).to_pylist() if layout.headers is not None else None
    ids = batch.column(layout.msg_id).to_pylist() if layout.msg_id is not None else None
    checked: set[str] = set()
    for i, payload in enumerate(data):
        row = first_row + i
        subject = subjects[i] if subjects is not None else None
        if subject is None:
            subject = default_subject
        if subject is None:
            raise PublishError(
                f"row {row} has no subject: give a 'subject' column or the 'subject' option"
            )
        if subject not in checked:
            problem = validate_subject(subject, wildcards=False)
            if problem:
                raise PublishError(f"row {row}: cannot publish to {subject!r}: {problem}")
            checked.add(subject)
        if payload is None:
            payload = b""
        elif layout.data_is_text:
            payload = payload.encode()
        if len(payload) > max_payload:
            raise PublishError(
                f"row {row}: payload of {len(payload)} bytes exceeds the server's "
                f"max_payload of {max_payload}"
            )
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
            header = encode_headers(pairs)
        except ValueError as exc:
            raise PublishError(f"row {row}: {exc}") from None
        yield subject, header, payload
