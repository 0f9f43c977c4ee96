"""Priority groups of pull consumers (ADR-42; ADR 0022), as nats-server's consumer.go has them.

A consumer with a `priority_policy` names its `priority_groups`; every pull request in
the JSON form must name one (`group`). The policy decides which waiting request a
message goes to (nats-server's `nextWaiting`):

* `overflow`: a request with `min_pending` / `min_ack_pending` is served only while the
  consumer has at least that many messages pending (counting the one to send) or
  unacknowledged; until then it waits at the back of the queue;
* `pinned_client`: one request at a time is pinned: the first served while no pin is
  held gets a new pin id (a NUID), sent on every delivery as `Nats-Pin-Id`; requests
  without an id wait, requests with another id end with `423`. The pin is lost when no
  request with its id comes for `priority_timeout` (`pinned_ttl_ns`), or by
  `$JS.API.CONSUMER.UNPIN`; each change is a pinned/unpinned advisory;
* `prioritized`: the queue is kept sorted by `priority` (0 first), a partly served
  request going back behind the others of its priority.

The pin lives in memory only: as on nats-server, a restart forgets it and the next
request without an id is pinned anew. nats-server keeps one pin per consumer, for its
first group (its info shows only that group); so does Brook.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from brook.jetstream.consumer.acks import PullGroup
from brook.jetstream.consumer.actions import ADVISORY_PREFIX, Action, Advisory, Status
from brook.jetstream.consumer.config import ConsumerSettings, PriorityPolicy
from brook.jetstream.consumer.pull import WaitingRequest
from brook.jetstream.models.info import ZERO_TIME, format_ts_ns
from brook.jetstream.store.base import StoredMessage

PIN_HEADER = b"Nats-Pin-Id"
# The place in the queue of a request without priority-group fields (Go's math.MaxInt32).
NO_PRIORITY = 2**31 - 1
PINNED_ADVISORY_TYPE = "io.nats.jetstream.advisory.v1.consumer_group_pinned"
UNPINNED_ADVISORY_TYPE = "io.nats.jetstream.advisory.v1.consumer_group_unpinned"


def request_error(cfg: ConsumerSettings, reply: str, group: PullGroup) -> Status | None:
    """nats-server's checks of a JSON pull request's priority-group fields, in its order
    (after the 409 request limits): fields of another policy, the priority's range, then,
    for a consumer with a policy, the group."""
    policy = cfg.priority_policy
    if (group.min_pending or group.min_ack_pending) and policy is not PriorityPolicy.OVERFLOW:
        return Status(reply, 400, "Bad Request - Not a Overflow Priority consumer")
    if group.id and policy is not PriorityPolicy.PINNED_CLIENT:
        return Status(reply, 400, "Bad Request - Not a Pinned Client Priority consumer")
    if not 0 <= group.priority <= 9:
        return Status(reply, 400, "Bad Request - Priority must be between 0 and 9")
    if policy is PriorityPolicy.NONE:
        return None
    if not group.group:
        return Status(reply, 400, "Bad Request - Priority Group missing")
    if group.group not in cfg.priority_groups:
        return Status(reply, 400, "Bad Request - Invalid Priority Group")
    return None


def _priority(w: WaitingRequest) -> int:
    return w.group.priority if w.group is not None else NO_PRIORITY


def queue_prioritized(waiting: deque[WaitingRequest], w: WaitingRequest) -> None:
    """Put `w` behind every request of its priority or a lower one (nats-server's
    `insertAtPosition`)."""
    rank = _priority(w)
    for i, other in enumerate(waiting):
        if _priority(other) > rank:
            waiting.insert(i, w)
            return
    waiting.append(w)


class PriorityGroups:
    """A consumer's priority policy at work: the pin, and the choice of request."""

    def __init__(self, settings: ConsumerSettings, new_id: Callable[[], str]) -> None:
        self.cfg = settings
        self._new_id = new_id
        self.pin_id = ""
        self.pinned_group = ""  # the group the pin was given in (its advisories name it)
        self.pinned_ns = 0  # when the pin was given (0: none)
        self.pin_expires_ns: int | None = None  # the pin's TTL runs out (nats-server's timer)
        # The request the last `pick` pinned, if any: a 409 for its max_bytes releases it.
        self.just_pinned: WaitingRequest | None = None

    # ------------------------------------------------------------------ requests

    def admit(self, reply: str, group: PullGroup, now_ns: int) -> Status | None:
        """A new request naming a group of this consumer, once its fields are checked: the
        pinned client's id renews the pin's TTL; another id is refused with 423."""
        if self.pin_id:
            if group.id == self.pin_id:
                self.pin_expires_ns = now_ns + self.cfg.pinned_ttl_ns
            elif group.id:
                return Status(reply, 423, "Nats-Pin-Id mismatch")
        return None

    def queue(self, waiting: deque[WaitingRequest], w: WaitingRequest) -> None:
        """A new request joins the queue; a request partly served rejoins it."""
        if self.cfg.priority_policy is PriorityPolicy.PRIORITIZED:
            queue_prioritized(waiting, w)
        else:
            waiting.append(w)

    def pick(
        self,
        waiting: deque[WaitingRequest],
        now_ns: int,
        out: list[Action],
        has_interest: Callable[[str], bool],
        num_pending: int,
        num_ack_pending: int,
    ) -> WaitingRequest | None:
        """The request the next message goes to, moved to the head of `waiting`, or None
        (nats-server's `nextWaiting`): expired requests end with 408, requests of a stale
        pin with 423 and requests nobody listens to are dropped; those the policy holds
        back go to the back of the queue. `num_pending` counts the message to send."""
        self.just_pinned = None
        policy = self.cfg.priority_policy
        # As nats-server: decided once per pick, even if a request pinned is then dropped.
        need_pin = policy is PriorityPolicy.PINNED_CLIENT and not self.pin_id
        cycled = 0
        while waiting:
            w = waiting[0]
            if w.expires_at_ns is not None and now_ns >= w.expires_at_ns:
                waiting.popleft()
                out.append(w.pending_status(408, "Request Timeout"))
                continue
            if need_pin:
                if w.pin_id:  # an old pin's id
                    waiting.popleft()
                    out.append(w.pending_status(423, "Nats-Wrong-Pin-Id"))
                    continue
                self._pin(w, now_ns, out)
            elif self.pin_id and w.pin_id != self.pin_id:
                if w.pin_id:
                    waiting.popleft()
                    out.append(w.pending_status(423, "Nats-Wrong-Pin-Id"))
                    continue
                waiting.rotate(-1)  # no id: waits for the pin to go
                cycled += 1
                if cycled >= len(waiting):
                    return None
                continue
            if policy is PriorityPolicy.OVERFLOW and not self._overflows(
                w.group, num_pending, num_ack_pending
            ):
                waiting.rotate(-1)
                cycled += 1
                if cycled >= len(waiting):
                    return None
                continue
            if not has_interest(w.reply):
                waiting.popleft()
                continue
            return w
        return None

    @staticmethod
    def _overflows(group: PullGroup | None, num_pending: int, num_ack_pending: int) -> bool:
        """May an overflow request be served now? Always without limits; else when either
        limit is reached."""
        if group is None or (group.min_pending <= 0 and group.min_ack_pending <= 0):
            return True
        return (0 < group.min_pending <= num_pending) or (
            0 < group.min_ack_pending <= num_ack_pending
        )

    def requeue(self, waiting: deque[WaitingRequest], w: WaitingRequest) -> None:
        """After a delivery to `w` (the head): it leaves the queue when done, else goes
        back (round robin; behind its priority for `prioritized`)."""
        waiting.popleft()
        if w.batch_left > 0:
            self.queue(waiting, w)

    def stamp(self, msg: StoredMessage) -> StoredMessage:
        """A pinned client's delivery: `Nats-Pin-Id` appended to its header block."""
        line = b"%b: %b\r\n\r\n" % (PIN_HEADER, self.pin_id.encode())
        header = msg.header[:-2] + line if msg.header else b"NATS/1.0\r\n" + line
        return StoredMessage(msg.seq, msg.subject, header, msg.data, msg.ts_ns)

    # ------------------------------------------------------------------ the pin

    def _pin(self, w: WaitingRequest, now_ns: int, out: list[Action]) -> None:
        """nats-server's `assignNewPinId`: only a request that names a group is pinned."""
        if w.group is None or not w.group.group:
            return
        self.pin_id = w.pin_id = self._new_id()
        self.pinned_group = w.group.group
        self.pinned_ns = now_ns
        self.pin_expires_ns = now_ns + self.cfg.pinned_ttl_ns
        self.just_pinned = w
        out.append(self._advisory("PINNED", w.group.group, pinned_id=self.pin_id))

    def release(self) -> None:
        """The pin is dropped without an advisory (a request just pinned ended at once)."""
        self.pin_id = ""
        self.pinned_ns = 0
        self.pin_expires_ns = None

    def unpin(self, group: str, reason: str) -> list[Action]:
        """The pin is dropped (`reason`: "admin" by CONSUMER.UNPIN, "timeout"), with the
        unpinned advisory (sent by UNPIN even when nothing was pinned, as nats-server)."""
        self.release()
        return [self._advisory("UNPINNED", group, reason=reason)]

    def due(self, now_ns: int) -> list[Action]:
        """The pin's TTL ran out."""
        at = self.pin_expires_ns
        if at is None or now_ns < at or not self.pin_id:
            return []
        return self.unpin(self.pinned_group, "timeout")

    def _advisory(self, kind: str, group: str, **fields: str) -> Advisory:
        cfg = self.cfg
        payload = {
            "type": PINNED_ADVISORY_TYPE if kind == "PINNED" else UNPINNED_ADVISORY_TYPE,
            "account": None,  # the consumer's account: filled in by `Advisories.event`
            "stream": cfg.stream,
            "consumer": cfg.name,
            "group": group,
            **fields,
        }
        return Advisory(kind, f"{ADVISORY_PREFIX}.{kind}.{cfg.stream}.{cfg.name}", payload)

    def info(self) -> list[dict[str, str]]:
        """CONSUMER.INFO's `priority_groups`: the first group with its pin (nats-server)."""
        if not self.cfg.priority_groups:
            return []
        out = {"group": self.cfg.priority_groups[0]}
        if self.pin_id:
            out["pinned_client_id"] = self.pin_id
        out["pinned_ts"] = format_ts_ns(self.pinned_ns) if self.pinned_ns else ZERO_TIME
        return [out]
