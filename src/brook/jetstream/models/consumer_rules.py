"""Consumer creation rules: subject checks, nats-server's defaults, validation, updates.

The checks run in the order of nats-server's `checkConsumerCfg`, so a request with several
problems gets the same error as from nats-server (wire reference §5.3-§5.4). Rules that
need state beyond one config (an existing consumer, other consumers of a workqueue stream)
take that state as arguments.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from typing import Any

from brook import durations, strconv
from brook.jetstream.errors import ApiError, api_error
from brook.jetstream.fields import invalid_json
from brook.jetstream.models.consumer_config import (
    MIN_IDLE_HEARTBEAT_NS,
    MIN_MAX_EXPIRES_NS,
    ConsumerConfig,
    _config_from,
    _decode,
    _json_kind,
    unsupported,
)
from brook.jetstream.models.defaults import (
    CONSUMER_ACK_WAIT_DEFAULT_NS,
    CONSUMER_INACTIVE_THRESHOLD_DEFAULT_NS,
    CONSUMER_MAX_ACK_PENDING_DEFAULT,
    CONSUMER_MAX_WAITING_DEFAULT,
    CONSUMER_PINNED_TTL_DEFAULT_NS,
    DESCRIPTION_BYTES_MAX,
    GROUP_NAME,
    METADATA_BYTES_MAX,
    NAME_BYTES_MAX,
    NAME_FORBIDDEN,
    SOURCING_HEARTBEAT_NS,
)
from brook.jetstream.models.stream_config import StreamConfig, subjects_overlap
from brook.subjects import is_valid_literal_subject, is_valid_subject, subset_match

# --- create -------------------------------------------------------------------------------


def parse_consumer_create(
    body: Any,
    *,
    stream: StreamConfig | None,
    subject_stream: str,
    subject_consumer: str | None = None,
    subject_filter: str | None = None,
    durable_subject: bool = False,
    stream_identity: Callable[[], str] = lambda: "",
    expected_identity: str | None = None,
    unique_suffix: Callable[[], str] = lambda: "",
    account_max_ack_pending: int = -1,
) -> ConsumerConfig:
    """A consumer create request → a defaulted, validated config (ApiError otherwise).

    The subject decides the name rules (wire reference §5.4):
    `$JS.API.CONSUMER.CREATE.<S>` → `subject_consumer=None`;
    `$JS.API.CONSUMER.CREATE.<S>.<C>[.<filter>]` → `subject_consumer=C`, `subject_filter`;
    `$JS.API.CONSUMER.DURABLE.CREATE.<S>.<D>` → `subject_consumer=D, durable_subject=True`.
    `stream` is None when the stream does not exist (10059, after the subject checks, as
    nats-server). The returned `name` is "" for a legacy ephemeral: the caller generates
    one (it is not part of the config). Read the request's action with `create_action`.

    A `direct` consumer (what a mirror or source creates on its origin, ADR 0020) is
    checked against the origin's identity (`stream_identity()`, nats-server's hash of the
    stream's creation time) when the request's `Nats-Stream-Identity` header is given
    (`expected_identity`, 10225); a named one gets `-<unique_suffix()>` appended, as the
    link asks with the same stable name every time. `account_max_ack_pending` is the
    account's `max_ack_pending` limit (quota.py; <= 0: none): the default below it, a
    larger value refused (10121).
    """
    stream_name, pedantic, raw = _decode(body)
    c = _config_from(raw)
    if stream_name != subject_stream:
        raise api_error("STREAM_MISMATCH")
    _check_subject(c, subject_consumer, subject_filter, durable_subject)
    for name in (c.name, c.durable_name):
        if "/" in name or "\\" in name:
            raise api_error("CONSUMER_NAME_CONTAINS_PATH_SEPARATORS")
    if c.num_replicas > 1:
        raise api_error("STREAM_REPLICAS_NOT_SUPPORTED")
    if stream is None:
        raise api_error("STREAM_NOT_FOUND")
    if c.direct or c.sourcing:
        _check_direct(c, stream, stream_identity, expected_identity, unique_suffix)
    apply_defaults(c, stream, pedantic=pedantic, account_max_ack_pending=account_max_ack_pending)
    validate_consumer_config(c, stream, account_max_ack_pending=account_max_ack_pending)
    if len(c.name.encode()) > NAME_BYTES_MAX:
        raise api_error("CONSUMER_NAME_TOO_LONG", max=NAME_BYTES_MAX)
    return c


def _check_subject(
    c: ConsumerConfig,
    subject_consumer: str | None,
    subject_filter: str | None,
    durable_subject: bool,
) -> None:
    if durable_subject:
        if not c.durable_name:
            raise api_error("CONSUMER_DURABLE_NAME_NOT_SET")
        if c.durable_name != subject_consumer:
            raise api_error("CONSUMER_DURABLE_NAME_NOT_MATCH_SUBJECT")
    elif subject_consumer is None:
        if c.durable_name:
            raise api_error("CONSUMER_EPHEMERAL_WITH_DURABLE_NAME")
    else:
        if c.durable_name and c.durable_name != subject_consumer:
            raise api_error("CONSUMER_DURABLE_NAME_NOT_MATCH_SUBJECT")
        if subject_filter is not None:
            if c.filter_subjects:
                raise api_error("CONSUMER_MULTIPLE_FILTERS_NOT_ALLOWED")
            if c.filter_subject != subject_filter:
                raise api_error("CONSUMER_CREATE_FILTER_SUBJECT_MISMATCH")
    if subject_consumer is not None:
        c.name = subject_consumer  # the subject's name wins over config.name, as nats-server
    if c.durable_name:
        c.name = c.durable_name


def _check_direct(
    c: ConsumerConfig,
    stream: StreamConfig,
    stream_identity: Callable[[], str],
    expected_identity: str | None,
    unique_suffix: Callable[[], str],
) -> None:
    """The steps nats-server's create handler takes for a direct or sourcing consumer
    before its config checks (10090/10091 come with those). On an interest or workqueue
    stream a named direct sourcing consumer (a mirror's or source's, ADR 0020) becomes a
    durable one acked by its flow-control answers (ADR-60): `direct` off, `durable_name`
    its name, `ack_policy: flow_control`, no ack wait, max deliver nor inactive threshold;
    on a limits stream it gets `-<unique_suffix()>` appended, as the link asks with the
    same stable name every time. Other direct consumers of interest and workqueue streams
    (unnamed, or not sourcing) stay refused (10052)."""
    if c.direct and c.sourcing and c.name:
        if stream.retention != "limits":
            c.direct = False
            c.durable_name = c.name
            c.ack_policy = "flow_control"
            c.ack_wait = c.max_deliver = c.inactive_threshold = 0
        else:
            c.name = f"{c.name}-{unique_suffix()}"
    if c.direct and stream.retention != "limits":
        raise unsupported("direct consumers of interest and workqueue streams are")
    if expected_identity and expected_identity != (identity := stream_identity()):
        raise api_error("CONSUMER_STREAM_IDENTITY_MISMATCH", identity=identity)


def _consumer_limits(stream: StreamConfig) -> tuple[int, int]:
    limits = stream.consumer_limits
    max_ack_pending = limits.get("max_ack_pending", 0)
    inactive_threshold = limits.get("inactive_threshold", 0)
    return (
        max_ack_pending if isinstance(max_ack_pending, int) else 0,
        inactive_threshold if isinstance(inactive_threshold, int) else 0,
    )


def apply_defaults(
    c: ConsumerConfig,
    stream: StreamConfig,
    *,
    pedantic: bool = False,
    account_max_ack_pending: int = -1,
) -> None:
    """nats-server's `setConsumerConfigDefaults` plus the ephemeral stamp. A `pedantic`
    request is refused (10157) where a default would change a value it set."""

    def adjust(key: str, value: int, rule: str) -> None:
        if pedantic:
            raise api_error("PEDANTIC", err=f"{key} {rule}")
        setattr(c, key, value)

    limit_ack_pending, limit_inactive = _consumer_limits(stream)
    if c.max_deliver < -1:
        adjust("max_deliver", -1, "must be set to -1")
    if c.max_deliver == 0:
        c.max_deliver = -1
    if c.max_waiting < 0:
        adjust("max_waiting", 0, "must not be negative")
    if c.max_ack_pending < -1:
        adjust("max_ack_pending", -1, "must be set to -1")
    for key in (
        "max_batch",
        "max_expires",
        "max_bytes",
        "idle_heartbeat",
        "inactive_threshold",
        "priority_timeout",
    ):
        if getattr(c, key) < 0:
            adjust(key, 0, "must not be negative")
    if not c.deliver_subject and c.max_waiting == 0:
        c.max_waiting = CONSUMER_MAX_WAITING_DEFAULT
    if c.ack_wait == 0 and c.ack_policy in ("explicit", "all"):
        c.ack_wait = CONSUMER_ACK_WAIT_DEFAULT_NS
    if c.backoff:
        if pedantic and c.ack_wait != c.backoff[0]:
            raise api_error("PEDANTIC", err="first backoff value has to equal batch AckWait")
        c.ack_wait = c.backoff[0]
    if c.max_ack_pending == 0 and limit_ack_pending > 0:
        rule = "must be set if it's configured in stream limits"
        adjust("max_ack_pending", limit_ack_pending, rule)
    if c.inactive_threshold == 0 and limit_inactive > 0:
        rule = "must be set if it's configured in stream limits"
        adjust("inactive_threshold", limit_inactive, rule)
    if c.max_ack_pending == 0 and c.ack_policy != "none":
        c.max_ack_pending = CONSUMER_MAX_ACK_PENDING_DEFAULT
        if 0 < account_max_ack_pending < c.max_ack_pending:
            c.max_ack_pending = account_max_ack_pending
    if c.priority_policy == "pinned_client" and c.priority_timeout == 0:
        c.priority_timeout = CONSUMER_PINNED_TTL_DEFAULT_NS
    if not c.durable_name and c.inactive_threshold <= 0:
        c.inactive_threshold = (
            CONSUMER_INACTIVE_THRESHOLD_DEFAULT_NS  # ephemerals are always reaped
        )
        c.inactive_default = True
    if c.ack_policy == "flow_control" and not pedantic:
        c.flow_control = True
        c.idle_heartbeat = SOURCING_HEARTBEAT_NS


def valid_consumer_name(name: str) -> bool:
    return bool(name) and not (NAME_FORBIDDEN & set(name)) and "/" not in name and "\\" not in name


def validate_consumer_config(
    c: ConsumerConfig, stream: StreamConfig, *, account_max_ack_pending: int = -1
) -> None:
    """nats-server's `checkConsumerCfg`, in its order (call after `apply_defaults`)."""
    invalid = "consumer {}name can not contain '.', '*', '>', '\\', '/'"
    if c.name and not valid_consumer_name(c.name):
        raise api_error("STREAM_INVALID_CONFIG", err=invalid.format(""))
    if c.durable_name and not valid_consumer_name(c.durable_name):
        raise api_error("STREAM_INVALID_CONFIG", err=invalid.format("durable "))
    stream_replicas = stream.num_replicas or 1
    if c.num_replicas > 0 and c.num_replicas > stream_replicas:
        raise api_error("CONSUMER_REPLICAS_EXCEEDS_STREAM")
    if c.num_replicas < 0:
        raise api_error("REPLICAS_COUNT_CANNOT_BE_NEGATIVE")
    if (
        stream.retention in ("interest", "workqueue")
        and c.num_replicas != 0
        and c.num_replicas != stream_replicas
    ):
        raise api_error("CONSUMER_REPLICAS_SHOULD_MATCH_STREAM")
    if any(b < 0 for b in c.backoff):
        raise api_error("CONSUMER_BACKOFF_NEGATIVE")
    if c.ack_wait < 0:
        raise api_error("CONSUMER_ACK_WAIT_NEGATIVE")
    if c.ack_policy == "flow_control":
        _validate_ack_flow_control(c)
    if c.backoff and c.max_deliver != -1 and len(c.backoff) > c.max_deliver:
        raise api_error("CONSUMER_MAX_DELIVER_BACKOFF")
    if len(c.description.encode()) > DESCRIPTION_BYTES_MAX:
        raise api_error("CONSUMER_DESCRIPTION_TOO_LONG", max=DESCRIPTION_BYTES_MAX)
    if c.deliver_subject:
        _validate_push(c, stream)
    else:
        _validate_pull(c, stream)
    if 0 < account_max_ack_pending < c.max_ack_pending:
        raise api_error("CONSUMER_MAX_PENDING_ACK_EXCESS", limit=account_max_ack_pending)
    limit_ack_pending, limit_inactive = _consumer_limits(stream)
    if limit_ack_pending > 0 and c.max_ack_pending > limit_ack_pending:
        raise api_error("CONSUMER_MAX_PENDING_ACK_EXCESS", limit=limit_ack_pending)
    if limit_inactive > 0 and c.inactive_threshold > limit_inactive:
        raise api_error(
            "CONSUMER_INACTIVE_THRESHOLD_EXCESS", limit=durations.go_string(limit_inactive)
        )
    if c.direct:
        if not c.deliver_subject:
            raise api_error("CONSUMER_DIRECT_REQUIRES_PUSH")
        if c.durable_name:
            raise api_error("CONSUMER_DIRECT_REQUIRES_EPHEMERAL")
    _validate_filters(c)
    _validate_start(c)
    if c.sample_freq:
        _validate_sample_freq(c.sample_freq)
    if c.flow_control and c.idle_heartbeat == 0:
        raise api_error("CONSUMER_WITH_FLOW_CONTROL_NEEDS_HEARTBEATS")
    if c.durable_name and c.name and c.name != c.durable_name:
        raise api_error("CONSUMER_CREATE_DURABLE_AND_NAME_MISMATCH")
    if sum(len(k.encode()) + len(v.encode()) for k, v in c.metadata.items()) > METADATA_BYTES_MAX:
        raise api_error("CONSUMER_METADATA_LENGTH", limit=f"{METADATA_BYTES_MAX // 1024}KB")
    _validate_priority(c)


