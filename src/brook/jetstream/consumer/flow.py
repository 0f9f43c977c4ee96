"""Push flow control (wire reference §6.6) and idle heartbeats of a consumer.

Flow control counts the bytes delivered against a window: once half of it is used the
client is asked (a `100 FlowControl Request` status with a reply subject) to confirm, and
deliveries stop past the whole window until it answers; each answer doubles the window up
to its maximum. Under the `flow_control` ack policy (ADR-60) the answers are the acks: a
request also goes out when `max_ack_pending` is reached and after an idle heartbeat with
messages pending, and its answer's `Nats-Last-Stream`/`Nats-Last-Consumer` acknowledge
everything up to them (state.py). Idle heartbeats go to a push consumer's deliver subject
and to pull requests that asked for them, when nothing was delivered for their interval.
"""

from __future__ import annotations

from collections.abc import Iterable

from brook.jetstream.consumer.actions import Action, Status, heartbeat_headers
from brook.jetstream.consumer.config import AckPolicy, ConsumerSettings
from brook.jetstream.consumer.pull import WaitingRequest


class PushFlow:
    def __init__(self, settings: ConsumerSettings) -> None:
        self.cfg = settings
        # Bytes delivered since the last answered request, the outstanding request (its
        # reply subject and the bytes it covers), the window.
        self._bytes = 0
        self.reply: str | None = None
        self._covers = 0
        self.window = settings.fc_window_start_bytes
        self._serial = 0
        # When a push consumer's next idle heartbeat is due: None without interest or
        # heartbeats; every push delivery moves it on.
        self.hb_at: int | None = None

    def blocked(self) -> bool:
        return self.cfg.flow_control and self._bytes > self.window

    def account(self, size: int, out: list[Action], pending: int = 0) -> None:
        """Count a push delivery against the flow-control window; ask the client for a
        response once half of it is used, or (`flow_control` acks) once `pending`
        reached `max_ack_pending` (nats-server's `needFlowControl`)."""
        self._bytes += size
        if self.reply is None:
            if self._bytes > self.window // 2 or (pending > 0 and self._acks_due(pending)):
                self.request(out)
        elif self._bytes - self._covers >= self.window:
            self._covers = self._bytes

    def headroom(self) -> int:
        """How many bytes `account` would only add up now: deliveries of at most this many
        bytes in all ask for no request, confirm nothing and leave it unblocked, so a run
        of them may be counted by `spend`. 0 where each delivery must be accounted
        (`flow_control` acks with `max_ack_pending`, whose requests count messages)."""
        cfg = self.cfg
        if cfg.ack_policy is AckPolicy.FLOW_CONTROL and cfg.max_ack_pending > 0:
            return 0
        if self.reply is None:
            return max(self.window // 2 - self._bytes, 0)
        return max(min(self.window, self.window + self._covers - 1) - self._bytes, 0)

    def spend(self, size: int) -> None:
        """Count `size` bytes of deliveries that fit in the `headroom` taken before them."""
        self._bytes += size

    def _acks_due(self, pending: int) -> bool:
        cfg = self.cfg
        return (
            cfg.ack_policy is AckPolicy.FLOW_CONTROL
            and cfg.max_ack_pending > 0
            and pending >= cfg.max_ack_pending
        )

    def request(self, out: list[Action]) -> None:
        """Send a flow-control request covering what was delivered so far
        (nats-server's `sendFlowControl`)."""
        self._serial += 1
        self.reply = f"$JS.FC.{self.cfg.stream}.{self.cfg.name}.{self._serial}"
        self._covers = self._bytes
        assert self.cfg.deliver_subject is not None
        out.append(
            Status(self.cfg.deliver_subject, 100, "FlowControl Request", respond_to=self.reply)
        )

    def answered(self, subject: str) -> bool:
        """The client answered a flow-control request on `subject`: if it is the
        outstanding one, the bytes it covered are confirmed and the window doubles (up to
        its maximum). Answers to older requests are ignored (False)."""
        if subject != self.reply:
            return False
        self._bytes = max(self._bytes - self._covers, 0)
        self.reply = None
        self._covers = 0
        self.window = min(self.window * 2, self.cfg.fc_window_max_bytes)
        return True

    def interest(self, interest: bool, now_ns: int) -> None:
        """The deliver subject gained or lost its subscriber: heartbeats start or stop,
        and an outstanding request (sent to a subscriber that is gone) is dropped."""
        if not interest:
            self._bytes = self._covers = 0
            self.reply = None
        hb = self.cfg.idle_heartbeat_ns
        self.hb_at = now_ns + hb if interest and hb > 0 else None

    def heartbeats(
        self,
        now_ns: int,
        delivered: tuple[int, int],
        waiting: Iterable[WaitingRequest],
        out: list[Action],
        pending: int = 0,
    ) -> None:
        """The idle heartbeats due at `now_ns`: of pull requests that asked for them and
        of a push consumer, with the last delivery's (consumer, stream) sequences and the
        flow-control request a push consumer is stalled on. A `flow_control`-acked
        consumer with `pending` messages and no request outstanding sends one after its
        heartbeat, so that an idle stream's last messages are acknowledged too."""
        hb = heartbeat_headers(*delivered)
        if self.reply is not None:
            hb += (("Nats-Consumer-Stalled", self.reply),)
        for w in waiting:
            if w.next_heartbeat_ns is not None and now_ns >= w.next_heartbeat_ns:
                out.append(Status(w.reply, 100, "Idle Heartbeat", hb))
                w.next_heartbeat_ns = now_ns + w.heartbeat_ns
        if self.hb_at is not None and now_ns >= self.hb_at:
            assert self.cfg.deliver_subject is not None
            out.append(Status(self.cfg.deliver_subject, 100, "Idle Heartbeat", hb))
            self.hb_at = now_ns + self.cfg.idle_heartbeat_ns
            if self.cfg.ack_policy is AckPolicy.FLOW_CONTROL and pending and self.reply is None:
                self.request(out)
