"""Protocol errors raised by the parser: what the peer did wrong, and what to tell it.

A `ProtocolError` is the peer's fault and ends the connection; `err_text` is the exact
text nats-server puts in `-ERR '...'`, or None where nats-server closes silently (bad
argument counts and sizes). Local misuse of the API raises ordinary exceptions instead.
"""

from __future__ import annotations

UNKNOWN_OPERATION = "Unknown Protocol Operation"
MAX_PAYLOAD = "Maximum Payload Violation"
MAX_CONTROL_LINE = "maximum control line exceeded"
AUTH_VIOLATION = "Authorization Violation"
AUTH_TIMEOUT = "Authentication Timeout"
STALE_CONNECTION = "Stale Connection"
MAX_CONNECTIONS = "maximum connections exceeded"
MAX_SUBSCRIPTIONS = "maximum subscriptions exceeded"
INVALID_PROTOCOL = "invalid client protocol"
NO_RESPONDERS_NEEDS_HEADERS = "no responders requires headers support"
INVALID_SUBJECT = "Invalid Subject"
INVALID_PUBLISH_SUBJECT = "Invalid Publish Subject"


class ProtocolError(Exception):
    """The peer violated the protocol; the connection must be closed."""

    def __init__(self, reason: str, err_text: str | None = UNKNOWN_OPERATION) -> None:
        super().__init__(reason)
        self.reason = reason
        self.err_text = err_text