def _validate_ack_flow_control(c: ConsumerConfig) -> None:
    """The `flow_control` ack policy (ADR-60) needs a push consumer with flow control, a
    1 s heartbeat (that of mirrors' and sources' consumers, which their stall check
    relies on), a `max_ack_pending`, and neither an ack wait, a backoff nor a max
    deliver: its flow-control answers are its acks."""
    if not c.deliver_subject:
        raise api_error("CONSUMER_ACK_FC_REQUIRES_PUSH")
    if not c.flow_control:
        raise api_error("CONSUMER_ACK_FC_REQUIRES_FC")
    if c.idle_heartbeat != SOURCING_HEARTBEAT_NS:
        raise api_error(
            "STREAM_INVALID_CONFIG", err="flow control ack policy heartbeat needs to be 1s"
        )
    if c.max_ack_pending <= 0:
        raise api_error("CONSUMER_ACK_FC_REQUIRES_MAX_ACK_PENDING")
    if c.ack_wait != 0 or c.backoff:
        raise api_error("CONSUMER_ACK_FC_REQUIRES_NO_ACK_WAIT")
    if c.max_deliver > 0:
        raise api_error("CONSUMER_ACK_FC_REQUIRES_NO_MAX_DELIVER")


def _validate_priority(c: ConsumerConfig) -> None:
    """Priority groups (ADR-42) are for pull consumers with a policy, each group named as
    nats-server's `validGroupName` allows."""
    if c.priority_policy != "none":
        if c.deliver_subject:
            raise api_error("CONSUMER_PUSH_WITH_PRIORITY_GROUP")
        if not c.priority_groups:
            raise api_error("CONSUMER_PRIORITY_POLICY_WITHOUT_GROUP")
        for group in c.priority_groups:
            if not group:
                raise api_error("CONSUMER_EMPTY_GROUP_NAME")
            if not GROUP_NAME.fullmatch(group):
                raise api_error("CONSUMER_INVALID_GROUP_NAME")
    elif c.priority_groups:
        raise api_error("CONSUMER_PRIORITY_GROUP_WITH_POLICY_NONE")
    elif c.priority_timeout > 0:
        raise api_error("CONSUMER_PINNED_TTL_WITHOUT_PRIORITY_POLICY_NONE")


