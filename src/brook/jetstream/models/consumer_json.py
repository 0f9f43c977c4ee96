"""Consumer configuration and consumer info as JSON, in the reference server's key order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from brook.jetstream.models.consumer_config import ConsumerConfig
from brook.jetstream.models.info import format_ts_ns

# --- serialisation ------------------------------------------------------------------------


def format_time_with_offset(ns: int, offset_s: int) -> str:
    """RFC 3339 with nanoseconds in the given UTC offset, as Go marshals a `time.Time`."""
    if offset_s == 0:
        return format_ts_ns(ns)
    text = format_ts_ns(ns + offset_s * 1_000_000_000)[:-1]
    sign = "+" if offset_s > 0 else "-"
    hours, minutes = divmod(abs(offset_s) // 60, 60)
    return f"{text}{sign}{hours:02d}:{minutes:02d}"


def consumer_config_to_json(
    c: ConsumerConfig, *, server_version: str | None = None, api_level: int | None = None
) -> dict[str, Any]:
    """The reference server's key order (Go struct order, `omitempty` where it has it)."""
    out: dict[str, Any] = {}
    if c.durable_name:
        out["durable_name"] = c.durable_name
    if c.name:
        out["name"] = c.name
    if c.description:
        out["description"] = c.description
    out["deliver_policy"] = c.deliver_policy
    if c.opt_start_seq:
        out["opt_start_seq"] = c.opt_start_seq
    if c.opt_start_time is not None:
        out["opt_start_time"] = format_time_with_offset(c.opt_start_time, c.opt_start_time_offset)
    out["ack_policy"] = c.ack_policy
    if c.ack_wait:
        out["ack_wait"] = c.ack_wait
    if c.max_deliver:
        out["max_deliver"] = c.max_deliver
    if c.backoff:
        out["backoff"] = list(c.backoff)
    if c.filter_subject:
        out["filter_subject"] = c.filter_subject
    if c.filter_subjects:
        out["filter_subjects"] = list(c.filter_subjects)
    out["replay_policy"] = c.replay_policy
    optional: tuple[tuple[str, Any], ...] = (
        ("rate_limit_bps", c.rate_limit_bps),
        ("sample_freq", c.sample_freq),
        ("max_waiting", c.max_waiting),
        ("max_ack_pending", c.max_ack_pending),
        ("flow_control", c.flow_control),
        ("headers_only", c.headers_only),
        ("max_batch", c.max_batch),
        ("max_expires", c.max_expires),
        ("max_bytes", c.max_bytes),
        ("deliver_subject", c.deliver_subject),
        ("deliver_group", c.deliver_group),
        ("idle_heartbeat", c.idle_heartbeat),
        ("inactive_threshold", c.inactive_threshold),
    )
    out.update((k, v) for k, v in optional if v)
    out["num_replicas"] = c.num_replicas
    if c.mem_storage:
        out["mem_storage"] = True
    if c.direct:
        out["direct"] = True
    if c.sourcing:
        out["sourcing"] = True
    metadata = dict(c.metadata)
    # nats-server's `setStaticConsumerMetadata`: pause and priority groups need API level 1,
    # the flow_control ack policy (ADR-60) level 4.
    priority = c.priority_policy != "none" or c.priority_timeout or c.priority_groups
    level = 1 if c.pause_until is not None or priority else 0
    metadata["_nats.req.level"] = "4" if c.ack_policy == "flow_control" else str(level)
    if server_version is not None:
        metadata["_nats.ver"] = server_version
        metadata["_nats.level"] = str(api_level or 0)
    out["metadata"] = dict(sorted(metadata.items()))
    if c.pause_until is not None:
        out["pause_until"] = format_ts_ns(c.pause_until)
    if c.priority_groups:
        out["priority_groups"] = list(c.priority_groups)
    if c.priority_policy != "none":
        out["priority_policy"] = c.priority_policy
    if c.priority_timeout:
        out["priority_timeout"] = c.priority_timeout
    return out


@dataclass(slots=True)
class SequenceInfo:
    consumer_seq: int = 0
    stream_seq: int = 0
    last_active_ns: int = 0  # 0: never (the key is omitted)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"consumer_seq": self.consumer_seq, "stream_seq": self.stream_seq}
        if self.last_active_ns:
            out["last_active"] = format_ts_ns(self.last_active_ns)
        return out


def consumer_info_to_json(
    *,
    stream_name: str,
    name: str,
    created_ns: int,
    config: ConsumerConfig,
    delivered: SequenceInfo,
    ack_floor: SequenceInfo,
    num_ack_pending: int,
    num_redelivered: int,
    num_waiting: int,
    num_pending: int,
    ts_ns: int,
    push_bound: bool = False,
    pause_remaining_ns: int = 0,
    priority_groups: list[dict[str, str]] | None = None,
    server_version: str | None = None,
    api_level: int | None = None,
) -> dict[str, Any]:
    """A consumer info object (wire reference §5.5), without the response `type`.

    `paused`/`pause_remaining` appear only while paused (`pause_remaining_ns > 0`);
    `priority_groups` (each group's pin) only for a consumer with priority groups.
    """
    out: dict[str, Any] = {
        "stream_name": stream_name,
        "name": name,
        "created": format_ts_ns(created_ns),
        "config": consumer_config_to_json(
            config, server_version=server_version, api_level=api_level
        ),
        "delivered": delivered.to_json(),
        "ack_floor": ack_floor.to_json(),
        "num_ack_pending": num_ack_pending,
        "num_redelivered": num_redelivered,
        "num_waiting": num_waiting,
        "num_pending": num_pending,
    }
    if push_bound:
        out["push_bound"] = True
    if pause_remaining_ns > 0:
        out["paused"] = True
        out["pause_remaining"] = pause_remaining_ns
    out["ts"] = format_ts_ns(ts_ns)
    if priority_groups:
        out["priority_groups"] = priority_groups
    return out
