"""The consumer's run-shaped shortcuts agree with the general code they stand in for:
`Delivery.deliver_new` (first deliveries in one loop) with the general dispatch loop,
`ConsumerState.ack_explicit_run` (a read chunk's plain acks) with `ack` once per ack, and
`ConsumerState.stored_while_idle` (a publish to an idle pull consumer) with `message_stored`.

Two consumers over one source get the same random inputs; in one of them the delivery
shortcut is switched off, so the general loop (`candidate`, `_ack_subject_for`,
`_deliver`) makes every delivery, and plain acks go through `ack` one by one. After every
step both must have produced the same actions, and agree on their info, snapshot and next
deadline.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from brook.jetstream.consumer import (
    AckKind,
    AckPolicy,
    Action,
    ConsumerSettings,
    ConsumerState,
    Deliver,
    DeliverRun,
    Retention,
    Status,
)
from brook.jetstream.consumer.delivery import AHEAD_MAX, Delivery

from .fakes import FakeSource, S, flat

T0 = 1_000 * S


class GeneralOnly(Delivery):
    """A consumer's delivery that always takes the general loop."""

    def deliver_new(self, now_ns: int, out: list[Action]) -> None:
        return


def with_delivery(c: ConsumerState, cls: type[Delivery]) -> ConsumerState:
    """`c`, before any input, its delivery made again as a `cls`. (Not by assigning
    `__class__`: a compiled `Delivery` calls its own methods through a table that the
    assignment leaves as it was.)"""
    d = c.delivery
    c.delivery = cls(
        d.cfg,
        d.src,
        c.ledger,
        c.pacer,
        c.flow,
        start_seq=d.next_seq,
        last_per_subject_seqs=list(d.lps),
        has_interest=d.has_interest,
        priority=d.priority,
    )
    return c


def general_only(c: ConsumerState) -> ConsumerState:
    """`c`, its first deliveries' shortcut switched off."""
    return with_delivery(c, GeneralOnly)


