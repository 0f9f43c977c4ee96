"""What a mirror's or source's link asks its origin (ADR 0020): the consumer-create and
reset requests (`CreateRequest`) as nats-server's `setupMirrorConsumer` and
`setupSourceConsumer` send them, their subjects (`external.api` applied) and deliver
subjects, the config a mirror's and a source's consumer share, and the second try
without `sourcing` for an origin that refuses it (`without_sourcing`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from brook.jetstream.models.defaults import SOURCING_HEARTBEAT_NS
from brook.jetstream.models.sources import StreamSource
from brook.nuid import random_name

HEARTBEAT_NS = SOURCING_HEARTBEAT_NS  # the origin consumer's idle heartbeat
HEALTH_CHECK_NS = 10_000_000_000  # stalled after this long without a message
ACCOUNT = "$G"  # Brook serves one account, nats-server's global account
ACK_WAIT_NS = 22 * 3600 * 1_000_000_000  # the ack_wait of a mirror's or source's consumer
API_PREFIX = "$JS.API"  # replaced by `external.api` for another account or domain


def sync_subject(prefix: str) -> str:
    """nats-server's `syncSubject`: `prefix` and a random id."""
    return f"{prefix}.{random_name()}"


def link_subject(prefix: str) -> str:
    """A deliver subject as nats-server makes it (`syncSubject`, `..` collapsed)."""
    return sync_subject(prefix).replace("..", ".")


def origin_consumer_config(
    source: StreamSource, deliver_subject: str, metadata: dict[str, str]
) -> dict[str, Any]:
    """What a mirror's and a source's consumer config share after their start options, in
    the order `setupMirrorConsumer` and `setupSourceConsumer` send it: no acks (one
    delivery, a day's ack_wait), the filter (the source's own or its transforms'
    sources), instant replay with flow control and heartbeats to `deliver_subject`, and
    `metadata` naming the account and stream it is for."""
    config: dict[str, Any] = {"ack_policy": "none", "ack_wait": ACK_WAIT_NS, "max_deliver": 1}
    filters = [t.src for t in source.subject_transforms]
    if source.filter_subject:
        config["filter_subject"] = source.filter_subject
    elif len(filters) == 1:
        config["filter_subject"] = filters[0]
    elif filters:
        config["filter_subjects"] = filters
    config |= {
        "replay_policy": "instant",
        "flow_control": True,
        "deliver_subject": deliver_subject,
        "idle_heartbeat": HEARTBEAT_NS,
        "inactive_threshold": HEALTH_CHECK_NS,
        "num_replicas": 0,
        "direct": True,
        "sourcing": True,
        "metadata": metadata,
    }
    return config


@dataclass(frozen=True, slots=True)
class CreateRequest:
    """One consumer-create request: where it goes, its header and JSON body. With a
    `deliver` subject it is the reset of a consumer created beforehand on the origin
    (the `consumer` of a mirror or source, ADR-60: `$JS.API.CONSUMER.RESET`, no header,
    an empty payload whatever `body` says) whose deliveries go to `deliver`."""

    subject: str
    header: bytes | None
    body: dict[str, Any]
    deliver: str = ""


def api_subject(source: StreamSource, rest: str) -> str:
    """`$JS.API.CONSUMER.<rest>` of the origin of `source` (its `external.api` prefix
    instead of `$JS.API`, `..` collapsed, as nats-server writes it)."""
    subject = f"{API_PREFIX}.CONSUMER.{rest}"
    if source.external is not None:
        subject = subject.replace(API_PREFIX, source.external.api, 1).replace("..", ".")
    return subject


def reset_request(source: StreamSource, header: bytes | None = None) -> CreateRequest:
    """The request for a consumer created beforehand on the origin (a mirror's or
    source's `consumer`, ADR-60): nats-server resets it to its ack floor
    (`$JS.API.CONSUMER.RESET.<origin>.<consumer>`, an empty payload; a source sends the
    header of its create requests, a mirror none) and takes its deliveries on the
    configured deliver subject."""
    consumer = source.consumer
    assert consumer is not None
    subject = api_subject(source, f"RESET.{source.name}.{consumer.name}")
    return CreateRequest(subject, header, {}, deliver=consumer.deliver_subject)


# The errors after which nats-server asks again without `sourcing`: the origin's API level
# is too low for it (JSRequiredApiLevelErr), or its JSON decoder does not know the field.
_NO_SOURCING_ERRORS = (10185, 10025)


def without_sourcing(request: CreateRequest | None, error: Any) -> CreateRequest | None:
    """nats-server's second try when the origin refused a sourcing consumer as too new:
    the same request without `sourcing` nor the API-level header, under a name of its own
    (`<name>_<8 random characters>`, in the subject too where the name is)."""
    if request is None or request.deliver or not isinstance(error, dict):
        return None
    config = request.body.get("config", {})
    if not config.get("sourcing") or error.get("err_code") not in _NO_SOURCING_ERRORS:
        return None
    name = config["name"]
    unique = f"{name}_{random_name()}"
    config = {k: v for k, v in config.items() if k != "sourcing"} | {"name": unique}
    subject = request.subject.replace(f".{name}.", f".{unique}.", 1)
    return CreateRequest(subject, None, {**request.body, "config": config})
