"""The subscription index: a token trie with a bounded cache of match results.

`match(subject)` returns every subscription whose subject matches a literal subject, with
queue subscriptions grouped by queue name. Results are cached per subject (at most
`cache_entries_max`, the oldest entry evicted first); inserting or removing a subscription
drops only the cached subjects that subscription matches, so a request/reply workload that
subscribes and unsubscribes inboxes does not flush the cache of unrelated hot subjects.
Finding those costs what they are, not what the cache holds: a literal subscription can
only match its own subject (one dict lookup), and the cached subjects are also kept in a
`SubjectIndex`, which a wildcard subscription's subject walks (`intersecting`), so a SUB
never scans the cache.
A result that includes a subscription made with `cache_results=False` is not cached: such
subscriptions (a JetStream consumer's `$JS.ACK.<stream>.<consumer>.>`) match subjects that
are each published about once, whose entries would only push hot subjects out of the
cache. The cache never changes what `match` returns. Mirrors nats-server's sublist.go
semantics (wire reference §1.10, §1.11).

Ack routes: every ack a client sends is such a one-off subject, so its match would walk
the trie token by token. A one-off plain subscription on `$JS.ACK.<stream>.<consumer>.>`
is also entered in `_ack_routes` under its prefix, and while no other subscription could
match anything under `$JS.ACK.` (`_ack_foreign` counts those: a `>` or `$JS.*.>` say),
the match of an ack subject is that one subscription, found by its prefix in one lookup.
"""

from __future__ import annotations

from typing import Protocol

from brook import limits
from brook.routing.subject_index import SubjectIndex, is_literal


class Subscriber(Protocol):
    """Whoever receives messages for a subscription: a client connection or an internal service."""

    def deliver(
        self,
        sub: Subscription,
        subject: bytes,
        reply: bytes | None,
        header: bytes | None,
        payload: bytes,
    ) -> bool | None:
        """Deliver; an internal service returns False to decline (not a responder)."""
        ...


class Subscription:
    __slots__ = ("cache_results", "client", "delivered", "max_msgs", "queue", "sid", "subject")

    def __init__(
        self,
        client: Subscriber,
        subject: bytes,
        sid: bytes,
        queue: bytes | None = None,
        *,
        cache_results: bool = True,
    ) -> None:
        self.client = client
        self.subject = subject
        self.sid = sid
        self.queue = queue
        self.max_msgs = 0  # 0 = no auto-unsubscribe
        self.delivered = 0
        # False: the subjects it matches are one-off, keep them out of the match cache.
        self.cache_results = cache_results

    def __repr__(self) -> str:
        q = f" queue={self.queue!r}" if self.queue else ""
        return f"<Subscription {self.subject!r} sid={self.sid!r}{q}>"


class MatchResult:
    """Plain subscriptions, and one tuple of members per matching queue group."""

    __slots__ = ("plain", "queues")

    def __init__(
        self, plain: tuple[Subscription, ...], queues: tuple[tuple[Subscription, ...], ...]
    ) -> None:
        self.plain = plain
        self.queues = queues

    def __bool__(self) -> bool:
        return bool(self.plain or self.queues)


EMPTY = MatchResult((), ())


ACK_PREFIX = b"$JS.ACK."


def _ack_route_prefix(sub: Subscription) -> bytes | None:
    """`$JS.ACK.<s>.<c>.` for a one-off plain subscription on `$JS.ACK.<s>.<c>.>`."""
    if sub.cache_results or sub.queue is not None:
        return None
    tokens = sub.subject.split(b".")
    if (
        len(tokens) == 5
        and tokens[0] == b"$JS"
        and tokens[1] == b"ACK"
        and tokens[4] == b">"
        and all(t and t != b"*" and t != b">" for t in tokens[2:4])
    ):
        return sub.subject[:-1]
    return None


def _may_match_acks(pattern: bytes) -> bool:
    """Could `pattern` match a subject under `$JS.ACK.` (conservatively: maybe)?"""
    tokens = pattern.split(b".", 2)
    first = tokens[0]
    if first == b">":
        return True
    if (first != b"$JS" and first != b"*") or len(tokens) < 2:
        return False
    return tokens[1] in (b"ACK", b"*", b">")


