"""Sublist against a naive model: every live subscription checked with `subjects.matches`.

A hypothesis state machine inserts and removes random subscriptions over a tiny token
alphabet (so subjects collide and the cache is reused across changes) and matches random
subjects, twice each so the second answer comes from the cache. A cache of four entries
keeps eviction busy.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
)
from tests.support.subscribers import NeverDelivered

from brook.routing.sublist import MatchResult, Sublist, Subscription, _Node
from brook.subjects import matches

CACHE_MAX = 4
LITERALS = [b"a", b"b", b"c"]


CLIENT = NeverDelivered()

literal_subject = st.lists(st.sampled_from(LITERALS), min_size=1, max_size=4).map(b".".join)


@st.composite
def sub_subject(draw: st.DrawFn) -> bytes:
    tokens = draw(st.lists(st.sampled_from([*LITERALS, b"*"]), min_size=0, max_size=3))
    if not tokens or draw(st.booleans()):
        tokens.append(b">" if draw(st.booleans()) else draw(st.sampled_from([*LITERALS, b"*"])))
    return b".".join(tokens)


# Published subjects may carry wildcard tokens anywhere (a client without pedantic mode).
published_subject = st.lists(st.sampled_from([*LITERALS, b"*", b">"]), min_size=1, max_size=4).map(
    b".".join
)

queue_name = st.sampled_from([None, None, b"q1", b"q2"])


class SublistMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.sublist = Sublist(cache_entries_max=CACHE_MAX)
        self.live: list[Subscription] = []
        self.next_sid = 0

    def _new(self, subject: bytes, queue: bytes | None) -> Subscription:
        self.next_sid += 1
        return Subscription(CLIENT, subject, b"%d" % self.next_sid, queue)

    # ------------------------------------------------------------------ changes

    @rule(subject=sub_subject(), queue=queue_name)
    def insert(self, subject: bytes, queue: bytes | None) -> None:
        sub = self._new(subject, queue)
        self.sublist.insert(sub)
        self.live.append(sub)

    @rule(data=st.data())
    def insert_duplicate_subject(self, data: st.DataObject) -> None:
        """Another subscription on a live subscription's exact subject and queue."""
        if not self.live:
            return
        twin = data.draw(st.sampled_from(self.live), label="twin")
        self.insert(twin.subject, twin.queue)

    @precondition(lambda self: bool(self.live))
    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        index = data.draw(st.integers(0, len(self.live) - 1), label="index")
        sub = self.live.pop(index)
        assert self.sublist.remove(sub)

    @rule(subject=sub_subject(), queue=queue_name)
    def remove_absent(self, subject: bytes, queue: bytes | None) -> None:
        count = self.sublist.count
        assert not self.sublist.remove(self._new(subject, queue))
        assert self.sublist.count == count

    @precondition(lambda self: bool(self.live))
    @rule(data=st.data())
    def remove_twice(self, data: st.DataObject) -> None:
        sub = self.live.pop(data.draw(st.integers(0, len(self.live) - 1), label="index"))
        assert self.sublist.remove(sub)
        assert not self.sublist.remove(sub)

    # ------------------------------------------------------------------ queries

    def _check(self, subject: bytes) -> None:
        first = self.sublist.match(subject)
        self._compare(subject, first)
        second = self.sublist.match(subject)  # a second miss caches it, if it was one
        self._compare(subject, second)
        hits = self.sublist.cache_hits
        third = self.sublist.match(subject)  # the cache's answer
        assert self.sublist.cache_hits == hits + 1, "an immediate third match missed the cache"
        assert third is second
        self._compare(subject, third)

    def _compare(self, subject: bytes, result: MatchResult) -> None:
        want_plain = {id(s) for s in self.live if s.queue is None and matches(s.subject, subject)}
        want_queues: dict[bytes, set[int]] = {}
        for s in self.live:
            if s.queue is not None and matches(s.subject, subject):
                want_queues.setdefault(s.queue, set()).add(id(s))

        assert len(result.plain) == len({id(s) for s in result.plain}), "duplicate delivery"
        assert {id(s) for s in result.plain} == want_plain
        got_queues: dict[bytes, set[int]] = {}
        for members in result.queues:
            assert members, "an empty queue group"
            names = {m.queue for m in members}
            assert len(names) == 1, f"a group mixes queues {names}"
            name = members[0].queue
            assert name is not None
            assert name not in got_queues, f"queue {name!r} split over two groups"
            assert len(members) == len({id(m) for m in members}), "duplicate member"
            got_queues[name] = {id(m) for m in members}
        assert got_queues == want_queues
        assert bool(result) == bool(want_plain or want_queues)

    @rule(subject=literal_subject)
    def match_literal(self, subject: bytes) -> None:
        self._check(subject)

    @rule(subject=published_subject)
    def match_with_wildcard_tokens(self, subject: bytes) -> None:
        self._check(subject)

    @rule(data=st.data())
    def match_a_live_subscription_subject(self, data: st.DataObject) -> None:
        if self.live:
            self._check(data.draw(st.sampled_from(self.live), label="sub").subject)

    # ------------------------------------------------------------------ invariants

    @invariant()
    def counts_agree(self) -> None:
        assert self.sublist.count == len(self.live)
        assert len(self.sublist._cache) <= CACHE_MAX

    @invariant()
    def trie_holds_exactly_the_live_subscriptions_and_no_empty_nodes(self) -> None:
        stored: list[int] = []

        def walk(node: _Node, path: tuple[bytes, ...]) -> None:
            for s in node.plain:
                assert s.queue is None
                assert s.subject == b".".join(path)
                stored.append(id(s))
            for name, members in node.queues.items():
                assert members, f"empty queue list {name!r} kept"
                for s in members:
                    assert s.queue == name
                    assert s.subject == b".".join(path)
                    stored.append(id(s))
            for tok, child in node.children.items():
                assert not child.is_empty(), f"empty node kept at {(*path, tok)!r}"
                walk(child, (*path, tok))

        walk(self.sublist._root, ())
        assert sorted(stored) == sorted(id(s) for s in self.live)

    @invariant()
    def every_cached_result_is_current(self) -> None:
        for subject, result in list(self.sublist._cache.items()):
            self._compare(subject, result)


SublistMachine.TestCase.settings = settings(
    max_examples=200,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestSublistMachine = SublistMachine.TestCase
