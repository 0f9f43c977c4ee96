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
AUTH_EXPIRED = "User Authentication Expired"  # a user JWT's `exp` or connect window passed
ACCOUNT_AUTH_EXPIRED = "Account Authentication Expired"  # its account JWT's `exp` passed
STALE_CONNECTION = "Stale Connection"
MAX_CONNECTIONS = "maximum connections exceeded"
MAX_ACCOUNT_CONNECTIONS = "maximum account active connections exceeded"
MAX_SUBSCRIPTIONS = "maximum subscriptions exceeded"
INVALID_PROTOCOL = "invalid client protocol"
NO_RESPONDERS_NEEDS_HEADERS = "no responders requires headers support"
INVALID_SUBJECT = "Invalid Subject"
INVALID_PUBLISH_SUBJECT = "Invalid Publish Subject"


# Refusals that keep the connection open: the operation is dropped, the text names what.


def go_quote(value: bytes) -> str:
    """Go's `%q` of a byte string, as nats-server formats the subject in its errors:
    double quotes, backslash escapes for quotes, backslashes and control characters."""
    out = ['"']
    for ch in value.decode("utf-8", "replace"):
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


_GO_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
}


def publish_violation(subject: bytes) -> str:
    return f"Permissions Violation for Publish to {go_quote(subject)}"


def subscribe_violation(subject: bytes, queue: bytes | None) -> str:
    text = f"Permissions Violation for Subscription to {go_quote(subject)}"
    return text if queue is None else f"{text} using queue {go_quote(queue)}"


def reply_violation(reply: bytes) -> str:
    return f"Permissions Violation for Publish with Reply of {go_quote(reply)}"


class ProtocolError(Exception):
    """The peer violated the protocol; the connection must be closed."""

    def __init__(self, reason: str, err_text: str | None = UNKNOWN_OPERATION) -> None:
        super().__init__(reason)
        self.reason = reason
        self.err_text = err_text