def _validate_push(c: ConsumerConfig, stream: StreamConfig) -> None:
    subject = c.deliver_subject.encode()
    if is_valid_subject(subject) and not is_valid_literal_subject(subject):
        raise api_error("CONSUMER_DELIVER_TO_WILDCARDS")
    if not is_valid_literal_subject(subject):
        raise api_error("CONSUMER_INVALID_DELIVER_SUBJECT")
    if any(
        is_valid_subject(s.encode()) and subset_match(s.encode(), subject) for s in stream.subjects
    ):
        raise api_error("CONSUMER_DELIVER_CYCLE")
    if c.max_waiting != 0:
        raise api_error("CONSUMER_PUSH_MAX_WAITING")
    if c.max_ack_pending > 0 and c.ack_policy == "none":
        raise api_error("CONSUMER_MAX_PENDING_ACK_POLICY_REQUIRED")
    if 0 < c.idle_heartbeat < MIN_IDLE_HEARTBEAT_NS:
        raise api_error("CONSUMER_SMALL_HEARTBEAT")


def _validate_pull(c: ConsumerConfig, stream: StreamConfig) -> None:
    if c.ack_policy == "none" and stream.retention == "workqueue":
        raise api_error("CONSUMER_PULL_REQUIRES_ACK")
    if c.rate_limit_bps > 0:
        raise api_error("CONSUMER_PULL_WITH_RATE_LIMIT")
    if c.idle_heartbeat > 0:
        raise api_error("CONSUMER_HB_REQUIRES_PUSH")
    if c.flow_control:
        raise api_error("CONSUMER_FC_REQUIRES_PUSH")
    if c.max_expires != 0 and c.max_expires < MIN_MAX_EXPIRES_NS:
        raise api_error("CONSUMER_MAX_REQUEST_EXPIRES_TOO_SMALL")