class TwinConsumers(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = T0
        self.src = FakeSource("o.*")
        self.fast: ConsumerState
        self.general: ConsumerState
        self.outstanding: dict[int, int] = {}  # seq -> consumer seq of the latest delivery
        self.n = 0
        self.listening: set[str] = set()  # pull request replies with a subscriber

    @initialize(
        push=st.booleans(),
        ack_policy=st.sampled_from([AckPolicy.EXPLICIT, AckPolicy.ALL, AckPolicy.NONE]),
        max_ack_pending=st.sampled_from([-1, 1, 3, 100, AHEAD_MAX + 5]),
        backoff=st.sampled_from([(), (1 * S, 3 * S)]),
        max_deliver=st.sampled_from([-1, 1, 2]),
        headers_only=st.booleans(),
        heartbeat=st.sampled_from([0, 2 * S]),
        stored=st.integers(0, 2 * AHEAD_MAX + 10),
        retention=st.sampled_from([Retention.LIMITS, Retention.LIMITS, Retention.INTEREST]),
        sample_percent=st.sampled_from([0, 0, 50]),
        flow_control=st.booleans(),
    )
    def setup(
        self,
        push: bool,
        ack_policy: AckPolicy,
        max_ack_pending: int,
        backoff: tuple[int, ...],
        max_deliver: int,
        headers_only: bool,
        heartbeat: int,
        stored: int,
        retention: Retention,
        sample_percent: int,
        flow_control: bool,
    ) -> None:
        for i in range(stored):
            self.src.add("x.y" if i % 7 == 3 else "o.a")
        cfg = ConsumerSettings(
            stream="S",
            name="c",
            ack_policy=ack_policy,
            ack_wait_ns=2 * S,
            backoff_ns=backoff,
            max_deliver=max_deliver,
            max_ack_pending=max_ack_pending,
            max_waiting=8,
            deliver_subject="deliver.here" if push else None,
            idle_heartbeat_ns=heartbeat if push else 0,
            headers_only=headers_only,
            retention=retention,
            sample_percent=sample_percent,
            flow_control=flow_control and push,
            fc_window_start_bytes=400,  # a request every few deliveries
            fc_window_max_bytes=1600,
        )
        interest = self.listening.__contains__
        self.fast = ConsumerState(cfg, self.src, has_interest=interest)
        self.general = general_only(ConsumerState(cfg, self.src, has_interest=interest))

    def both(self, step: str, *args: object, **kwargs: object) -> None:
        out_fast = flat(getattr(self.fast, step)(*args, **kwargs))
        out_general = getattr(self.general, step)(*args, **kwargs)
        assert out_fast == out_general
        for a in out_fast:
            if isinstance(a, Deliver):
                self.outstanding[a.stream_seq] = a.consumer_seq

    @rule(subject=st.sampled_from(["o.a", "o.b", "x.y"]), count=st.sampled_from([1, 1, 40]))
    def publish(self, subject: str, count: int) -> None:
        for _ in range(count):
            seq = self.src.add(subject)
            if self.fast.stored_while_idle(self.now):  # the runner's shortcut: no actions
                assert self.general.message_stored(seq, self.now) == []
            else:
                self.both("message_stored", seq, self.now)

    @precondition(lambda self: not self.fast.cfg.is_push)
    @rule(
        batch=st.sampled_from([1, 3, 50, 300]),
        expires=st.sampled_from([0, 3]),
        no_wait=st.booleans(),
        max_bytes=st.sampled_from([0, 0, 60, 100_000]),
    )
    def pull(self, batch: int, expires: int, no_wait: bool, max_bytes: int) -> None:
        self.n += 1
        self.listening.add(f"r{self.n}")
        self.both(
            "pull_request",
            f"r{self.n}",
            self.now,
            batch=batch,
            expires_ns=expires * S,
            no_wait=no_wait,
            max_bytes=max_bytes,
        )

    @precondition(lambda self: self.fast.cfg.is_push)
    @rule(interest=st.booleans())
    def push_interest(self, interest: bool) -> None:
        self.both("set_push_interest", interest, self.now)

    @precondition(lambda self: self.fast.cfg.flow_control)
    @rule()
    def flow_control_answer(self) -> None:
        """The client answers the outstanding flow-control request: deliveries resume."""
        reply = self.general.flow.reply
        assert reply == self.fast.flow.reply
        if reply is not None:
            self.both("flow_control_response", reply, self.now)

    @rule(
        pick=st.integers(0, 1000),
        kind=st.sampled_from([AckKind.ACK, AckKind.ACK, AckKind.NAK, AckKind.TERM]),
        many=st.booleans(),
        late=st.booleans(),
    )
    def ack(self, pick: int, kind: AckKind, many: bool, late: bool) -> None:
        if not self.outstanding:
            return
        seqs = sorted(self.outstanding)
        chosen = seqs[pick % len(seqs) :] if many else [seqs[pick % len(seqs)]]
        acks = [(seq, self.outstanding.pop(seq)) for seq in chosen]
        if late:  # again (ignored), and one not delivered yet (ignored)
            acks += [acks[0], (self.src.last + 3, 1)]
        if kind is AckKind.ACK and self.fast.cfg.ack_policy is AckPolicy.EXPLICIT:
            out_fast = self.fast.ack_explicit_run([seq for seq, _ in acks], self.now)
            out_general: list[Action] = []
            for seq, cseq in acks:
                out_general += self.general.ack(seq, cseq, kind, self.now, dispatch=False)
            assert out_fast == out_general
        else:
            for seq, cseq in acks:
                self.both("ack", seq, cseq, kind, self.now, dispatch=False)
        self.both("dispatch", self.now)

    @rule(pick=st.integers(0, 1000))
    def remove(self, pick: int) -> None:
        if not self.src.msgs:
            return
        seqs = sorted(self.src.msgs)
        seq = seqs[pick % len(seqs)]
        self.src.remove(seq)
        self.fast.messages_removed([seq])
        self.general.messages_removed([seq])
        self.outstanding.pop(seq, None)

    @rule(pick=st.integers(0, 1000))
    def unsubscribe(self, pick: int) -> None:
        """A client gives up on a waiting request: the next delivery must skip it."""
        waiting = sorted({w.reply for w in self.fast.delivery.waiting} & self.listening)
        if waiting:
            self.listening.remove(waiting[pick % len(waiting)])

    @rule(dt=st.integers(0, 5 * S))
    def wait(self, dt: int) -> None:
        """Time passes without the timer firing (yet): requests may be past expiry."""
        self.now += dt

    @rule(dt=st.integers(0, 5 * S))
    def tick(self, dt: int) -> None:
        self.now += dt
        self.both("tick", self.now)

    @invariant()
    def agree(self) -> None:
        if not hasattr(self, "fast"):
            return
        self.fast.check_invariants()
        assert self.fast.info() == self.general.info()
        assert self.fast.snapshot() == self.general.snapshot()
        assert self.fast.next_deadline() == self.general.next_deadline()
        assert self.fast.next_stream_seq == self.general.next_stream_seq


TwinConsumers.TestCase.settings = settings(
    max_examples=int(os.environ.get("TWIN_EXAMPLES", "150")),
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestTwinConsumers = TwinConsumers.TestCase


def test_the_shortcut_makes_the_deliveries_of_a_plain_consumer() -> None:
    """The twin test would pass vacuously if `deliver_new` never ran: a plain pull
    consumer's first deliveries must come from it."""
    src = FakeSource("o.*")
    for _ in range(10):
        src.add("o.a")
    cfg = ConsumerSettings(stream="S", name="c", max_ack_pending=100)
    taken: list[int] = []

    class Counting(Delivery):
        def deliver_new(self, now_ns: int, out: list[Action]) -> None:
            taken.append(now_ns)
            super().deliver_new(now_ns, out)

    c = with_delivery(ConsumerState(cfg, src), Counting)
    out = c.pull_request("inbox", T0, batch=4, expires_ns=5 * S)
    assert [type(a) for a in out] == [DeliverRun]  # the one request's: one run
    assert [a.stream_seq for a in flat(out) if isinstance(a, Deliver)] == [1, 2, 3, 4]
    assert taken
    # `deliver_new` made them all: the general loop, given nothing to add, agrees.
    general = general_only(ConsumerState(cfg, src))
    assert general.pull_request("inbox", T0, batch=4, expires_ns=5 * S) == flat(out)


def test_a_mirrors_consumer_delivers_runs_between_its_flow_control_requests() -> None:
    """A mirror's or source's consumer (push, ack none, flow control) takes the shortcut
    too: its deliveries leave as runs, each flow-control request after the delivery that
    asked for it, and none past the window until it is answered; the general loop agrees."""
    src = FakeSource("o.*")
    for _ in range(40):
        src.add("o.a")
    cfg = ConsumerSettings(
        stream="S",
        name="c",
        ack_policy=AckPolicy.NONE,
        deliver_subject="deliver.here",
        flow_control=True,
        fc_window_start_bytes=400,
        fc_window_max_bytes=1600,
    )
    fast = ConsumerState(cfg, src)
    out = fast.set_push_interest(True, T0)
    assert [type(a) for a in out] == [DeliverRun, Status, DeliverRun]
    assert isinstance(out[1], Status)
    assert out[1].code == 100
    delivered = [a.stream_seq for a in flat(out) if isinstance(a, Deliver)]
    assert delivered == list(range(1, len(delivered) + 1))
    assert len(delivered) < 40  # stopped at the window
    general = general_only(ConsumerState(cfg, src))
    assert general.set_push_interest(True, T0) == flat(out)
    assert fast.info() == general.info()
