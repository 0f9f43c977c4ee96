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
subscriptions (a JetStream consumer's ack subscription, say) match subjects that are each
published about once, whose entries would only push hot subjects out of the cache. A
subject is cached on its second miss, not its first (`_once` remembers, bounded as the
cache, which subjects missed once): a client's subjects published about once, a request's
reply subject above all (nats-py's `_INBOX.<id>.<token>`, new for every request, and so
every PubAck of its JetStream publishes), then cost neither an entry in the index nor an
entry evicted from the cache; a subject published again is cached the second time. The
cache never changes what `match` returns. Mirrors nats-server's sublist.go semantics (wire
reference §1.10, §1.11).

Exclusive prefix routes: an owner that publishes one-off subjects under a prefix of its own
(the JetStream engine, its consumers' ack subjects) registers that prefix and how many
tokens after it name a route (`add_exclusive_prefix`). A one-off plain subscription on
`<prefix><t1>...<tk>.>` is then also entered as the route of `<prefix><t1>...<tk>.`, and
while no other subscription could match anything under the prefix (`_ExclusivePrefix.foreign`
counts those: a `>` say), the match of a subject under it is that one route, found by its
first tokens in one lookup instead of a walk of the trie token by token.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from brook import limits
from brook.routing.subject_index import SubjectIndex, is_literal
from brook.routing.subscriber import Subscriber

MessageHandler = Callable[[bytes, bytes | None, bytes | None, bytes], bool | None]
"""An in-process subscriber's callback: (subject, reply, header, payload) -> False to
decline the message (not a responder)."""


class Subscription:
    __slots__ = (
        "cache_results", "client", "delivered", "handler", "max_msgs", "queue", "sid", "subject",
    )  # fmt: skip

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
        # An in-process subscriber's callback (`InternalClient`), called by the router
        # without the client's `deliver` in between: a frame less for every message a
        # stream stores and every ack a consumer takes.
        self.handler: MessageHandler | None = None

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


def _may_match_under(pattern: bytes, prefix: list[bytes]) -> bool:
    """Could `pattern` match a subject that starts with the tokens `prefix` and has
    more (conservatively: maybe)?"""
    tokens = pattern.split(b".")
    for i, want in enumerate(prefix):
        if i == len(tokens):
            return False
        tok = tokens[i]
        if tok == b">":
            return True
        if tok != want and tok != b"*":
            return False
    return len(tokens) > len(prefix)


class _ExclusivePrefix:
    """A registered prefix (see "Exclusive prefix routes" in the module docstring): its
    routes by key (`<prefix><t1>...<tk>.`) and how many other subscriptions could match
    a subject under it."""

    __slots__ = ("_key_dots", "foreign", "key_tokens", "prefix", "routes", "tokens")

    def __init__(self, prefix: bytes, key_tokens: int) -> None:
        self.prefix = prefix
        self.tokens = prefix[:-1].split(b".")
        self.key_tokens = key_tokens
        # The dots up to the end of a route key: the prefix's and one per key token.
        self._key_dots = len(self.tokens) + key_tokens
        self.routes: dict[bytes, MatchResult] = {}
        self.foreign = 0

    def route_key(self, sub: Subscription) -> bytes | None:
        """The key a one-off plain subscription on `<prefix><t1>...<tk>.>` is the route of."""
        if sub.cache_results or sub.queue is not None:
            return None
        subject = sub.subject
        if not subject.startswith(self.prefix) or not subject.endswith(b".>"):
            return None
        if len(subject) < len(self.prefix) + 2:  # `<prefix>>`: the prefix's dot is the `.>`'s
            # (and compiled, a reversed slice raises SystemError: mypyc 2.4.1, ADR 0045)
            return None
        keys = subject[len(self.prefix) : -2].split(b".")
        if len(keys) != self.key_tokens or not all(k and k != b"*" and k != b">" for k in keys):
            return None
        return subject[:-1]

    def track(self, sub: Subscription, added: bool) -> None:
        key = self.route_key(sub)
        routes = self.routes
        if key is not None:
            if added and key not in routes:
                routes[key] = MatchResult((sub,), ())
                return
            route = routes.get(key)
            if not added and route is not None and route.plain[0] is sub:
                del routes[key]
                return
        elif not _may_match_under(sub.subject, self.tokens):
            return
        self.foreign += 1 if added else -1

    def key_end(self, subject: bytes) -> int:
        """Where the route key of `subject` (a subject under the prefix) ends, or -1 when
        it has fewer tokens."""
        parts = subject.split(b".", self._key_dots)
        if len(parts) <= self._key_dots:
            return -1
        return len(subject) - len(parts[-1])

    def match(self, subject: bytes) -> MatchResult:
        """`Sublist.match` of a subject under the prefix while only routes can match it."""
        j = self.key_end(subject)
        if j < 0:
            return EMPTY
        rest = subject[j:]
        if not rest or rest[0] == 46 or rest[-1] == 46 or rest.find(b"..") >= 0:
            return EMPTY  # an empty token (46 is ".") matches nothing
        return self.routes.get(subject[:j], EMPTY)

    def run_match(self, subjects: list[bytes]) -> MatchResult | None:
        """`match` of every one of `subjects` (all under the prefix) at once when it is
        the same for all of them: they share the route key and have no empty token after
        it. None when that cannot be told so cheaply: match one by one then.

        A consumer's acks arrive hundreds to a read; this checks them with a few scans
        over the joined subjects (which hold no blanks) instead of a lookup per subject.
        """
        j = self.key_end(subjects[0])
        if j < 0:
            return None
        key = subjects[0][:j]
        joined = b" ".join(subjects)
        if (
            joined.count(b" " + key) != len(subjects) - 1
            or joined.find(b"..") >= 0  # `find`, not `in`: see protocol/parser.py
            or joined.find(b". ") >= 0
            or joined[-1] == 46
        ):
            return None
        return self.routes.get(key, EMPTY)


class _Node:
    __slots__ = ("children", "plain", "queues")

    def __init__(self) -> None:
        self.children: dict[bytes, _Node] = {}
        self.plain: list[Subscription] = []
        self.queues: dict[bytes, list[Subscription]] = {}

    def is_empty(self) -> bool:
        return not (self.children or self.plain or self.queues)


class Sublist:
    def __init__(self, cache_entries_max: int = limits.SUBLIST_CACHE_ENTRIES_MAX) -> None:
        self._root = _Node()
        self._cache: dict[bytes, MatchResult] = {}
        # The keys of `_cache`: literal ones in an index (each its own value), and the few
        # published subjects with a wildcard token, which only wildcard subscriptions match.
        self._cached = SubjectIndex[bytes]()
        self._cached_wild: set[bytes] = set()
        # The subjects that missed once and are not cached yet (module docstring): a dict
        # as an ordered set, bounded as the cache, holding no result to invalidate.
        self._once: dict[bytes, None] = {}
        self._cache_entries_max = cache_entries_max
        self.count = 0
        self.inserts = 0  # ever, for /subsz; subscribing is off the message path
        self.removes = 0
        self.matches = 0
        self.cache_misses = 0  # hits are derived: one counter on the hot path, not two
        # See "Exclusive prefix routes" in the module docstring: every registered prefix,
        # and those whose routes alone can match a subject under them now.
        self._exclusive: list[_ExclusivePrefix] = []
        self._routed: tuple[_ExclusivePrefix, ...] = ()

    def add_exclusive_prefix(self, prefix: bytes, key_tokens: int) -> None:
        """Route the subjects under `prefix` (which ends with ".") by their first
        `key_tokens` tokens after it, while only routes can match them (see the module
        docstring). Registering a prefix again changes nothing."""
        if prefix in self.exclusive_prefixes:
            return
        exclusive = _ExclusivePrefix(prefix, key_tokens)
        for sub in self._subscriptions():
            exclusive.track(sub, True)
        self._exclusive.append(exclusive)
        self._update_routed()

    @property
    def exclusive_prefixes(self) -> tuple[bytes, ...]:
        return tuple(e.prefix for e in self._exclusive)

    def _update_routed(self) -> None:
        self._routed = tuple(e for e in self._exclusive if e.routes and not e.foreign)

    def _subscriptions(self) -> Iterator[Subscription]:
        nodes = [self._root]
        while nodes:
            node = nodes.pop()
            yield from node.plain
            for members in node.queues.values():
                yield from members
            nodes.extend(node.children.values())

    def match_each(
        self, subjects: list[bytes]
    ) -> list[tuple[Subscription | None, list[bytes]]] | None:
        """What `match` gives for each of `subjects` (all under one registered prefix),
        when only its routes can match them: the route (None: no subscription) of each
        stretch of consecutive subjects bound for the same one, in order. None when the
        subjects are not all under a routed prefix: match one by one then. Counted as
        `len(subjects)` uncached matches, as `match` would count them."""
        first = subjects[0]
        for exclusive in self._routed:
            if first.startswith(exclusive.prefix):
                break
        else:
            return None
        shared = exclusive.run_match(subjects)
        if shared is not None:  # all bound for one route, or for none
            stretches = [(shared.plain[0] if shared.plain else None, subjects)]
        else:
            prefix = exclusive.prefix
            stretches = []
            run_sub: Subscription | None = None
            run: list[bytes] = []
            for subject in subjects:
                if not subject.startswith(prefix):
                    return None
                plain = exclusive.match(subject).plain
                sub = plain[0] if plain else None
                if sub is not run_sub and run:
                    stretches.append((run_sub, run))
                    run = []
                run_sub = sub
                run.append(subject)
            stretches.append((run_sub, run))
        n = len(subjects)
        self.matches += n
        self.cache_misses += n  # `match` never caches a routed subject
        return stretches

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
        self.inserts += 1
        if self._exclusive:
            for exclusive in self._exclusive:
                exclusive.track(sub, True)
            self._update_routed()
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
        self.removes += 1
        if self._exclusive:
            for exclusive in self._exclusive:
                exclusive.track(sub, False)
            self._update_routed()
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
        for exclusive in self._routed:
            if subject.startswith(exclusive.prefix):
                return exclusive.match(subject)
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
        once = self._once
        if subject not in once:  # its first miss: remembered, not cached
            if len(once) >= self._cache_entries_max:
                if not once:
                    return result  # cache_entries_max <= 0: caching is off
                del once[next(iter(once))]
            once[subject] = None
            return result
        del once[subject]
        cache = self._cache
        if len(cache) >= self._cache_entries_max:
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
        """nats-server's `SublistStats` as counts (`/subsz` derives its rates from them):
        the fan-out of each cached result is its plain subscribers plus its queue groups,
        walked here when asked, as nats-server walks its cache."""
        total_fanout = max_fanout = 0
        for result in self._cache.values():
            fanout = len(result.plain) + len(result.queues)
            total_fanout += fanout
            max_fanout = max(max_fanout, fanout)
        return {
            "num_subscriptions": self.count,
            "num_cache": len(self._cache),
            "num_inserts": self.inserts,
            "num_removes": self.removes,
            "num_matches": self.matches,
            "cache_hits": self.cache_hits,
            "max_fanout": max_fanout,
            "total_fanout": total_fanout,
        }

    def subscriptions(self) -> list[Subscription]:
        """Every subscription in the index (a walk of the trie, for monitoring)."""
        return list(self._subscriptions())


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
