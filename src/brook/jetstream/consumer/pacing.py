"""Pacing of a consumer's deliveries: pause, replay_policy `original` and rate_limit_bps.

Each holds a delivery back until some time; the state machine (state.py) arms its timer
for `held_until` and delivers again then.
"""

from __future__ import annotations

from brook.jetstream.consumer.config import ConsumerSettings
from brook.jetstream.store.base import StoredMessage


class Pacer:
    def __init__(self, settings: ConsumerSettings) -> None:
        self.cfg = settings
        self.held_until: int | None = None  # when the delivery held back last may go
        self.replay_prev: tuple[int, int] | None = None  # (stored ts, delivered at)
        self._tokens = float(settings.rate_burst_bytes)
        self._tokens_at: int | None = None

    def paused(self, now_ns: int) -> bool:
        until = self.cfg.paused_until_ns
        return until is not None and now_ns < until

    def hold(self, msg: StoredMessage, first: bool, size: int, now_ns: int) -> int | None:
        """The time `msg` (its `first` delivery or not) may go when pacing holds it back,
        else None. Replay `original` spaces first deliveries as their stored timestamps
        were spaced; `rate_limit_bps` is a token bucket of `rate_burst_bytes` refilled at
        bps/8 bytes per second."""
        at = now_ns
        if self.cfg.replay_original and first and self.replay_prev is not None:
            prev_ts, prev_at = self.replay_prev
            at = max(at, prev_at + max(msg.ts_ns - prev_ts, 0))
        bps = self.cfg.rate_limit_bps
        if bps > 0:
            burst = self.cfg.rate_burst_bytes
            if self._tokens_at is not None:
                gained = (now_ns - self._tokens_at) * bps / 8e9
                self._tokens = min(self._tokens + gained, float(burst))
            self._tokens_at = now_ns
            need = min(size, burst)
            if self._tokens < need:
                at = max(at, now_ns + int((need - self._tokens) * 8e9 / bps) + 1)
        return at if at > now_ns else None

    def spend(self, size: int) -> None:
        """A delivery of `size` bytes went out under `rate_limit_bps`."""
        self._tokens -= size