class _Node:
    __slots__ = ("children", "plain", "queues")

    def __init__(self) -> None:
        self.children: dict[bytes, _Node] = {}
        self.plain: list[Subscription] = []
        self.queues: dict[bytes, list[Subscription]] = {}

    def is_empty(self) -> bool:
        return not (self.children or self.plain or self.queues)


def _ack_key_end(subject: bytes) -> int:
    """Where the route key `$JS.ACK.<stream>.<consumer>.` of an ack subject ends, or -1
    when the subject has no such prefix."""
    i = subject.find(b".", 8)
    j = subject.find(b".", i + 1) if i > 0 else -1
    return j + 1 if j >= 0 else -1


class Sublist:
    def __init__(self, cache_entries_max: int = limits.SUBLIST_CACHE_ENTRIES_MAX) -> None:
        self._root = _Node()
        self._cache: dict[bytes, MatchResult] = {}
        # The keys of `_cache`: literal ones in an index (each its own value), and the few
        # published subjects with a wildcard token, which only wildcard subscriptions match.
        self._cached = SubjectIndex[bytes]()
        self._cached_wild: set[bytes] = set()
        self._cache_entries_max = cache_entries_max
        self.count = 0
        self.matches = 0
        self.cache_misses = 0  # hits are derived: one counter on the hot path, not two
        # See "Ack routes" in the module docstring.
        self._ack_routes: dict[bytes, MatchResult] = {}
        self._ack_foreign = 0

    def _track_ack_route(self, sub: Subscription, added: bool) -> None:
        prefix = _ack_route_prefix(sub)
        routes = self._ack_routes
        if prefix is not None:
            if added and prefix not in routes:
                routes[prefix] = MatchResult((sub,), ())
                return
            route = routes.get(prefix)
            if not added and route is not None and route.plain[0] is sub:
                del routes[prefix]
                return
        elif not _may_match_acks(sub.subject):
            return
        self._ack_foreign += 1 if added else -1

    @property
    def ack_routes_only(self) -> bool:
        """Only ack routes can match a subject under `$JS.ACK.`: `ack_match` is `match`."""
        return bool(self._ack_routes) and not self._ack_foreign

    def ack_match(self, subject: bytes) -> MatchResult:
        """`match` of a subject under `$JS.ACK.` while only ack routes can match one."""
        j = _ack_key_end(subject)
        if j < 0:
            return EMPTY
        rest = subject[j:]
        if not rest or rest[0] == 46 or rest[-1] == 46 or b".." in rest:
            return EMPTY  # an empty token (46 is ".") matches nothing
        return self._ack_routes.get(subject[:j], EMPTY)

    def ack_run_match(self, subjects: list[bytes]) -> MatchResult | None:
        """`ack_match` of every one of `subjects` at once when it is the same for all of
        them: they share the route key (`$JS.ACK.<stream>.<consumer>.`) and have no empty
        token after it. None when that cannot be told so cheaply: match one by one then.

        A consumer's acks arrive hundreds to a read; this checks them with a few scans
        over the joined subjects (which hold no blanks) instead of a lookup per ack.
        """
        j = _ack_key_end(subjects[0])
        if j < 0:
            return None
        key = subjects[0][:j]
        joined = b" ".join(subjects)
        if (
            joined.count(b" " + key) != len(subjects) - 1
            or b".." in joined
            or b". " in joined
            or joined[-1] == 46
        ):
            return None
        return self._ack_routes.get(key, EMPTY)

    def insert(self, sub: Subscription) -> None:
        node = self._root
        for tok in sub.subject.split(b"."):
            child = node.children.get(tok)
            if child is None:
                child = node.children[tok] = _Node()
            node = child
        if sub.queue is None:
            node.plain.append(sub)
        else:
            node.queues.setdefault(sub.queue, []).append(sub)
        self.count += 1
        self._track_ack_route(sub, True)
        self._invalidate(sub.subject)

    def remove(self, sub: Subscription) -> bool:
        """Remove `sub`; returns False if it was not in the index."""
        path: list[tuple[_Node, bytes]] = []
        node = self._root
        for tok in sub.subject.split(b"."):
            child = node.children.get(tok)
            if child is None:
                return False
            path.append((node, tok))
            node = child
        try:
            if sub.queue is None:
                node.plain.remove(sub)
            else:
                members = node.queues[sub.queue]
                members.remove(sub)
                if not members:
                    del node.queues[sub.queue]
        except (ValueError, KeyError):
            return False
        # Prune nodes left empty so the trie does not grow with every inbox ever used.
        for parent, tok in reversed(path):
            child = parent.children[tok]
            if not child.is_empty():
                break
            del parent.children[tok]
        self.count -= 1
        self._track_ack_route(sub, False)
        self._invalidate(sub.subject)
        return True

    def _invalidate(self, pattern: bytes) -> None:
        """Drop the cached results a subscription on `pattern` is part of (or now would be)."""
        cache = self._cache
        if not cache:
            return
        if is_literal(pattern):
            if cache.pop(pattern, None) is not None:
                self._cached.remove(pattern, pattern)
            return
        cached = self._cached
        for subject in cached.intersecting(pattern):
            del cache[subject]
            cached.remove(subject, subject)
        for subject in self._cached_wild:
            del cache[subject]
        self._cached_wild.clear()

    @property
    def cache_hits(self) -> int:
        return self.matches - self.cache_misses

    def match(self, subject: bytes) -> MatchResult:
        self.matches += 1
        cached = self._cache.get(subject)
        if cached is not None:
            return cached
        self.cache_misses += 1
        if self._ack_routes and not self._ack_foreign and subject.startswith(ACK_PREFIX):
            return self.ack_match(subject)
        plain: list[Subscription] = []
        queues: dict[bytes, list[Subscription]] = {}
        tokens = subject.split(b".")
        # As nats-server: a subject with an empty token (`a..b`, `.a`, `a.`) matches nothing.
        if all(tokens):
            _collect(self._root, tokens, 0, plain, queues)
        if queues:
            result = MatchResult(tuple(plain), tuple(map(tuple, queues.values())))
        elif plain:
            result = MatchResult(tuple(plain), ())
        else:
            result = EMPTY
        for sub in plain:
            if not sub.cache_results:
                return result
        for members in result.queues:
            for sub in members:
                if not sub.cache_results:
                    return result
        cache = self._cache
        if len(cache) >= self._cache_entries_max:
            if not cache:
                return result  # cache_entries_max <= 0: caching is off
            # Evict the oldest entry (dicts keep insertion order): cheap and bounded.
            oldest = next(iter(cache))
            del cache[oldest]
            if not self._cached.remove(oldest, oldest):
                self._cached_wild.discard(oldest)
        cache[subject] = result
        if is_literal(subject):
            self._cached.add(subject, subject)
        else:
            self._cached_wild.add(subject)
        return result

    def statistics(self) -> dict[str, int]:
        return {
            "num_subscriptions": self.count,
            "num_cache": len(self._cache),
            "num_matches": self.matches,
            "cache_hits": self.cache_hits,
        }