def _validate_filters(c: ConsumerConfig) -> None:
    if c.filter_subject and c.filter_subjects:
        raise api_error("CONSUMER_DUPLICATE_FILTER_SUBJECTS")
    if c.filter_subject and not is_valid_subject(c.filter_subject.encode()):
        raise api_error("STREAM_INVALID_CONFIG", err="invalid subject")
    if any(not f for f in c.filter_subjects):
        raise api_error("CONSUMER_EMPTY_FILTER")
    filters = c.filters
    for i, subject in enumerate(filters):
        if not is_valid_subject(subject.encode()):
            raise api_error("STREAM_INVALID_CONFIG", err="invalid subject")
        for j, other in enumerate(filters):
            if i != j and subset_match(other.encode(), subject.encode()):
                raise api_error("CONSUMER_OVERLAPPING_SUBJECT_FILTERS")


_POLICY_TEXT = {
    "all": "all",
    "last": "last",
    "new": "new",
    "last_per_subject": "last per subject",
    "by_start_sequence": "by start sequence",
    "by_start_time": "by start time",
}


def _validate_start(c: ConsumerConfig) -> None:
    policy = _POLICY_TEXT[c.deliver_policy]

    def bad_start(start: str) -> ApiError:
        return api_error(
            "CONSUMER_INVALID_POLICY",
            err=f"consumer delivery policy is deliver {policy}, but optional start {start} "
            "is also set",
        )

    def not_set(what: str) -> ApiError:
        return api_error(
            "CONSUMER_INVALID_POLICY",
            err=f"consumer delivery policy is deliver {policy}, but optional {what} is not set",
        )

    if c.deliver_policy in ("all", "last", "new", "last_per_subject"):
        if c.opt_start_seq > 0:
            raise bad_start("sequence")
        if c.opt_start_time is not None:
            raise bad_start("time")
        if c.deliver_policy == "last_per_subject" and not c.filters:
            raise not_set("filter subject")
    elif c.deliver_policy == "by_start_sequence":
        if c.opt_start_seq == 0:
            raise not_set("start sequence")
        if c.opt_start_time is not None:
            raise bad_start("time")
    else:  # by_start_time
        if c.opt_start_time is None:
            raise not_set("start time")
        if c.opt_start_seq != 0:
            raise bad_start("start sequence")  # sic: nats-server says "start start sequence"


