"""Random pulls, acks, NAKs, WPIs, TERMs, removals and clock ticks against the consumer
state machine: invariants hold after every step, and after draining every stored message
is exactly one of acked, terminated, dead-lettered (max_deliver) or removed."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from brook.jetstream.consumer import (
    AckKind,
    Action,
    Advisory,
    ConsumerSettings,
    ConsumerState,
    Deliver,
)

from .fakes import FakeSource, S, flat

T0 = 1_000 * S


class ConsumerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = T0
        self.src = FakeSource("o.*")
        self.c: ConsumerState
        self.acked: set[int] = set()
        self.termed: set[int] = set()
        self.dead: set[int] = set()
        self.removed: set[int] = set()
        self.outstanding: dict[int, int] = {}  # seq -> consumer seq of latest delivery
        self.counts: dict[int, int] = {}
        self.n = 0

    @initialize(
        ack_wait=st.integers(1, 5),
        backoff=st.lists(st.integers(1, 5), max_size=3),
        max_deliver=st.sampled_from([-1, 1, 2, 3, 5]),
        max_ack_pending=st.sampled_from([-1, 1, 2, 5, 100]),
    )
    def setup(
        self, ack_wait: int, backoff: list[int], max_deliver: int, max_ack_pending: int
    ) -> None:
        if max_deliver > 0:
            backoff = backoff[:max_deliver]
        cfg = ConsumerSettings(
            stream="S",
            name="c",
            ack_wait_ns=ack_wait * S,
            backoff_ns=tuple(b * S for b in backoff),
            max_deliver=max_deliver,
            max_ack_pending=max_ack_pending,
            max_waiting=4,
        )
        self.c = ConsumerState(cfg, self.src)

    def _resolved(self) -> set[int]:
        return self.acked | self.termed | self.dead | self.removed

    def handle(self, actions: list[Action]) -> None:
        for a in flat(actions):
            if isinstance(a, Deliver):
                assert a.stream_seq not in self._resolved(), a
                assert self.src.flt.matches(a.msg.subject)
                self.counts[a.stream_seq] = self.counts.get(a.stream_seq, 0) + 1
                assert a.delivery_count == self.counts[a.stream_seq]
                md = self.c.cfg.max_deliver
                assert md <= 0 or a.delivery_count <= md
                self.outstanding[a.stream_seq] = a.consumer_seq
            elif isinstance(a, Advisory) and a.kind == "MAX_DELIVERIES":
                seq = a.payload["stream_seq"]
                assert seq not in self._resolved()
                self.dead.add(seq)
                self.outstanding.pop(seq, None)

    @rule(subject=st.sampled_from(["o.a", "o.b", "x.y"]))
    def publish(self, subject: str) -> None:
        seq = self.src.add(subject)
        self.handle(self.c.message_stored(seq, self.now))

    @rule(
        batch=st.integers(1, 5),
        expires=st.sampled_from([0, 1, 3, 10]),
        no_wait=st.booleans(),
    )
    def pull(self, batch: int, expires: int, no_wait: bool) -> None:
        self.n += 1
        out = self.c.pull_request(
            f"r{self.n}", self.now, batch=batch, expires_ns=expires * S, no_wait=no_wait
        )
        self.handle(out)

    @rule(
        pick=st.integers(0, 1000),
        kind=st.sampled_from([AckKind.ACK, AckKind.NAK, AckKind.WPI, AckKind.TERM]),
        delay=st.sampled_from([None, 1, 4]),
    )
    def ack(self, pick: int, kind: AckKind, delay: int | None) -> None:
        if not self.outstanding:
            return
        seqs = sorted(self.outstanding)
        seq = seqs[pick % len(seqs)]
        cseq = self.outstanding[seq]
        d = delay * S if delay is not None else None
        out = self.c.ack(seq, cseq, kind, self.now, delay_ns=d)
        if kind is AckKind.ACK:
            self.acked.add(seq)
            self.outstanding.pop(seq)
        elif kind is AckKind.TERM:
            self.termed.add(seq)
            self.outstanding.pop(seq)
        self.handle(out)

    @rule(pick=st.integers(0, 1000))
    def remove(self, pick: int) -> None:
        live = sorted(set(self.src.msgs) - self._resolved())
        if not live:
            return
        seq = live[pick % len(live)]
        self.src.remove(seq)
        self.c.messages_removed([seq])
        self.removed.add(seq)
        self.outstanding.pop(seq, None)

    @rule(dt=st.integers(0, 6 * S))
    def tick(self, dt: int) -> None:
        self.now += dt
        self.handle(self.c.tick(self.now))

    @invariant()
    def check_consumer(self) -> None:
        if hasattr(self, "c"):
            self.c.check_invariants()
            assert set(self.c.pending_seqs()) <= set(self.outstanding)

    def teardown(self) -> None:
        if not hasattr(self, "c"):
            return
        for _ in range(10_000):
            if self.c.num_waiting == 0:
                self.handle(self.c.pull_request("drain", self.now, batch=50, expires_ns=10 * S))
            while self.outstanding:
                seq, cseq = self.outstanding.popitem()
                self.acked.add(seq)
                self.handle(self.c.ack(seq, cseq, AckKind.ACK, self.now))
            matching = {s for s, m in self.src.msgs.items() if self.src.flt.matches(m.subject)}
            if matching <= self._resolved() and not self.c.pending_seqs():
                break
            deadline = self.c.next_deadline()
            self.now = max(self.now, deadline if deadline is not None else self.now)
            self.handle(self.c.tick(self.now))
        else:
            raise AssertionError("consumer did not drain")
        every = {s for s in range(1, self.src.last + 1)}
        matching = {
            s
            for s in every
            if s in self.src.msgs and self.src.flt.matches(self.src.msgs[s].subject)
        }
        assert matching | self.removed <= self._resolved()
        groups = [self.acked, self.termed, self.dead, self.removed]
        assert sum(len(g) for g in groups) == len(set().union(*groups))
        assert self.c.num_pending() == 0
        assert self.c.num_ack_pending == 0
        # The floor moves only on acks (nats-server): dead letters and messages removed
        # while pending may hold it back, and a position moved over non-matching messages
        # after the last ack is ahead of it; it never passes what was delivered.
        floor_c, floor_s = self.c.ack_floor
        assert floor_s <= self.c.delivered_stream_seq
        if not (self.dead or self.removed):
            assert floor_c == self.c.delivered_consumer_seq


ConsumerMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestConsumerMachine = ConsumerMachine.TestCase