def _add(node: _Node, plain: list[Subscription], queues: dict[bytes, list[Subscription]]) -> None:
    if node.plain:
        plain.extend(node.plain)
    for name, members in node.queues.items():
        queues.setdefault(name, []).extend(members)


def _collect(
    node: _Node,
    tokens: list[bytes],
    i: int,
    plain: list[Subscription],
    queues: dict[bytes, list[Subscription]],
) -> None:
    """Add the subscriptions under `node` matching `tokens[i:]`: `>` first, then the `*`
    subtree, then the literal one. The literal path is followed in a loop, recursing
    only into `*` subtrees (recursion per token was most of the cost of a cache miss)."""
    last_i = len(tokens) - 1
    while True:
        children = node.children
        if not children:
            return
        fwc = children.get(b">")
        if fwc is not None:
            _add(fwc, plain, queues)
        pwc = children.get(b"*")
        if pwc is not None:
            if i == last_i:
                _add(pwc, plain, queues)
            else:
                _collect(pwc, tokens, i + 1, plain, queues)
        tok = tokens[i]
        if tok == b"*" or tok == b">":
            return  # a wildcard token in a published subject only matches wildcard subscriptions
        lit = children.get(tok)
        if lit is None:
            return
        if i == last_i:
            _add(lit, plain, queues)
            return
        node = lit
        i += 1