def _validate_sample_freq(value: str) -> None:
    text = value.removesuffix("%")
    if not strconv.INTEGER.fullmatch(text):
        err = f'strconv.Atoi: parsing "{text}": invalid syntax'
    elif int(text) < 0:
        err = "<nil>"
    elif int(text) > 2**63 - 1:
        err = f'strconv.Atoi: parsing "{text}": value out of range'
    else:
        return
    raise api_error("CONSUMER_INVALID_SAMPLING", err=err)


# --- existing consumers -------------------------------------------------------------------


def same_consumer_config(old: ConsumerConfig, new: ConsumerConfig) -> bool:
    """Is `new` (from a request) equal to the stored `old`? (action "create": else 10148)

    As nats-server compares the request before stamping the ephemeral default
    inactive threshold, a re-sent non-durable config without one never equals.
    """
    a, b = dataclasses.asdict(old), dataclasses.asdict(new)
    if new.inactive_default:
        b["inactive_threshold"] = 0
    for d in (a, b):
        d.pop("inactive_default")
    return a == b


def check_consumer_update(
    old: ConsumerConfig, new: ConsumerConfig, *, deliver_subject_bound: bool = False
) -> ConsumerConfig:
    """nats-server's `checkNewConsumerConfig`: raise 10012 for a fixed field that changed.

    Returns the config to store: `new`, except that `pause_until` keeps the old value
    (create/update ignores it for an existing consumer; CONSUMER.PAUSE changes it).
    `deliver_subject_bound`: the old deliver subject still has a subscriber (then
    changing it is 10013, as nats-server).
    """
    result = dataclasses.replace(new, pause_until=old.pause_until)

    def fixed(err: str) -> ApiError:
        return api_error("CONSUMER_CREATE", err=err)

    if old.deliver_policy != new.deliver_policy:
        raise fixed("deliver policy can not be updated")
    if old.mem_storage != new.mem_storage:
        raise fixed("storage type can not be updated")
    if old.direct != new.direct:
        raise fixed("direct can not be updated")
    if old.sourcing != new.sourcing:
        raise fixed("sourcing can not be updated")
    if old.opt_start_seq != new.opt_start_seq:
        raise fixed("start sequence can not be updated")
    if old.opt_start_time != new.opt_start_time:
        raise fixed("start time can not be updated")
    if old.ack_policy != new.ack_policy:
        raise fixed("ack policy can not be updated")
    if old.replay_policy != new.replay_policy:
        raise fixed("replay policy can not be updated")
    if old.idle_heartbeat != new.idle_heartbeat:
        raise fixed("heart beats can not be updated")
    if old.flow_control != new.flow_control:
        raise fixed("flow control can not be updated")
    if old.deliver_subject != new.deliver_subject:
        if not old.deliver_subject:
            raise fixed("can not update pull consumer to push based")
        if not new.deliver_subject:
            raise fixed("can not update push consumer to pull based")
        if deliver_subject_bound:
            raise api_error("CONSUMER_NAME_EXIST")
    if old.max_waiting != new.max_waiting:
        raise fixed("max waiting can not be updated")
    if new.backoff and new.max_deliver != -1 and len(new.backoff) > new.max_deliver:
        raise api_error("CONSUMER_MAX_DELIVER_BACKOFF")
    return result


