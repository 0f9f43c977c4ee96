"""The settings the consumer state machine runs with (already validated and normalised)."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class AckPolicy(enum.Enum):
    NONE = "none"
    ALL = "all"
    EXPLICIT = "explicit"


class Retention(enum.Enum):
    LIMITS = "limits"
    INTEREST = "interest"
    WORKQUEUE = "workqueue"


DEFAULT_ACK_WAIT_NS = 30_000_000_000


@dataclass(frozen=True, slots=True)
class ConsumerSettings:
    """Normalised consumer configuration (wire reference §5.2) plus the stream's retention.

    Zero or negative limits mean "unlimited" (`max_deliver`, `max_ack_pending`,
    `max_waiting`, `max_batch`, `max_expires_ns`, `max_bytes`). A consumer with a
    `deliver_subject` is a push consumer; `idle_heartbeat_ns` applies to push consumers.
    """

    stream: str
    name: str
    ack_policy: AckPolicy = AckPolicy.EXPLICIT
    ack_wait_ns: int = DEFAULT_ACK_WAIT_NS
    backoff_ns: tuple[int, ...] = ()
    max_deliver: int = -1
    max_ack_pending: int = 1000
    max_waiting: int = 512
    max_batch: int = 0
    max_expires_ns: int = 0
    max_bytes: int = 0
    deliver_subject: str | None = None
    idle_heartbeat_ns: int = 0
    retention: Retention = Retention.LIMITS

    @property
    def is_push(self) -> bool:
        return bool(self.deliver_subject)

    @property
    def tracks_acks(self) -> bool:
        return self.ack_policy is not AckPolicy.NONE

    def ack_wait_for(self, deliveries: int) -> int:
        """How long the `deliveries`-th delivery (1 = first) may stay unacknowledged:
        `backoff[deliveries - 1]`, the last value repeating, else `ack_wait`."""
        if self.backoff_ns:
            return self.backoff_ns[min(max(deliveries, 1) - 1, len(self.backoff_ns) - 1)]
        return self.ack_wait_ns if self.ack_wait_ns > 0 else DEFAULT_ACK_WAIT_NS
