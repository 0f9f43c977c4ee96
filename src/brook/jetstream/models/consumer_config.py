"""Consumer configuration: the wire model and the decoding of a create request.

Follows nats-server 2.15 (wire reference §5, checked against the real server): the request
envelope is `{"stream_name","config","action","pedantic"}`; as for stream configs, unknown
keys are rejected with 10025 as the reference's strict decoder does. Creation rules,
defaults and validation live in `consumer_rules.py` (the default values in `defaults.py`);
JSON output in `consumer_json.py`.

`direct` and `sourcing` mark the consumers mirrors and sources create on their origin
(ADR 0020; the rules are in `consumer_rules.py`), the `flow_control` ack policy the durable
ones of interest and workqueue origins (ADR-60).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from brook.jetstream import versioning
from brook.jetstream.errors import ApiError, api_error
from brook.jetstream.fields import get_field, invalid_json
from brook.jetstream.models.info import parse_ts

MIN_IDLE_HEARTBEAT_NS = 100_000_000
MIN_MAX_EXPIRES_NS = 1_000_000

DELIVER_POLICIES = (
    "all",
    "last",
    "new",
    "by_start_sequence",
    "by_start_time",
    "last_per_subject",
)
ACK_POLICIES = ("none", "all", "explicit", "flow_control")
REPLAY_POLICIES = ("instant", "original")
PRIORITY_POLICIES = ("none", "overflow", "pinned_client", "prioritized")
ACTIONS = ("", "create", "update")

_ENVELOPE_KEYS = frozenset({"stream_name", "config", "action", "pedantic"})
_CONFIG_KEYS = frozenset(
    {
        "durable_name",
        "name",
        "description",
        "deliver_policy",
        "opt_start_seq",
        "opt_start_time",
        "ack_policy",
        "ack_wait",
        "max_deliver",
        "backoff",
        "filter_subject",
        "filter_subjects",
        "replay_policy",
        "rate_limit_bps",
        "sample_freq",
        "max_waiting",
        "max_ack_pending",
        "flow_control",
        "headers_only",
        "max_batch",
        "max_expires",
        "max_bytes",
        "deliver_subject",
        "deliver_group",
        "idle_heartbeat",
        "inactive_threshold",
        "num_replicas",
        "mem_storage",
        "direct",
        "sourcing",
        "metadata",
        "pause_until",
        "priority_groups",
        "priority_policy",
        "priority_timeout",
    }
)


@dataclass(slots=True)
class ConsumerConfig:
    """A consumer config after defaults. Times are ns since the epoch (0 = not set)."""

    durable_name: str = ""
    name: str = ""
    description: str = ""
    deliver_policy: str = "all"
    opt_start_seq: int = 0
    opt_start_time: int | None = None
    ack_policy: str = "none"
    ack_wait: int = 0
    max_deliver: int = -1
    backoff: list[int] = field(default_factory=list)
    filter_subject: str = ""
    filter_subjects: list[str] = field(default_factory=list)
    replay_policy: str = "instant"
    rate_limit_bps: int = 0
    sample_freq: str = ""
    max_waiting: int = 0
    max_ack_pending: int = 0
    flow_control: bool = False
    headers_only: bool = False
    max_batch: int = 0
    max_expires: int = 0
    max_bytes: int = 0
    deliver_subject: str = ""
    deliver_group: str = ""
    idle_heartbeat: int = 0
    inactive_threshold: int = 0
    num_replicas: int = 0
    mem_storage: bool = False
    # A mirror's or source's consumer (ADR 0020): no store, not listed, not counted.
    direct: bool = False
    sourcing: bool = False
    metadata: dict[str, str] = field(default_factory=dict)
    pause_until: int | None = None
    # Priority groups (ADR-42, ADR 0022): `priority_timeout` is the pinned client's TTL (ns).
    priority_groups: list[str] = field(default_factory=list)
    priority_policy: str = "none"
    priority_timeout: int = 0
    # The UTC offset (seconds) `opt_start_time` was given in: nats-server echoes it back.
    opt_start_time_offset: int = 0
    # `inactive_threshold` holds the ephemeral default (not given by the request).
    inactive_default: bool = False

    @property
    def is_durable(self) -> bool:
        return bool(self.durable_name)

    @property
    def is_push(self) -> bool:
        return bool(self.deliver_subject)

    @property
    def filters(self) -> list[str]:
        """`filter_subject` and `filter_subjects` as one list (empty: the whole stream)."""
        return [self.filter_subject] if self.filter_subject else list(self.filter_subjects)


# --- request envelope ---------------------------------------------------------------------


def _get(body: dict[str, Any], key: str, kind: type, default: Any) -> Any:
    return get_field(body, key, kind, default, invalid_json)


def _unsigned(body: dict[str, Any], key: str) -> int:
    value: int = _get(body, key, int, 0)
    if value < 0:
        raise invalid_json(
            f"json: cannot unmarshal number {value} into Go struct field "
            f"CreateConsumerRequest.config.{key} of type uint64"
        )
    return value


def _enum(body: dict[str, Any], key: str, allowed: tuple[str, ...], default: str) -> str:
    value = _get(body, key, str, default)
    if value not in allowed:
        raise invalid_json(f'can not unmarshal "\\"{value}\\""')
    return str(value)


def pause_until_field(body: dict[str, Any]) -> int | None:
    """CONSUMER.PAUSE's `pause_until` in ns; None when absent or the zero time (resume)."""
    until, _ = parse_go_time(body, "pause_until")
    return until if until is not None and until > 0 else None


