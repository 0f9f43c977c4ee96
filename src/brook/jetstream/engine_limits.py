"""The engine's side of the JetStream limits (ADR 0025): the account's limits taken
(each storage type's `Quota` for the streams' publishes), a stream create's, update's or
restore's checks against the account's and the server's (`quota.py`), and the usage,
reservations and store state monitoring and `$JS.API.INFO` report."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from brook.config.settings import JetStreamAccountLimits
from brook.jetstream.errors import api_error
from brook.jetstream.quota import Ledger, Quota, ServerLimits, check_reservation
from brook.jetstream.store.file import FileStore

if TYPE_CHECKING:
    from brook.jetstream.damage import DamageReports
    from brook.jetstream.engine import StreamEntry
    from brook.jetstream.models.stream_config import StreamConfig
    from brook.jetstream.space import StoreSpace
    from brook.jetstream.stream import Stream


class EngineLimits:
    """`JetStream`'s limits and accounting part (a mixin, ADR 0031)."""

    if TYPE_CHECKING:  # what it uses of `JetStream`, which sets all of it
        _entries: dict[str, StreamEntry]
        _streams: dict[str, Stream]
        _quotas: dict[str, Quota | None]
        _damage: DamageReports
        account_limits: JetStreamAccountLimits
        limit_tiers: dict[str, JetStreamAccountLimits] | None
        server_limits: ServerLimits
        space: StoreSpace | None

    def set_account_limits(
        self,
        account_limits: JetStreamAccountLimits,
        tiers: dict[str, JetStreamAccountLimits] | None = None,
    ) -> None:
        """Take the account's limits (at start, or changed later): every stream admits
        its messages by the new ones; streams and consumers already there stay. With
        `tiers` (an account JWT's `tiered_limits`), `account_limits` are its R1 tier's,
        the only one a single server's streams use."""
        self.account_limits = account_limits
        self.limit_tiers = tiers
        for storage in ("memory", "file"):
            server = self.server_limits.ledgers[storage]
            maximum = account_limits.max_bytes(storage)
            account = None
            if maximum >= 0:
                account = Ledger(maximum, functools.partial(self.used_bytes, storage))
            has_limit = server is not None or account is not None
            self._quotas[storage] = Quota(server, account) if has_limit else None
        for stream in self._streams.values():
            stream.quota = self._quotas[stream.config.storage]

    def check_tier(self, replicas: int) -> None:
        """nats-server's `selectLimits` of a stream create: an account with tiered
        limits has none for `replicas` (0 is 1) unless it has that tier `R<replicas>`
        (10120), which comes before any other check of the stream's configuration."""
        tiers = self.limit_tiers
        if tiers is not None and f"R{max(replicas, 1)}" not in tiers:
            raise api_error("NO_LIMITS")

    def _check_stream_bytes(self, config: StreamConfig) -> None:
        """The account's rules for a stream's `max_bytes` (nats-server's `maxBytesLimits`,
        part of its config check): required (10113), at most the account's per-stream
        maximum of its storage (10122)."""
        limits = self.account_limits
        if limits.max_bytes_required and config.max_bytes <= 0:
            raise api_error("STREAM_MAX_BYTES_REQUIRED")
        if config.storage == "memory":
            most = limits.memory_max_stream_bytes
        else:
            most = limits.storage_max_stream_bytes
        if 0 < most < config.max_bytes:
            raise api_error("STREAM_MAX_STREAM_BYTES_EXCEEDED")

    def _check_limits(self, config: StreamConfig, add: int, *, count: bool, held: int = 0) -> None:
        """nats-server's limit checks of a stream create, update or restore
        (`jsNonClusteredStreamLimitsCheck`, `checkAllLimits`): with `count`, the account's
        number of other streams (10027); the stream's `max_consumers` against the
        account's (10026); then `add` bytes more reserved in the account (where `held`
        bytes of this stream count already) and in the server (quota.py)."""
        limits = self.account_limits
        others = len(self._entries) - (config.name in self._entries)
        if count and 0 < limits.max_streams <= others:
            raise api_error("MAXIMUM_STREAMS_LIMIT")
        if 0 < limits.max_consumers < config.max_consumers:
            raise api_error("MAXIMUM_CONSUMERS_LIMIT")
        storage = config.storage
        account_max = limits.max_bytes(storage)
        server_max = self.server_limits.maximum(storage)
        account_reserved = server_reserved = 0
        if account_max >= 0:
            account_reserved = self.reserved_bytes(storage, excluding=config.name) + held
        if server_max >= 0:
            server_reserved = self.server_limits.reserved_bytes(storage)
        check_reservation(
            storage, add, account=(account_max, account_reserved),
            server=(server_max, server_reserved),
        )  # fmt: skip

    def store_statistics(self) -> dict[str, Any]:
        """Monitoring (`/varz` jetstream.brook_store): the store filesystem's free space
        and reserve, what opening each stream's file store found damaged, and the file
        stores' index snapshots and packed segments (ADRs 0046, 0054)."""
        out: dict[str, Any] = self.space.statistics() if self.space is not None else {}
        out["damaged_streams"] = self._damage.statistics()
        stores = (e.stream.store for e in self._entries.values())
        files = [s for s in stores if isinstance(s, FileStore)]
        stats = [s.statistics() for s in files]
        out["index_snapshots"] = sum(s.index_snapshots for s in files)
        out["index_packed_segments"] = sum(st["index_packed_segments"] for st in stats)
        out["index_unpacks"] = sum(st["index_unpacks"] for st in stats)
        out["write_buffered_bytes"] = sum(st["write_buffered_bytes"] for st in stats)
        return out

    def usage(self) -> tuple[int, int]:
        """(memory bytes, file bytes) stored across all streams."""
        return self.used_bytes("memory"), self.used_bytes("file")

    def account_usage(self) -> dict[str, Any]:
        """The account's usage, reservations and limits, named as nats-server's
        `JetStreamAccountStats` names them (`$JS.API.INFO`, `/varz`)."""
        memory, storage = self.usage()
        usage: dict[str, Any] = {
            "memory": memory,
            "storage": storage,
            "reserved_memory": self.reserved_bytes("memory"),
            "reserved_storage": self.reserved_bytes("file"),
            "streams": len(self._streams),
            "consumers": sum(s.consumer_count for s in self._streams.values()),
        }
        if self.limit_tiers is None:
            return {**usage, "limits": self.account_limits.to_json()}
        # Tiered (nats-server's `JetStreamAccountStats` then): no account-wide limits,
        # each tier's usage (all of it in R1 here) and limits under `tiers`.
        idle = dict.fromkeys(usage, 0)
        tiers = {
            name: {**(usage if name == "R1" else idle), "limits": limits.to_json()}
            for name, limits in sorted(self.limit_tiers.items())  # Go's map order
        }
        return {**usage, "limits": _NO_LIMITS.to_json(), "tiers": tiers}

    def used_bytes(self, storage: str) -> int:
        """The bytes the streams of `storage` hold, as their stores count them."""
        return sum(
            s.store.state().bytes for s in self._streams.values() if s.config.storage == storage
        )

    def reserved_bytes(self, storage: str, *, excluding: str = "") -> int:
        """The `max_bytes` the streams of `storage` reserve (but the one `excluding`)."""
        return sum(
            s.config.max_bytes
            for s in self._streams.values()
            if s.config.storage == storage and s.config.max_bytes > 0 and s.name != excluding
        )

    def room(self, storage: str) -> int:
        """The bytes a stream of `storage` may still take under the limits (-1: none)."""
        quota = self._quotas[storage]
        return -1 if quota is None else quota.room()


# `$JS.API.INFO`'s account-wide limits of a tiered account, as nats-server shows them.
_NO_LIMITS = JetStreamAccountLimits(0, 0, 0, 0, 0, 0, 0, False)
