"""Consumers: a pure, synchronous state machine per consumer (`state.ConsumerState`,
composing its ledger of pending messages `pending.py`, its position and dispatch
`delivery.py`, `pacing.py` and `flow.py`: ADR 0015) that turns inputs into actions
(`actions.py`); the codecs of ack subjects, ack payloads and pull requests (`acks.py`);
what it reads through (`source.py`). A `runner.ConsumerRunner` owns each consumer's
inputs (its subscriptions, one timer, its lifecycle) and an `executor.ActionExecutor`
carries out the actions; `files.py` keeps durable consumers on disk, and
`registry.ConsumerRegistry` every stream's consumers for the engine."""

from brook.jetstream.consumer.acks import (
    AckKind,
    AckMeta,
    AckPayload,
    PullGroup,
    PullRequest,
    PullRequestError,
    ack_subject,
    parse_ack_payload,
    parse_ack_subject,
    parse_pull_request,
)
from brook.jetstream.consumer.actions import (
    Acked,
    Action,
    Advisory,
    Deliver,
    DeliverRun,
    RemoveMessage,
    Status,
)
from brook.jetstream.consumer.config import (
    AckPolicy,
    ConsumerSettings,
    PriorityPolicy,
    Retention,
)
from brook.jetstream.consumer.pending import Pending
from brook.jetstream.consumer.source import (
    DeliverPolicy,
    MessageSource,
    StoreSource,
    resolve_start_seq,
)
from brook.jetstream.consumer.state import ConsumerState

__all__ = [
    "AckKind",
    "AckMeta",
    "AckPayload",
    "AckPolicy",
    "Acked",
    "Action",
    "Advisory",
    "ConsumerSettings",
    "ConsumerState",
    "Deliver",
    "DeliverPolicy",
    "DeliverRun",
    "MessageSource",
    "Pending",
    "PriorityPolicy",
    "PullGroup",
    "PullRequest",
    "PullRequestError",
    "RemoveMessage",
    "Retention",
    "Status",
    "StoreSource",
    "ack_subject",
    "parse_ack_payload",
    "parse_ack_subject",
    "parse_pull_request",
    "resolve_start_seq",
]
