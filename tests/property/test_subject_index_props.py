"""SubjectIndex against a naive model: a list of (subject, value) entries.

A hypothesis state machine adds and removes entries (literal and wildcard subjects over a
tiny token alphabet, so they collide) and asks both questions after every step: `match`
of a literal subject must give the values of the entries `subjects.matches` accepts, and
`intersecting` of a pattern those of the entries that share a subject with it, decided
by brute force over every literal subject of the alphabet up to the longest length in
play (a `>` needs one token more). The trie must hold no empty node afterwards.
"""

from __future__ import annotations

from collections import Counter
from itertools import product

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from brook.routing.subject_index import SubjectIndex, _Node
from brook.subjects import matches

LITERALS = [b"a", b"b", b"c"]
MAX_TOKENS = 4


@st.composite
def pattern(draw: st.DrawFn) -> bytes:
    tokens = draw(st.lists(st.sampled_from([*LITERALS, b"*"]), min_size=0, max_size=3))
    if not tokens or draw(st.booleans()):
        tokens.append(b">" if draw(st.booleans()) else draw(st.sampled_from([*LITERALS, b"*"])))
    return b".".join(tokens)


literal = st.lists(st.sampled_from(LITERALS), min_size=1, max_size=MAX_TOKENS).map(b".".join)

# Every literal subject up to one token longer than any pattern: enough to witness any
# intersection of two patterns of at most MAX_TOKENS tokens.
WITNESSES = [
    b".".join(tokens)
    for n in range(1, MAX_TOKENS + 2)
    for tokens in product([*LITERALS, b"d"], repeat=n)
]


def share_a_subject(x: bytes, y: bytes) -> bool:
    return any(matches(x, w) and matches(y, w) for w in WITNESSES)


class SubjectIndexMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.index = SubjectIndex[int]()
        self.entries: list[tuple[bytes, int]] = []
        self.next_value = 0

    @rule(subject=st.one_of(pattern(), literal))
    def add(self, subject: bytes) -> None:
        self.next_value += 1
        self.index.add(subject, self.next_value)
        self.entries.append((subject, self.next_value))

    @precondition(lambda self: bool(self.entries))
    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        subject, value = self.entries.pop(data.draw(st.integers(0, len(self.entries) - 1)))
        assert self.index.remove(subject, value)
        assert not self.index.remove(subject, -1)

    @rule(subject=literal)
    def match(self, subject: bytes) -> None:
        want = Counter(v for s, v in self.entries if matches(s, subject))
        assert Counter(self.index.match(subject)) == want

    @rule(query=st.one_of(pattern(), literal))
    def intersecting(self, query: bytes) -> None:
        want = Counter(v for s, v in self.entries if share_a_subject(s, query))
        assert Counter(self.index.intersecting(query)) == want

    @invariant()
    def sizes_agree_and_no_empty_nodes(self) -> None:
        assert len(self.index) == len({s for s, _ in self.entries})
        for s, _ in self.entries:
            assert s in self.index
        assert sorted(v for s, v in self.entries) == sorted(
            v for s in {s for s, _ in self.entries} for v in self.index.get(s)
        )

        def walk(node: _Node[int], root: bool) -> None:
            assert root or node.values or node.children
            for child in node.children.values():
                walk(child, False)

        walk(self.index._root, True)


TestSubjectIndexMachine = SubjectIndexMachine.TestCase
TestSubjectIndexMachine.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
