"""Waiting pull requests and their admission checks (wire reference §6.5)."""

from __future__ import annotations

from dataclasses import dataclass

from brook import durations
from brook.jetstream.consumer.acks import PullGroup
from brook.jetstream.consumer.actions import Status, pending_headers
from brook.jetstream.consumer.config import ConsumerSettings


@dataclass(slots=True)
class WaitingRequest:
    reply: str
    batch_left: int
    expires_at_ns: int | None  # None: waits until interest goes away
    no_wait: bool
    max_bytes: int  # 0: no byte budget
    bytes_left: int
    heartbeat_ns: int
    next_heartbeat_ns: int | None
    delivered: int = 0
    group: PullGroup | None = None  # the priority-group fields (None: not the JSON form)
    pin_id: str = ""  # the pin it holds, or claims (priority.py)

    def pending_status(self, code: int, description: str) -> Status:
        return Status(
            self.reply, code, description, pending_headers(self.batch_left, self.bytes_left)
        )


def admission_error(
    cfg: ConsumerSettings,
    reply: str,
    batch: int,
    expires_ns: int,
    max_bytes: int,
    idle_heartbeat_ns: int,
) -> Status | None:
    """The status that rejects a request outright (checks 1 and 3 of §6.5, plus the
    heartbeat check), or None when it may go on."""
    if cfg.is_push:
        return Status(reply, 409, "Consumer is push based")
    if cfg.max_batch > 0 and batch > cfg.max_batch:
        return Status(reply, 409, f"Exceeded MaxRequestBatch of {cfg.max_batch}")
    if cfg.max_expires_ns > 0 and expires_ns > cfg.max_expires_ns:
        text = durations.go_string(cfg.max_expires_ns)
        return Status(reply, 409, f"Exceeded MaxRequestExpires of {text}")
    if cfg.max_bytes > 0 and max_bytes > cfg.max_bytes:
        return Status(reply, 409, f"Exceeded MaxRequestMaxBytes of {cfg.max_bytes}")
    if idle_heartbeat_ns > 0 and 2 * idle_heartbeat_ns > expires_ns:
        return Status(reply, 400, "Bad Request - heartbeat value too large")
    return None


def message_size(subject: str, ack_subject: bytes, header: bytes | None, data: bytes) -> int:
    """What a delivery costs against a request's `max_bytes`."""
    return len(subject.encode()) + len(ack_subject) + len(header or b"") + len(data)
