"""JetStream across a leafnode connection (ADR 0036), as nats-server's `leafnode.go` and
`client.go` carry it.

* **Domains.** Each JetStream island has its own domain, and its API is reached from the
  other side of a leaf as `$JS.<domain>.API.>`: the account's mappings of those subjects
  onto `$JS.API.>`, `$KV.>` and `$OBJ.>` (`server/accounts.py`, nats-server's
  `generateJSMappingTable`) are shown to the peer as interest, like every mapping's source,
  and applied to the messages that come in over the connection (nats-server maps a
  leaf's messages as a client's). `$JS.API.>`, `$KV.>` and `$OBJ.>` themselves never
  cross (`peers.denied`), and when the two ends' domains differ, messages on
  `$JS.<own domain>.API.>` are not sent out either (nats-server's `blockMappingOutgoing`,
  a guard against two islands of one name).
* **Deliveries.** A JetStream delivery is routed on its deliver subject (or a pull
  request's inbox) but shown to clients under the stored message's subject
  (`Router.publish`'s `shown_subject`). Over a leaf it travels on the routed subject, the
  shown one appended to its reply after `@` (nats-server's `processMsgResults`); the
  receiving side shows its clients the subject after the `@` and the reply before it, so
  acks, flow control and sourcing work across as they do locally.
"""

from __future__ import annotations

ACK_PREFIX = b"$JS.ACK."
_ACK_DOTS = 8  # `$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>`


def delivered_at(reply: bytes) -> int:
    """nats-server's `jsAckDeliverIdx`: the index of the `@` of an ack reply
    `$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>@<subject>`, the
    first after its eighth dot (names and subjects may hold `@` too); -1 when `reply` has
    none or is no ack reply."""
    if not reply.startswith(ACK_PREFIX):
        return -1
    at = 0
    for _ in range(_ACK_DOTS):
        at = reply.find(b".", at) + 1
        if at == 0:
            return -1
    return reply.find(b"@", at)


def split_delivered(reply: bytes) -> tuple[bytes, bytes] | None:
    """(the ack reply, the subject shown) of a delivery's reply that crossed a leaf; None
    when `reply` carries no subject after an `@`."""
    at = delivered_at(reply)
    if at == -1 or at == len(reply) - 1:
        return None
    return reply[:at], reply[at + 1 :]


def with_delivered(reply: bytes, shown: bytes) -> bytes:
    """The reply a delivery shown under `shown` crosses a leaf with (once: a reply that
    already carries one is sent as it is)."""
    return reply if delivered_at(reply) != -1 else reply + b"@" + shown


def domain_block(own: str, remote: str) -> tuple[bytes, ...]:
    """What nats-server's `addLeafNodeConnection` denies to outgoing messages for the
    domains: `$JS.<own>.API.>` when this side has a domain and the peer another one."""
    return (f"$JS.{own}.API.>".encode(),) if own and own != remote else ()
