"""Sublist: matching, queue grouping, removal and pruning, the bounded match cache."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brook.routing.sublist import EMPTY, MatchResult, Sublist, Subscription, _Node
from brook.subjects import matches
from tests.support.subscribers import NeverDelivered

CLIENT = NeverDelivered()
_sids = iter(range(1, 1_000_000))


def sub(subject: bytes, queue: bytes | None = None) -> Subscription:
    return Subscription(CLIENT, subject, str(next(_sids)).encode(), queue)


def plain(result: MatchResult) -> set[Subscription]:
    assert len(set(result.plain)) == len(result.plain), "a subscription matched twice"
    return set(result.plain)


def groups(result: MatchResult) -> dict[bytes | None, set[Subscription]]:
    out: dict[bytes | None, set[Subscription]] = {}
    for members in result.queues:
        assert members, "an empty queue group"
        names = {m.queue for m in members}
        assert len(names) == 1, f"one tuple mixes queue groups {names}"
        (name,) = names
        assert name not in out, f"queue group {name!r} split over two tuples"
        out[name] = set(members)
    return out


def node_count(sl: Sublist) -> int:
    """Nodes below the root; every one of them must hold something."""

    def walk(node: _Node) -> int:
        total = 0
        for child in node.children.values():
            assert not child.is_empty(), "the trie kept an empty node"
            total += 1 + walk(child)
        return total

    return walk(sl._root)


def with_subs(*subjects: bytes) -> tuple[Sublist, dict[bytes, Subscription]]:
    sl = Sublist()
    subs = {}
    for subject in subjects:
        subs[subject] = s = sub(subject)
        sl.insert(s)
    return sl, subs


# ---------------------------------------------------------------------------- matching


def test_literal() -> None:
    sl, subs = with_subs(b"foo.bar", b"foo", b"foo.bar.baz")
    assert plain(sl.match(b"foo.bar")) == {subs[b"foo.bar"]}
    assert plain(sl.match(b"foo")) == {subs[b"foo"]}
    assert plain(sl.match(b"foo.bar.baz")) == {subs[b"foo.bar.baz"]}
    assert sl.match(b"foo.baz") is EMPTY
    assert sl.match(b"bar") is EMPTY
    assert not sl.match(b"foo.bar.baz.qux")


def test_partial_wildcard() -> None:
    sl, subs = with_subs(b"foo.*", b"*.bar", b"*", b"foo.*.baz")
    assert plain(sl.match(b"foo.bar")) == {subs[b"foo.*"], subs[b"*.bar"]}
    assert plain(sl.match(b"foo.qux")) == {subs[b"foo.*"]}
    assert plain(sl.match(b"foo")) == {subs[b"*"]}
    assert plain(sl.match(b"foo.x.baz")) == {subs[b"foo.*.baz"]}
    assert not sl.match(b"foo.bar.qux")
    assert not sl.match(b"a.b.c.d")


def test_full_wildcard() -> None:
    sl, subs = with_subs(b"foo.>", b">")
    assert plain(sl.match(b"foo")) == {subs[b">"]}
    assert plain(sl.match(b"foo.bar")) == {subs[b"foo.>"], subs[b">"]}
    assert plain(sl.match(b"foo.bar.baz.qux")) == {subs[b"foo.>"], subs[b">"]}
    assert plain(sl.match(b"bar.foo")) == {subs[b">"]}


def test_mixed_wildcards() -> None:
    subjects = [b"*.bar.>", b"foo.*.>", b"*.*", b"foo.bar", b"*.*.baz", b"foo.>", b"*.>"]
    sl, subs = with_subs(*subjects)
    for subject in [b"foo.bar", b"foo.bar.baz", b"x.bar.y.z", b"foo", b"a.b", b"a.b.baz"]:
        expected = {subs[p] for p in subjects if matches(p, subject)}
        assert plain(sl.match(subject)) == expected, subject
    assert plain(sl.match(b"foo.bar")) == {
        subs[b"*.*"],
        subs[b"foo.bar"],
        subs[b"foo.>"],
        subs[b"*.>"],
    }


def test_the_same_subject_twice_matches_both_subscriptions() -> None:
    sl = Sublist()
    a, b = sub(b"foo"), sub(b"foo")
    sl.insert(a)
    sl.insert(b)
    assert plain(sl.match(b"foo")) == {a, b}
    assert sl.count == 2


@pytest.mark.parametrize(
    ("published", "matching"),
    [
        (b"foo.*", {b"foo.*", b"foo.>", b"*.*", b">", b"*.>"}),
        (b"foo.>", {b"foo.*", b"foo.>", b"*.*", b">", b"*.>"}),
        (b"*", {b"*", b">"}),
        (b">", {b"*", b">"}),
        (b"*.bar", {b"*.*", b">", b"*.>"}),
        (b"foo.*.baz", {b"foo.>", b">", b"*.>"}),
    ],
)
def test_wildcard_tokens_in_the_published_subject(published: bytes, matching: set[bytes]) -> None:
    # A wildcard token in a published subject is matched only by wildcard subscriptions
    # (literal `foo.bar` does not receive a message published to `foo.*`).
    subjects = [b"foo.bar", b"foo.*", b"foo.>", b"*.*", b">", b"*", b"*.>", b"foo", b"bar"]
    sl, _ = with_subs(*subjects)
    got = {s.subject for s in plain(sl.match(published))}
    assert got == matching
    assert got == {p for p in subjects if matches(p, published)}


# ---------------------------------------------------------------------------- queue groups


def test_queue_subscriptions_are_grouped_by_name_across_subjects() -> None:
    sl = Sublist()
    q1_lit, q1_wc, q1_fwc = sub(b"foo.bar", b"q1"), sub(b"foo.*", b"q1"), sub(b">", b"q1")
    q2 = sub(b"foo.>", b"q2")
    p = sub(b"foo.bar")
    other = sub(b"other", b"q1")
    for s in (q1_lit, q1_wc, q1_fwc, q2, p, other):
        sl.insert(s)
    result = sl.match(b"foo.bar")
    assert plain(result) == {p}
    assert groups(result) == {b"q1": {q1_lit, q1_wc, q1_fwc}, b"q2": {q2}}
    assert len(result.queues) == 2
    assert groups(sl.match(b"other")) == {b"q1": {other, q1_fwc}}


def test_queue_only_match_is_truthy_and_plain_is_empty() -> None:
    sl = Sublist()
    q = sub(b"foo", b"workers")
    sl.insert(q)
    result = sl.match(b"foo")
    assert result
    assert result.plain == ()
    assert result.queues == ((q,),)


def test_removing_the_last_member_drops_the_group() -> None:
    sl = Sublist()
    a, b = sub(b"foo", b"q"), sub(b"foo", b"q")
    sl.insert(a)
    sl.insert(b)
    assert sl.remove(a)
    assert groups(sl.match(b"foo")) == {b"q": {b}}
    assert sl.remove(b)
    assert sl.match(b"foo") is EMPTY
    assert node_count(sl) == 0


# ---------------------------------------------------------------------------- removal


def test_remove_and_prune_leaves_no_empty_nodes() -> None:
    sl = Sublist()
    subs = [sub(s) for s in (b"a.b.c.d", b"a.b", b"a.*.c", b"a.>", b"x.y.z")]
    subs.append(sub(b"a.b.c.d", b"q"))
    for s in subs:
        sl.insert(s)
    assert node_count(sl) == 10  # a, a.b, a.b.c, a.b.c.d, a.*, a.*.c, a.>, x, x.y, x.y.z
    assert sl.count == len(subs)
    for i, s in enumerate(subs):
        assert sl.remove(s)
        assert sl.count == len(subs) - i - 1
        node_count(sl)  # asserts no empty node after every removal
    assert node_count(sl) == 0
    assert sl._root.children == {}


def test_remove_keeps_the_paths_of_other_subscriptions() -> None:
    sl, subs = with_subs(b"a.b.c", b"a.b")
    assert sl.remove(subs[b"a.b.c"])
    assert node_count(sl) == 2
    assert plain(sl.match(b"a.b")) == {subs[b"a.b"]}
    assert not sl.match(b"a.b.c")


def test_remove_of_an_unknown_subscription_returns_false() -> None:
    sl, subs = with_subs(b"a.b")
    assert not sl.remove(sub(b"a.b"))  # same subject, different subscription
    assert not sl.remove(sub(b"a.b", b"q"))  # no such queue group
    assert not sl.remove(sub(b"a.c"))  # no such node
    assert not sl.remove(sub(b"a.b.c"))  # path runs past the trie
    assert sl.count == 1
    assert sl.remove(subs[b"a.b"])
    assert not sl.remove(subs[b"a.b"])  # twice
    assert sl.count == 0
    assert node_count(sl) == 0


def test_statistics() -> None:
    """nats-server's SublistStats as counts: inserts and removes ever, and the fan-out of
    each cached result as its plain subscribers plus its queue groups (not members)."""
    sl, subs = with_subs(b"a", b"b", b"gone")
    for queue in (b"q1", b"q1", b"q2"):
        sl.insert(sub(b"a", queue))
    sl.remove(subs[b"gone"])
    for subject in (b"a", b"a", b"a", b"c", b"c"):  # each cached on its second miss
        sl.match(subject)
    assert sl.statistics() == {
        "num_subscriptions": 5,
        "num_cache": 2,
        "num_inserts": 6,
        "num_removes": 1,
        "num_matches": 5,
        "cache_hits": 1,
        "max_fanout": 3,
        "total_fanout": 3,
    }
    assert sorted(s.subject for s in sl.subscriptions()) == [b"a"] * 4 + [b"b"]


# ---------------------------------------------------------------------------- the cache


def cache(sl: Sublist, *subjects: bytes) -> None:
    """Match each of `subjects` until it is cached (on its second miss)."""
    for subject in subjects:
        sl.match(subject)
        sl.match(subject)
        assert subject in sl._cache


def test_cache_hits_are_counted_and_return_the_same_result() -> None:
    sl, _ = with_subs(b"foo.*")
    first = sl.match(b"foo.bar")
    assert (sl.matches, sl.cache_hits) == (1, 0)
    second = sl.match(b"foo.bar")  # a second miss: cached now
    assert (sl.matches, sl.cache_hits) == (2, 0)
    third = sl.match(b"foo.bar")
    assert third is second
    assert plain(first) == plain(second)
    assert (sl.matches, sl.cache_hits) == (3, 1)
    sl.match(b"foo.baz")
    assert (sl.matches, sl.cache_hits) == (4, 1)
    sl.match(b"foo.bar")
    assert (sl.matches, sl.cache_hits) == (5, 2)


def test_a_subject_matched_once_is_not_cached() -> None:
    """A request's reply subject (a PubAck's) is new each time: matched once, it takes
    no cache entry, and so evicts nothing from a full cache."""
    sl = Sublist(cache_entries_max=4)
    inbox, hot = sub(b"_INBOX.abc.*"), sub(b"hot")
    sl.insert(inbox)
    sl.insert(hot)
    cache(sl, b"hot")
    for i in range(100):
        assert plain(sl.match(b"_INBOX.abc.%d" % i)) == {inbox}
    assert list(sl._cache) == [b"hot"]
    assert len(sl._once) == 4  # bounded as the cache
    hits = sl.cache_hits
    sl.match(b"hot")
    assert sl.cache_hits == hits + 1


def test_empty_results_are_cached_too() -> None:
    sl = Sublist()
    assert sl.match(b"nobody") is EMPTY
    assert sl.match(b"nobody") is EMPTY
    assert sl.match(b"nobody") is EMPTY
    assert sl.cache_hits == 1


@pytest.mark.parametrize("pattern", [b"foo.bar", b"foo.*", b"*.bar", b"foo.>", b"*.*"])
def test_insert_invalidates_matching_cached_subjects_only(pattern: bytes) -> None:
    sl = Sublist()
    unrelated = b"zzz.yyy.xxx"
    cache(sl, b"foo.bar", unrelated)
    assert not matches(pattern, unrelated)
    s = sub(pattern)
    sl.insert(s)
    assert unrelated in sl._cache  # not invalidated
    hits = sl.cache_hits
    assert plain(sl.match(b"foo.bar")) == {s}  # stale EMPTY was dropped
    assert sl.cache_hits == hits
    assert b"foo.bar" not in sl._cache  # a first miss again: cached on the next one
    sl.match(unrelated)
    assert sl.cache_hits == hits + 1


def test_insert_of_a_catch_all_invalidates_everything() -> None:
    sl = Sublist()
    cache(sl, b"a", b"b.c", b"d.e.f")
    sl.insert(sub(b">"))
    assert sl.statistics()["num_cache"] == 0


@pytest.mark.parametrize("pattern", [b"foo.bar", b"foo.*", b"foo.>", b"*.bar"])
def test_remove_invalidates_matching_cached_subjects_only(pattern: bytes) -> None:
    sl = Sublist()
    s = sub(pattern)
    keep = sub(b"zzz")
    sl.insert(s)
    sl.insert(keep)
    cache(sl, b"foo.bar", b"zzz")
    assert plain(sl.match(b"foo.bar")) == {s}
    assert plain(sl.match(b"zzz")) == {keep}
    assert sl.remove(s)
    assert b"zzz" in sl._cache
    assert b"foo.bar" not in sl._cache
    assert sl.match(b"foo.bar") is EMPTY
    hits = sl.cache_hits
    assert plain(sl.match(b"zzz")) == {keep}
    assert sl.cache_hits == hits + 1


def test_queue_insert_and_remove_invalidate_the_cache() -> None:
    sl = Sublist()
    assert sl.match(b"work.1") is EMPTY
    q = sub(b"work.*", b"q")
    sl.insert(q)
    assert groups(sl.match(b"work.1")) == {b"q": {q}}
    sl.remove(q)
    assert sl.match(b"work.1") is EMPTY


def test_a_cached_result_is_not_changed_by_later_inserts() -> None:
    sl, subs = with_subs(b"foo")
    before = sl.match(b"foo")
    extra = sub(b"foo")
    sl.insert(extra)
    assert plain(before) == {subs[b"foo"]}  # a snapshot, safe to iterate while delivering
    assert plain(sl.match(b"foo")) == {subs[b"foo"], extra}


def test_cache_bound_is_respected_evicting_the_oldest() -> None:
    sl = Sublist(cache_entries_max=4)
    for i in range(10):
        cache(sl, b"s.%d" % i)
        assert sl.statistics()["num_cache"] <= 4
    assert list(sl._cache) == [b"s.6", b"s.7", b"s.8", b"s.9"]
    hits = sl.cache_hits
    sl.match(b"s.0")  # evicted: a miss
    assert sl.cache_hits == hits
    sl.match(b"s.9")
    assert sl.cache_hits == hits + 1


def test_default_cache_bound() -> None:
    sl = Sublist()
    for i in range(3000):
        cache(sl, b"x.%d" % i)
    assert sl.statistics()["num_cache"] == 1024


@pytest.mark.parametrize("size", [0, -1])
def test_cache_can_be_disabled(size: int) -> None:
    # Regression: with cache_entries_max=0, match() raised StopIteration evicting from an
    # empty cache.
    sl = Sublist(cache_entries_max=size)
    s = sub(b"foo")
    sl.insert(s)
    assert plain(sl.match(b"foo")) == {s}
    assert plain(sl.match(b"foo")) == {s}
    assert sl.statistics()["num_cache"] == 0
    assert sl.cache_hits == 0


# ---------------------------------------------------------------------------- ack routes

_ACK_ROUTES = (b"$JS.ACK.S.C.>", b"$JS.ACK.S.D.>", b"$JS.ACK.T.C.>")
_ack_token = st.sampled_from([b"S", b"C", b"D", b"T", b"1", b"22", b"", b"*", b">"])
_ack_tokens = st.lists(_ack_token, max_size=6)


def _ack_subject(tokens: list[bytes]) -> bytes:
    return b".".join([b"$JS", b"ACK", *tokens])


ACK_PREFIX = b"$JS.ACK."


def ack_routes() -> tuple[Sublist, dict[bytes, Subscription]]:
    """Consumers' ack subscriptions, as their internal clients make them (uncached), under
    the prefix the JetStream engine registers."""
    sl = Sublist()
    sl.add_exclusive_prefix(ACK_PREFIX, 2)
    subs = {}
    for subject in _ACK_ROUTES:
        subs[subject] = s = Subscription(CLIENT, subject, b"1", None, cache_results=False)
        sl.insert(s)
    return sl, subs


@settings(max_examples=500, deadline=None)
@given(
    st.one_of(  # mostly a consumer's route key
        st.sampled_from([[b"S", b"C"], [b"S", b"D"], [b"T", b"C"]]),
        st.lists(_ack_token, max_size=3),
    ),
    st.lists(_ack_tokens, min_size=1, max_size=6),
    st.lists(_ack_tokens, max_size=2),
)
def test_ack_matches_agree_with_the_subject_rules(
    head: list[bytes], tails: list[list[bytes]], others: list[list[bytes]]
) -> None:
    # `match` of a routed subject (one lookup) and `match_each` (a run of them, at once
    # when they share a route) are shortcuts of the trie walk for consumers' ack routes:
    # both must find exactly the subscriptions the walk finds. Mostly one consumer's acks
    # (a shared head), as a read chunk brings them, and perhaps a few others.
    subjects = [_ack_subject(head + tail) for tail in tails] + [_ack_subject(t) for t in others]
    sl, _ = ack_routes()
    # The oracle: `match` walks the trie once some other subscription could match an
    # ack subject (this one never matches the generated subjects).
    walked, _ = ack_routes()
    walked.insert(sub(b"$JS.ACK.Q.Q.Q"))
    assert walked.match_each(subjects) is None

    def names(result: MatchResult) -> set[bytes]:
        return {s.subject for s in plain(result)}

    expected = [names(walked.match(subject)) for subject in subjects]
    assert [names(sl.match(subject)) for subject in subjects] == expected
    stretches = sl.match_each(subjects)
    if stretches is None:
        assert not all(s.startswith(ACK_PREFIX) for s in subjects)
        return
    assert [s for _, stretch in stretches for s in stretch] == subjects
    got = [{route.subject} if route else set() for route, stretch in stretches for _ in stretch]
    assert got == expected


def test_a_run_of_one_consumers_acks_is_matched_at_once() -> None:
    sl, subs = ack_routes()
    run = [b"$JS.ACK.S.C.1.%d.%d.1763800000000000000.0" % (i, i) for i in range(1, 50)]
    matches = sl.matches
    assert sl.match_each(run) == [(subs[b"$JS.ACK.S.C.>"], run)]
    assert sl.matches == matches + len(run)  # counted as `match` would count them
    other = b"$JS.ACK.S.D.1.2.3.4.0"
    assert sl.match_each([*run, other]) == [
        (subs[b"$JS.ACK.S.C.>"], run),
        (subs[b"$JS.ACK.S.D.>"], [other]),
    ]
    empty = b"$JS.ACK.S.C.1..3.4.0"  # an empty token matches nothing
    assert sl.match_each([*run, empty]) == [(subs[b"$JS.ACK.S.C.>"], run), (None, [empty])]
    unknown = [b"$JS.ACK.X.Y.1.2.3.4.0"] * 3
    assert sl.match_each(unknown) == [(None, unknown)]
    assert sl.match_each([*run, b"orders.x"]) is None  # not all under the prefix


def test_exclusive_prefixes_are_generic_and_may_come_after_the_subscriptions() -> None:
    # Any owner may register a prefix, with its own number of route tokens; what is
    # subscribed already is counted, routes and foreign ones alike.
    sl = Sublist()
    done = Subscription(CLIENT, b"jobs.done.A.>", b"1", None, cache_results=False)
    sl.insert(done)
    assert sl.match_each([b"jobs.done.A.1"]) is None  # no prefix registered yet
    sl.add_exclusive_prefix(b"jobs.done.", 1)
    sl.add_exclusive_prefix(b"jobs.done.", 1)  # again: no change
    assert sl.exclusive_prefixes == (b"jobs.done.",)
    assert sl.match_each([b"jobs.done.A.1", b"jobs.done.A.2"]) == [
        (done, [b"jobs.done.A.1", b"jobs.done.A.2"])
    ]
    assert sl.match(b"jobs.done.A.3").plain == (done,)
    watcher = sub(b"jobs.*.A.>")  # could match under the prefix: the trie answers again
    sl.insert(watcher)
    assert sl.match_each([b"jobs.done.A.1"]) is None
    assert plain(sl.match(b"jobs.done.A.3")) == {done, watcher}
    sl.remove(watcher)
    late = Sublist()
    late.insert(done)
    late.insert(watcher)
    late.add_exclusive_prefix(b"jobs.done.", 1)
    assert late.match_each([b"jobs.done.A.1"]) is None
    late.remove(watcher)
    assert late.match_each([b"jobs.done.A.1"]) == [(done, [b"jobs.done.A.1"])]