def check_workqueue(
    c: ConsumerConfig, stream: StreamConfig, others: Mapping[str, ConsumerConfig]
) -> None:
    """Workqueue rules for a NEW consumer (nats-server checks them after 10149/10026).

    `others`: the stream's existing consumers by name.
    """
    if stream.retention != "workqueue" or c.direct or c.sourcing:
        return
    if c.ack_policy not in ("explicit", "flow_control"):
        raise api_error("CONSUMER_WQ_REQUIRES_EXPLICIT_ACK")
    if c.deliver_policy != "all":
        raise api_error("CONSUMER_WQ_CONSUMER_NOT_DELIVER_ALL")
    if not others:
        return
    if not c.filters:
        raise api_error("CONSUMER_WQ_MULTIPLE_UNFILTERED")
    _check_partition(c, others)


def check_workqueue_update(
    c: ConsumerConfig, stream: StreamConfig, others: dict[str, ConsumerConfig]
) -> None:
    """Workqueue rule for an UPDATE of an existing consumer (nats-server checks it after
    10148 and before the fields that may not change): its new filters must not overlap
    another consumer's. Like nats-server, an update to no filter at all is not refused.
    """
    if stream.retention == "workqueue":
        _check_partition(c, others)


def _check_partition(c: ConsumerConfig, others: Mapping[str, ConsumerConfig]) -> None:
    """nats-server's `partitionUnique`: 10100 when one of `c`'s filters collides with a
    filter of another consumer, or another consumer takes every subject."""
    filters = c.filters
    if not filters:
        return
    for name, other in others.items():
        if name == c.name:
            continue
        theirs = other.filters
        if not theirs or subjects_overlap(filters, theirs):
            raise api_error("CONSUMER_WQ_CONSUMER_NOT_UNIQUE")


