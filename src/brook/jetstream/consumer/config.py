"""The settings the consumer state machine runs with (already validated and normalised)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from brook.jetstream.models.defaults import (
    CONSUMER_ACK_WAIT_DEFAULT_NS,
    CONSUMER_MAX_ACK_PENDING_DEFAULT,
    CONSUMER_MAX_WAITING_DEFAULT,
)
from brook.limits import CONSUMER_FC_WINDOW_MAX_BYTES, CONSUMER_FC_WINDOW_START_BYTES


class AckPolicy(enum.Enum):
    NONE = "none"
    ALL = "all"
    EXPLICIT = "explicit"
    # ADR-60: acked as `all` by the answers to flow-control requests (their
    # `Nats-Last-Stream`/`Nats-Last-Consumer`), never redelivered on a timer; what a
    # mirror's or source's consumer on an interest or workqueue origin becomes.
    FLOW_CONTROL = "flow_control"


class PriorityPolicy(enum.Enum):
    """A pull consumer's priority policy (ADR-42): which waiting request is served."""

    NONE = "none"
    OVERFLOW = "overflow"
    PINNED_CLIENT = "pinned_client"
    PRIORITIZED = "prioritized"


class Retention(enum.Enum):
    LIMITS = "limits"
    INTEREST = "interest"
    WORKQUEUE = "workqueue"


@dataclass(frozen=True, slots=True)
class ConsumerSettings:
    """Normalised consumer configuration (wire reference §5.2) plus the stream's retention.

    Zero or negative limits mean "unlimited" (`max_deliver`, `max_ack_pending`,
    `max_waiting`, `max_batch`, `max_expires_ns`, `max_bytes`). A consumer with a
    `deliver_subject` is a push consumer; `idle_heartbeat_ns`, `flow_control` and
    `rate_limit_bps` apply to push consumers. `sample_percent` is the share of acks that
    produce an ack metric (0 = none). `rate_burst_bytes` is the rate limiter's bucket (the
    largest message, as nats-server sizes it). `paused_until_ns`: no deliveries before it.
    `priority_policy`, `priority_groups` and `pinned_ttl_ns` (nats-server's `PinnedTTL`):
    priority groups (priority.py).
    """

    stream: str
    name: str
    ack_policy: AckPolicy = AckPolicy.EXPLICIT
    ack_wait_ns: int = CONSUMER_ACK_WAIT_DEFAULT_NS
    backoff_ns: tuple[int, ...] = ()
    max_deliver: int = -1
    max_ack_pending: int = CONSUMER_MAX_ACK_PENDING_DEFAULT
    max_waiting: int = CONSUMER_MAX_WAITING_DEFAULT
    max_batch: int = 0
    max_expires_ns: int = 0
    max_bytes: int = 0
    deliver_subject: str | None = None
    idle_heartbeat_ns: int = 0
    retention: Retention = Retention.LIMITS
    flow_control: bool = False
    headers_only: bool = False
    replay_original: bool = False
    rate_limit_bps: int = 0
    rate_burst_bytes: int = 1024 * 1024
    sample_percent: int = 0
    paused_until_ns: int | None = None
    fc_window_start_bytes: int = CONSUMER_FC_WINDOW_START_BYTES
    fc_window_max_bytes: int = CONSUMER_FC_WINDOW_MAX_BYTES
    priority_policy: PriorityPolicy = PriorityPolicy.NONE
    priority_groups: tuple[str, ...] = ()
    pinned_ttl_ns: int = 0

    @property
    def is_push(self) -> bool:
        return bool(self.deliver_subject)

    @property
    def tracks_acks(self) -> bool:
        return self.ack_policy is not AckPolicy.NONE

    @property
    def acks_cumulative(self) -> bool:
        """An ack covers everything up to it (`all`, `flow_control`)."""
        return self.ack_policy in (AckPolicy.ALL, AckPolicy.FLOW_CONTROL)

    @property
    def redelivers(self) -> bool:
        """Pending messages have ack deadlines (not `none`, nor `flow_control`, whose
        ack_wait is unset: nats-server's `checkPending` never runs for it)."""
        return self.ack_policy not in (AckPolicy.NONE, AckPolicy.FLOW_CONTROL)

    def ack_wait_for(self, deliveries: int) -> int:
        """How long the `deliveries`-th delivery (1 = first) may stay unacknowledged:
        `backoff[deliveries - 1]`, the last value repeating, else `ack_wait`."""
        if self.backoff_ns:
            return self.backoff_ns[min(max(deliveries, 1) - 1, len(self.backoff_ns) - 1)]
        return self.ack_wait_ns if self.ack_wait_ns > 0 else CONSUMER_ACK_WAIT_DEFAULT_NS
