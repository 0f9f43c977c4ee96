"""Sublist exclusive prefix routes (`$JS.ACK.` registered, as the JetStream engine does)
against the naive model: whatever mix of consumer ack subscriptions (`$JS.ACK.<s>.<c>.>`,
one-off) and other subscriptions that may or may not match ack subjects is live, `match`
of an ack-like subject returns exactly the subscriptions that `subjects.matches` says match
it, whether the one-lookup route or the trie answered; `match_each` agrees with `match`.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule
from tests.support.subscribers import NeverDelivered

from brook.routing.sublist import Sublist, Subscription
from brook.subjects import matches

CLIENT = NeverDelivered()
NAMES = [b"S", b"T", b"C", b"D"]

consumer_acks = st.builds(
    lambda s, c: b"$JS.ACK.%b.%b.>" % (s, c), st.sampled_from(NAMES), st.sampled_from(NAMES)
)
# Subscriptions that may overlap ack subjects (`foreign` ones) and ones that cannot.
other_patterns = st.sampled_from(
    [
        b">",
        b"$JS.>",
        b"$JS.ACK.>",
        b"$JS.*.S.>",
        b"*.ACK.S.C.>",
        b"$JS.ACK.S.*.>",
        b"$JS.ACK.S.C.1.>",
        b"$JS.ACK.S.C.*.*.*.*.*",
        b"$JS.API.>",
        b"$JS.FC.S.C.>",
        b"_INBOX.*",
        b"orders.>",
    ]
)
ack_like_subject = st.one_of(
    st.builds(
        lambda s, c, tail: b"$JS.ACK.%b.%b%b" % (s, c, tail),
        st.sampled_from([*NAMES, b"", b"*"]),
        st.sampled_from([*NAMES, b"", b">"]),
        st.sampled_from([b".1.2.3.4.5", b".1", b".", b"", b"..1", b".1.", b".*", b".>", b".1.2"]),
    ),
    st.sampled_from([b"$JS.ACK", b"$JS.ACK.", b"$JS.ACK.S", b"$JS.API.INFO", b"orders.x"]),
)


class AckRouteMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.sublist = Sublist()
        self.sublist.add_exclusive_prefix(b"$JS.ACK.", 2)  # as the JetStream engine does
        self.live: list[Subscription] = []
        self.sid = 0

    def _add(self, subject: bytes, queue: bytes | None, one_off: bool) -> None:
        self.sid += 1
        sub = Subscription(CLIENT, subject, b"%d" % self.sid, queue, cache_results=not one_off)
        self.sublist.insert(sub)
        self.live.append(sub)

    @rule(subject=consumer_acks, queue=st.sampled_from([None, None, None, b"q"]))
    def add_consumer_acks(self, subject: bytes, queue: bytes | None) -> None:
        self._add(subject, queue, one_off=True)

    @rule(subject=other_patterns, one_off=st.booleans())
    def add_other(self, subject: bytes, one_off: bool) -> None:
        self._add(subject, None, one_off)

    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        if self.live:
            sub = self.live.pop(data.draw(st.integers(0, len(self.live) - 1)))
            assert self.sublist.remove(sub)

    @rule(subject=ack_like_subject)
    def match(self, subject: bytes) -> None:
        result = self.sublist.match(subject)
        got = {id(s) for s in result.plain} | {id(m) for ms in result.queues for m in ms}
        want = {id(s) for s in self.live if matches(s.subject, subject)}
        if b".." in subject or subject.endswith(b".") or subject.startswith(b"."):
            want = set()  # as nats-server: a subject with an empty token matches nothing
        assert got == want, (subject, [s.subject for s in self.live])

    @rule(subjects=st.lists(ack_like_subject, min_size=1, max_size=5))
    def match_each(self, subjects: list[bytes]) -> None:
        # When it answers, `match_each` says for each subject what `match` says.
        stretches = self.sublist.match_each(subjects)
        if stretches is None:
            return
        assert [s for _, stretch in stretches for s in stretch] == subjects
        for route, stretch in stretches:
            for subject in stretch:
                result = self.sublist.match(subject)
                assert result.plain == ((route,) if route else ()), subject
                assert not result.queues


TestAckRoutes = AckRouteMachine.TestCase
TestAckRoutes.settings = settings(
    max_examples=300, stateful_step_count=40, suppress_health_check=[HealthCheck.too_slow]
)


def test_ack_route_answers_without_the_trie_when_nothing_else_can_match() -> None:
    sl = Sublist()
    sl.add_exclusive_prefix(b"$JS.ACK.", 2)
    acks = Subscription(CLIENT, b"$JS.ACK.S.C.>", b"1", cache_results=False)
    api = Subscription(CLIENT, b"$JS.API.>", b"2")
    sl.insert(acks)
    sl.insert(api)
    assert sl.match(b"$JS.ACK.S.C.1.2.3.4.5") is sl.match(b"$JS.ACK.S.C.1.9.9.4.0")
    everything = Subscription(CLIENT, b">", b"3")
    sl.insert(everything)  # now the trie must answer, and it includes the new one
    assert {s.sid for s in sl.match(b"$JS.ACK.S.C.1.2.3.4.5").plain} == {b"1", b"3"}
    sl.remove(everything)
    assert sl.match(b"$JS.ACK.S.C.1.2.3.4.5").plain == (acks,)