# --- reset --------------------------------------------------------------------------------


def parse_reset_request(body: bytes) -> int:
    """The `seq` of a `$JS.API.CONSUMER.RESET` request, 0 meaning "back to the ack floor",
    decoded as nats-server's lenient `json.Unmarshal` into an unsigned `seq` decodes it:
    an empty body or `null` asks for nothing, unknown fields are ignored, field names match
    without regard to case (the last match wins), anything else is 10025."""
    if not body:
        return 0
    try:
        value = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise invalid_json(str(exc)) from None
    if value is None:
        return 0
    if not isinstance(value, dict):
        raise invalid_json(
            f"json: cannot unmarshal {_json_kind(value)} into Go value of type "
            "server.JSApiConsumerResetRequest"
        )
    seq: Any = None
    for key, item in value.items():
        if key.lower() == "seq":
            seq = item
    if seq is None:
        return 0
    if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq < 1 << 64:
        number = isinstance(seq, int | float) and not isinstance(seq, bool)
        what = f"number {json.dumps(seq)}" if number else _json_kind(seq)
        raise invalid_json(
            f"json: cannot unmarshal {what} into Go struct field "
            "JSApiConsumerResetRequest.seq of type uint64"
        )
    return seq


def reset_start_seq(
    c: ConsumerConfig, requested: int, ack_floor_stream_seq: int, first_seq_at: Callable[[int], int]
) -> int:
    """Where a reset puts the consumer, as nats-server's `resetStartingSeq`: `requested` 0
    is right above the ack floor (any deliver policy); another sequence is allowed for
    `all`, and for `by_start_sequence` / `by_start_time` not below where the policy
    starts (`first_seq_at(ns)`: the first stream sequence stored at or after a time);
    anything else is 10204."""
    if requested == 0:
        return ack_floor_stream_seq + 1
    if c.deliver_policy == "by_start_sequence" and requested < c.opt_start_seq:
        raise api_error("CONSUMER_INVALID_RESET", err="below start seq")
    if c.deliver_policy == "by_start_time" and requested < first_seq_at(c.opt_start_time or 0):
        raise api_error("CONSUMER_INVALID_RESET", err="below start time")
    if c.deliver_policy not in ("all", "by_start_sequence", "by_start_time"):
        raise api_error("CONSUMER_INVALID_RESET", err="not allowed")
    return requested
