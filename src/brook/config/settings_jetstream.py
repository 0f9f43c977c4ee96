"""JetStream's settings: the `jetstream {}` block (store, sync, restores, batches,
domain) and an account's JetStream limits."""

from __future__ import annotations

import dataclasses
import os
import tempfile
from dataclasses import dataclass

from brook import limits
from brook.config.errors import ConfigError
from brook.subjects import is_valid_subject


def default_store_dir() -> str:
    """Where JetStream keeps its data when no `store_dir` is set: nats-server's rule (a
    directory under the system's temporary directory, `$TMPDIR` or /tmp), in a directory
    named for Brook, whose on-disk format is its own (ADR 0010). The server warns, as
    nats-server does, that such data can be lost on reboot."""
    return os.path.join(tempfile.gettempdir(), "brook", "jetstream")


@dataclass(frozen=True, slots=True)
class JetStreamAccountLimits:
    """An account's JetStream limits (nats-server's `JetStreamAccountLimits`), named as
    `$JS.API.INFO` reports them; -1: no limit. Enforced by jetstream/quota.py."""

    max_memory: int = -1
    max_storage: int = -1
    max_streams: int = -1
    max_consumers: int = -1
    max_ack_pending: int = -1
    memory_max_stream_bytes: int = -1
    storage_max_stream_bytes: int = -1
    max_bytes_required: bool = False

    def to_json(self) -> dict[str, int | bool]:
        return dataclasses.asdict(self)

    def max_bytes(self, storage: str) -> int:
        """The account's limit on the bytes of streams of `storage` ("memory", "file")."""
        return self.max_memory if storage == "memory" else self.max_storage


@dataclass(slots=True)
class JetStreamSettings:
    enabled: bool = False
    store_dir: str | None = None  # None: default_store_dir(); never memory for file streams
    max_memory_store_bytes: int = -1  # -1 = no account limit
    max_file_store_bytes: int = -1
    # 0 ("always"): every PubAck waits for an fsync covering its message (group commit).
    # > 0: nats-server's interval mode: acknowledge after the write, fsync every N seconds;
    # faster, but a power loss can drop acknowledged messages (docs/adr/0004).
    sync_interval_s: float = 0.0
    # The least time between two writes of a durable consumer's state, unless an ack
    # waits for one (ack_sync): 0 writes every change as soon as the last write is done.
    consumer_flush_interval_s: float = limits.CONSUMER_FLUSH_INTERVAL_S
    # Stream restores: the largest upload (-1: no limit) and the longest wait for a chunk.
    restore_max_bytes: int = limits.RESTORE_MAX_BYTES
    restore_idle_timeout_s: float = limits.RESTORE_IDLE_TIMEOUT_S
    # Free space kept on the store's filesystem: file-stream publishes are refused (10023)
    # below it. -1: the smaller of 64 MiB and a twentieth of the filesystem.
    free_space_reserve_bytes: int = -1
    # File-stream PubAcks waiting for their fsync, across all streams, before publishing
    # connections stop being read (jetstream/backlog.py). 0: no bound.
    max_acks_awaiting_sync: int = limits.MAX_ACKS_AWAITING_SYNC
    # How often each file stream saves its index snapshot (ADR 0046). 0: only at a
    # clean stop.
    index_snapshot_interval_s: float = limits.INDEX_SNAPSHOT_INTERVAL_S
    # Sealed segments per file stream whose index columns stay unpacked (ADR 0054).
    index_hot_segments: int = limits.INDEX_HOT_SEGMENTS
    # Message slots per file-stream segment before it rolls (ADR 0061).
    segment_slots_max: int = limits.SEGMENT_SLOTS
    # Appends each file stream keeps in memory until its group commit writes them in one
    # go (ADR 0051). 0: every record written through at once.
    write_buffer_bytes: int = limits.STORE_WRITE_BUFFER_BYTES
    # Batch publishes (nats-server's `limits { batch { ... } }`; jetstream/batch.py and
    # fast_batch.py): messages per atomic batch, batches in flight per stream and per
    # server (None: nats-server's defaults, which differ for atomic and fast batches; a
    # value bounds both kinds, as there), idle time per batch.
    batch_max_msgs: int = limits.ATOMIC_BATCH_SIZE_MAX
    batch_max_inflight_per_stream: int | None = None
    batch_max_inflight_total: int | None = None
    batch_timeout_s: float = limits.ATOMIC_BATCH_TIMEOUT_NS / 1e9
    # The JetStream domain (`domain`): its API answered under `$JS.<domain>.API.>` too, and
    # named in account info, stream info and PubAcks. "": none.
    domain: str = ""

    @property
    def store_path(self) -> str:
        """The directory JetStream uses: `store_dir`, or the default when it is unset."""
        return self.store_dir or default_store_dir()

    def validate(self) -> None:
        """Ranges, and nats-server's `validateJetStreamOptions` for the domain."""
        if not 0 <= self.consumer_flush_interval_s <= 60:
            raise ConfigError("jetstream.consumer_flush_interval: must be 0 to 60 seconds")
        if self.free_space_reserve_bytes < -1:
            raise ConfigError("jetstream.free_space_reserve: must be a size (0 for none)")
        if domain := self.domain:  # nats-server's validateJetStreamOptions
            api = f"$JS.{domain}.API.>"
            if not is_valid_subject(api.encode()):
                raise ConfigError(f'invalid domain name: derived "{api}" is not a valid subject')
            if any(c in domain for c in " \t\r\n\f.*>"):
                raise ConfigError("invalid domain name: may not contain ., * or >")
        if self.max_acks_awaiting_sync < 0:
            raise ConfigError("jetstream.max_acks_awaiting_sync: must be 0 (no bound) or positive")
        for name in ("batch_max_msgs", "batch_max_inflight_per_stream", "batch_max_inflight_total"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ConfigError(
                    f"jetstream.limits.batch.{name.removeprefix('batch_')}: must be positive"
                )
        if self.batch_timeout_s <= 0:
            raise ConfigError("jetstream.limits.batch.timeout: must be a positive duration")
        if self.sync_interval_s < 0:
            raise ConfigError("jetstream.sync_interval: must be 'always' or a positive duration")
        if not 0 <= self.index_snapshot_interval_s <= limits.INDEX_SNAPSHOT_INTERVAL_MAX_S:
            raise ConfigError(
                "jetstream.index_snapshot_interval: must be 0 (off) or a duration up to 24h"
            )
        if not 1 <= self.index_hot_segments <= limits.INDEX_HOT_SEGMENTS_MAX:
            raise ConfigError(
                f"jetstream.index_hot_segments: must be 1 to {limits.INDEX_HOT_SEGMENTS_MAX}"
            )
        if not limits.SEGMENT_SLOTS_MIN <= self.segment_slots_max <= limits.SEGMENT_SLOTS_MAX:
            raise ConfigError(
                f"jetstream.segment_slots_max: must be {limits.SEGMENT_SLOTS_MIN}"
                f" to {limits.SEGMENT_SLOTS_MAX}"
            )
        if not 0 <= self.write_buffer_bytes <= limits.STORE_WRITE_BUFFER_MAX_BYTES:
            raise ConfigError("jetstream.write_buffer: must be 0 (off) to 64MB")
        if self.restore_max_bytes == 0 or self.restore_max_bytes < -1:
            raise ConfigError("jetstream.restore_max_bytes: must be positive, or -1 for no limit")
        if not 0 < self.restore_idle_timeout_s <= 3600:
            raise ConfigError("jetstream.restore_idle_timeout: must be above 0, at most 1 hour")
