"""The server's PING timer decision, as a pure function of time and counters.

Mirrors nats-server's `processPingTimer`: a PING is skipped while the client has sent
data within the interval (its traffic proves it alive), except when a round-trip time
measurement is due (first tick, then hourly), so the first PING always goes out about
two seconds after connect. A PING that would exceed `max_pings_out` outstanding ones
closes the connection as stale instead (wire reference §1.8).
"""

from __future__ import annotations

from enum import Enum

RTT_MEASUREMENT_INTERVAL_S = 3600.0


class PingAction(Enum):
    SKIP = "skip"
    PING = "ping"
    STALE = "stale"


def ping_decision(
    *,
    now: float,
    last_in: float,
    ping_interval_s: float,
    pings_out: int,
    max_pings_out: int,
    rtt_measured_at: float | None,
) -> PingAction:
    need_rtt = rtt_measured_at is None or now - rtt_measured_at > RTT_MEASUREMENT_INTERVAL_S
    if not need_rtt and now - last_in < ping_interval_s:
        return PingAction.SKIP
    if pings_out + 1 > max_pings_out:
        return PingAction.STALE
    return PingAction.PING
