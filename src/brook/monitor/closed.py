"""Why a client connection closed, in nats-server's words (its `ClosedState` strings), as
`/connz?state=closed` and the `$SYS` disconnect events show it."""

from __future__ import annotations

__all__ = ["closed_state"]

# Brook's close reasons in nats-server's words.
_REASONS = {
    "client closed": "Client Closed",
    "server shutdown": "Server Shutdown",
    "stale connection": "Stale Connection",
    "authentication timeout": "Authentication Timeout",
    "authentication failure": "Authentication Failure",
    "maximum connections exceeded": "Maximum Connections Exceeded",
    "invalid client protocol": "Bad Client Protocol Version",
    "kicked": "Kicked",
}


def closed_state(reason: str) -> str:
    """nats-server's name for Brook's close `reason` ("Client Closed" for none)."""
    if reason.startswith("protocol violation"):
        return "Protocol Violation"
    if reason == "slow consumer: write deadline exceeded":
        return "Slow Consumer (Write Deadline)"
    if reason.startswith("slow consumer"):
        return "Slow Consumer (Pending Bytes)"
    return _REASONS.get(reason, reason or "Client Closed")