def parse_go_time(body: dict[str, Any], key: str) -> tuple[int | None, int]:
    """A Go `*time.Time` field (RFC 3339): ns since the epoch and its UTC offset (s)."""
    text = _get(body, key, str, None)
    if text is None:
        return None, 0
    try:
        ns = parse_ts(text)
        offset = _utc_offset(text)
    except (ValueError, OverflowError):
        raise invalid_json(
            f'parsing time "{text}" as "2006-01-02T15:04:05Z07:00": cannot parse "{text}"'
        ) from None
    return ns, offset


def _utc_offset(text: str) -> int:
    text = text.strip()
    if text.endswith(("Z", "z")):
        return 0
    dt = datetime.fromisoformat(re.sub(r"\.[0-9]+", "", text))
    delta = dt.utcoffset()
    return int(delta.total_seconds()) if delta is not None else 0


def _strings(body: dict[str, Any], key: str) -> list[str]:
    values = _get(body, key, list, [])
    if not all(isinstance(v, str) for v in values):
        raise invalid_json(f"{key}: expected an array of strings")
    return list(values)


def _durations(body: dict[str, Any], key: str) -> list[int]:
    values = _get(body, key, list, [])
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise invalid_json(f"{key}: expected an array of integers")
    return list(values)


def create_action(body: Any) -> str:
    """The request's `action`: "" (create or update), "create" or "update"; else 10025."""
    if not isinstance(body, dict):
        return ""
    action = body.get("action")
    if action is None:
        return ""
    if not isinstance(action, str) or action not in ACTIONS:
        raise invalid_json(f"unknown consumer action: {_go_quote(action)}")
    return action


def _go_quote(value: Any) -> str:
    return json.dumps(value)


def _decode(body: Any) -> tuple[str, bool, dict[str, Any]]:
    """Decode the envelope as Go's strict decoder would: types, unknown fields, enums.
    Returns the stream name, `pedantic` and the raw config."""
    body = _strict_object(body, "Go value of type server.CreateConsumerRequest", _ENVELOPE_KEYS)
    stream_name = _get(body, "stream_name", str, "")
    pedantic = _get(body, "pedantic", bool, False)
    create_action(body)
    config = _strict_object(
        body.get("config"),
        "Go struct field CreateConsumerRequest.config of type server.ConsumerConfig",
        _CONFIG_KEYS,
    )
    return stream_name, pedantic, config


def _strict_object(value: Any, into: str, keys: Collection[str]) -> dict[str, Any]:
    """A JSON object (null: an empty one) as Go's strict decoder takes it `into` a struct
    whose fields are `keys`: another type or an unknown field is its error."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise invalid_json(f"json: cannot unmarshal {_json_kind(value)} into {into}")
    for key in value:
        if key not in keys:
            raise invalid_json(f'json: unknown field "{key}"')
    return value


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return "object"


def _config_from(raw: dict[str, Any]) -> ConsumerConfig:
    metadata = _get(raw, "metadata", dict, {})
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise invalid_json("metadata: expected an object of strings")
    opt_start_time, offset = parse_go_time(raw, "opt_start_time")
    pause_until, _ = parse_go_time(raw, "pause_until")
    ack_policy = _enum(raw, "ack_policy", ACK_POLICIES, "none")
    return ConsumerConfig(
        durable_name=_get(raw, "durable_name", str, ""),
        name=_get(raw, "name", str, ""),
        description=_get(raw, "description", str, ""),
        deliver_policy=_enum(raw, "deliver_policy", DELIVER_POLICIES, "all"),
        opt_start_seq=_unsigned(raw, "opt_start_seq"),
        opt_start_time=opt_start_time,
        opt_start_time_offset=offset,
        ack_policy=ack_policy,
        ack_wait=_get(raw, "ack_wait", int, 0),
        max_deliver=_get(raw, "max_deliver", int, 0),
        backoff=_durations(raw, "backoff"),
        filter_subject=_get(raw, "filter_subject", str, ""),
        filter_subjects=_strings(raw, "filter_subjects"),
        replay_policy=_enum(raw, "replay_policy", REPLAY_POLICIES, "instant"),
        rate_limit_bps=_unsigned(raw, "rate_limit_bps"),
        sample_freq=_get(raw, "sample_freq", str, ""),
        max_waiting=_get(raw, "max_waiting", int, 0),
        max_ack_pending=_get(raw, "max_ack_pending", int, 0),
        flow_control=_get(raw, "flow_control", bool, False),
        headers_only=_get(raw, "headers_only", bool, False),
        max_batch=_get(raw, "max_batch", int, 0),
        max_expires=_get(raw, "max_expires", int, 0),
        max_bytes=_get(raw, "max_bytes", int, 0),
        deliver_subject=_get(raw, "deliver_subject", str, ""),
        deliver_group=_get(raw, "deliver_group", str, ""),
        idle_heartbeat=_get(raw, "idle_heartbeat", int, 0),
        inactive_threshold=_get(raw, "inactive_threshold", int, 0),
        num_replicas=_get(raw, "num_replicas", int, 0),
        mem_storage=_get(raw, "mem_storage", bool, False),
        direct=_get(raw, "direct", bool, False),
        sourcing=_get(raw, "sourcing", bool, False),
        metadata=versioning.user_metadata(metadata),
        pause_until=pause_until,
        priority_groups=_strings(raw, "priority_groups"),
        priority_policy=_priority_policy(raw),
        priority_timeout=_get(raw, "priority_timeout", int, 0),
    )


def _priority_policy(raw: dict[str, Any]) -> str:
    """`priority_policy`, refused in the words of nats-server's `PriorityPolicy.UnmarshalJSON`."""
    value = _get(raw, "priority_policy", str, "none")
    if value not in PRIORITY_POLICIES:
        raise invalid_json(f"unknown priority policy: {_go_quote(value)}")
    return str(value)


def unsupported(what: str) -> ApiError:
    return api_error("STREAM_INVALID_CONFIG", err=f"{what} not supported by this server")
