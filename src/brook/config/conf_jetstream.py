"""The `jetstream` block (enabled, store directory and limits, the sync interval, Brook's
own bounds, the atomic batch limits of its `limits`) and an account's `jetstream` limits,
in nats-server's spellings."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from brook.config.conf_values import (
    bad,
    block_entries,
    read_block,
    read_bool,
    read_duration,
    read_int,
    read_size,
    read_str,
)
from brook.config.settings import ConfigError, JetStreamAccountLimits, Settings

# nats-server's spellings of the jetstream block's keys
_JS_ENABLED = ("enabled", "enable")
_JS_LIMITS = ("limits",)


def sync_interval(where: str, v: object) -> float:
    """nats-server's `sync_interval`: `always` (fsync before every ack) or a duration."""
    if isinstance(v, str) and v.strip().lower() == "always":
        return 0.0
    seconds = read_duration(where, v)
    if seconds <= 0:
        raise bad(where, "'always' or a positive duration", v)
    return seconds


# The jetstream block's other keys, nats-server's spellings (and Brook's own, see
# `JetStreamSettings`), by the field each sets and how its value is read.
_JS_KEYS: dict[str, tuple[tuple[str, ...], Callable[[str, object], object]]] = {
    "store_dir": (("store_dir", "store", "storedir"), read_str),
    "max_memory_store_bytes": (("max_memory_store", "max_mem_store", "max_mem"), read_size),
    "max_file_store_bytes": (("max_file_store", "max_file"), read_size),
    "sync_interval_s": (("sync_interval", "sync"), sync_interval),
    "consumer_flush_interval_s": (("consumer_flush_interval",), read_duration),  # Brook's
    "restore_max_bytes": (("restore_max_bytes",), read_size),  # Brook's own
    "restore_idle_timeout_s": (("restore_idle_timeout",), read_duration),  # Brook's own
    "free_space_reserve_bytes": (("free_space_reserve",), read_size),  # Brook's own
    "max_acks_awaiting_sync": (("max_acks_awaiting_sync",), read_int),  # Brook's own
    "index_snapshot_interval_s": (("index_snapshot_interval",), read_duration),  # Brook's
    "index_hot_segments": (("index_hot_segments",), read_int),  # Brook's own
    "segment_slots_max": (("segment_slots_max",), read_int),  # Brook's own
    "write_buffer_bytes": (("write_buffer",), read_size),  # Brook's own
    "domain": (("domain",), read_str),
}
_JS_FIELDS = {key: (name, read) for name, (keys, read) in _JS_KEYS.items() for key in keys}


def apply_jetstream(s: Settings, where: str, v: object) -> None:
    """`true`, `"enabled"` or a block; a block enables JetStream unless `enabled: false`."""
    js = s.jetstream
    if isinstance(v, bool):
        js.enabled = v
    elif isinstance(v, str) and v.lower() in ("enabled", "enable", "disabled", "disable"):
        js.enabled = v.lower().startswith("enable")
    elif isinstance(v, dict):
        enabled = True
        for key, at, value in block_entries(v, where, (*_JS_ENABLED, *_JS_LIMITS, *_JS_FIELDS)):
            if key in _JS_ENABLED:
                enabled = read_bool(at, value)
            elif key in _JS_LIMITS:
                _jetstream_limits(s, at, value)
            else:
                name, read = _JS_FIELDS[key]
                setattr(js, name, read(at, value))
        js.enabled = enabled
    else:
        raise bad(where, "a boolean, 'enabled', 'disabled' or a block { ... }", v)


def _jetstream_limits(s: Settings, where: str, v: object) -> None:
    """nats-server's `jetstream { limits { batch { ... } } }`: the atomic batch limits
    (the only JetStream limits Brook takes from that block yet)."""
    if not isinstance(v, dict):
        raise bad(where, "a block { ... }", v)
    for _, at, batch in block_entries(v, where, ("batch",)):
        if not isinstance(batch, dict):
            raise bad(at, "a block { ... }", batch)
        js = s.jetstream
        keys = ("max_inflight_per_stream", "max_inflight_total", "max_msgs", "timeout")
        for key, at_key, value in block_entries(batch, at, keys):
            if key == "timeout":
                js.batch_timeout_s = read_duration(at_key, value)
            else:
                setattr(js, f"batch_{key}", read_int(at_key, value))


# An account's `jetstream { ... }` keys, nats-server's spellings (opts.go
# `parseJetStreamForAccount`), by the `JetStreamAccountLimits` field each sets.
_ACCOUNT_JS_KEYS = {
    "max_memory": ("max_memory", "max_mem", "mem", "memory"),
    "max_storage": ("max_store", "max_file", "max_disk", "store", "disk"),
    "max_streams": ("max_streams", "streams"),
    "max_consumers": ("max_consumers", "consumers"),
    "max_bytes_required": ("max_bytes_required", "max_stream_bytes", "max_bytes"),
    "memory_max_stream_bytes": ("mem_max_stream_bytes", "memory_max_stream_bytes"),
    "storage_max_stream_bytes": ("disk_max_stream_bytes", "store_max_stream_bytes"),
    "max_ack_pending": ("max_ack_pending",),
}
_ACCOUNT_JS_FIELDS = {key: name for name, keys in _ACCOUNT_JS_KEYS.items() for key in keys}


def read_account_jetstream(where: str, v: object) -> tuple[bool, JetStreamAccountLimits | None]:
    """An account's `jetstream`: `enabled`/`disabled`, a boolean, or a block of limits
    (which enables it; what it leaves out is unlimited), with nats-server's errors."""
    if isinstance(v, bool):
        return v, None
    if isinstance(v, str):
        if v.lower() in ("enabled", "enable", "disabled", "disable"):
            return v.lower().startswith("enable"), None
        raise ConfigError(f"{where}: Expected 'enabled' or 'disabled' for string value, got '{v}'")
    limits = JetStreamAccountLimits()
    for key, at, value in block_entries(read_block(where, v), where, _ACCOUNT_JS_FIELDS):
        field_name = _ACCOUNT_JS_FIELDS[key]
        if field_name == "max_bytes_required":
            if not isinstance(value, bool):
                raise ConfigError(f'{at}: Expected a parseable bool for "{key}", got {value}')
        elif not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(f'{at}: Expected a parseable size for "{key}", got {value}')
        change: dict[str, Any] = {field_name: value if isinstance(value, bool) else int(value)}
        limits = dataclasses.replace(limits, **change)
    return True, limits
