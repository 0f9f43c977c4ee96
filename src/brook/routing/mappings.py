"""Subject mappings: a published subject replaced by another before it is routed.

nats-server's account mappings (accounts.go: `AddWeightedMappings`, `selectMappedSubject`;
ADR 0030). Each mapping has a source subject (wildcards allowed) and destinations, each a
subject transform (`routing/transform.py`, the one shared with stream transforms: ADR 0018)
with a weight in percent. A message published by a client to a subject some source matches
is routed under one destination, chosen at random by weight as nats-server chooses it
(`rand(100)` against the weights sorted and added up). Weights adding up to less than 100
leave the rest to the source subject itself, unless the source is one of the destinations:
then the rest of the messages go nowhere (nats-server routes them to the empty subject,
which no one can subscribe to, and a requester with `no_responders` hears a 503 with an
empty `Nats-Subject`). Destinations scoped to a cluster are checked and compiled but never
chosen: a single server has no cluster name, and nats-server falls back to the unscoped
ones then.

The order of mappings whose sources overlap is not nats-server's to keep: it reads them
from a Go map, in random order. Brook tries a literal source first (one lookup), then the
wildcard sources through a `SubjectIndex`, the first written winning, so the cost of a
publish does not grow with the number of mappings.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from brook import limits
from brook.config.settings import ConfigError, MapDestination, SubjectMapping
from brook.routing.subject_index import SubjectIndex, is_literal
from brook.routing.transform import (
    SubjectTransform,
    TransformError,
    tokenized,
    validate_mapping,
)

# What `select` returns for a message the weights send nowhere.
NOWHERE = b""


class _Mapping:
    """One compiled mapping: its destinations as (cumulative weight, transform), by
    weight; `single` when one destination takes every message."""

    __slots__ = ("destinations", "order", "single")

    def __init__(self, order: int, destinations: list[tuple[int, SubjectTransform]]) -> None:
        self.order = order
        self.destinations = destinations
        only = destinations[0] if len(destinations) == 1 else None
        self.single = only[1] if only is not None and only[0] == 100 else None


class SubjectMappings:
    """An account's compiled mappings; `compile` makes them from the settings."""

    __slots__ = ("_all", "_cache", "_literal", "_patterns", "_randrange")

    def __init__(self, mappings: list[tuple[bytes, _Mapping]], rng: random.Random) -> None:
        self._all = mappings  # for `describe`
        self._literal: dict[bytes, _Mapping] = {}
        self._patterns: SubjectIndex[_Mapping] | None = None
        self._randrange = rng.randrange
        # Subjects whose mapping is always the same (none, or one destination without
        # `random`) -> the subject they are routed under; emptied when full.
        self._cache: dict[bytes, bytes | None] = {}
        for source, mapping in mappings:
            if is_literal(source):
                self._literal[source] = mapping
            else:
                if self._patterns is None:
                    self._patterns = SubjectIndex()
                self._patterns.add(source, mapping)

    @classmethod
    def compile(
        cls, entries: Sequence[SubjectMapping], rng: random.Random | None = None
    ) -> SubjectMappings | None:
        """None without mappings. A mapping nats-server would refuse raises `ConfigError`
        with its text, after the entry's place in the file. A later mapping of the same
        source replaces an earlier one, as in nats-server."""
        compiled: dict[bytes, _Mapping] = {}
        for order, entry in enumerate(entries):
            try:
                mapping = _compile(entry.source, entry.destinations, order)
            except (TransformError, ValueError) as exc:
                error = exc.text if isinstance(exc, TransformError) else str(exc)
                shown = f'"{entry.source}"'
                if not entry.weighted:
                    shown += f' to "{entry.destinations[0].subject}"'
                raise ConfigError(
                    f"{entry.where}: Error adding mapping for {shown} : {error}"
                ) from None
            compiled[entry.source.encode("utf-8", "surrogateescape")] = mapping
        if not compiled:
            return None
        return cls(list(compiled.items()), rng or random.Random())

    def describe(self) -> dict[str, list[tuple[str, int]]]:
        """Each source's destinations with their cumulative weights, as nats-server's
        `/accountz` lists an account's mappings (cluster-scoped ones, never chosen on a
        single server, left out)."""
        return {
            source.decode("utf-8", "surrogateescape"): [
                (transform.dest.decode("utf-8", "surrogateescape"), bound)
                for bound, transform in mapping.destinations
            ]
            for source, mapping in self._all
        }

    def sources(self) -> tuple[bytes, ...]:
        """Every mapping's source subject: interest a leafnode connection shows its peer,
        as nats-server's `initLeafNodeSmapAndSendSubs` does for `acc.mappings`."""
        return tuple(source for source, _ in self._all)

    def select(self, subject: bytes) -> bytes | None:
        """The subject a message published to `subject` is routed under: None when no
        mapping applies, `NOWHERE` when the weights drop it."""
        cache = self._cache
        if subject in cache:
            return cache[subject]
        mapping = self._find(subject)
        if mapping is None:
            mapped = None
        else:
            mapped = self._destination(mapping, subject)
            if mapping.single is None or mapping.single.random:
                return mapped  # chosen at random: not cached
        if len(cache) >= limits.MAPPING_CACHE_ENTRIES_MAX:
            cache.clear()
        cache[subject] = mapped
        return mapped

    def _find(self, subject: bytes) -> _Mapping | None:
        mapping = self._literal.get(subject)
        if mapping is None and self._patterns is not None:
            found = self._patterns.match(subject)
            if found:
                mapping = min(found, key=_order) if len(found) > 1 else found[0]
        return mapping

    def _destination(self, mapping: _Mapping, subject: bytes) -> bytes:
        tokens: list[bytes] = []
        if subject not in self._literal:
            tokens = subject.split(b".")
        transform = mapping.single
        if transform is None:
            draw = self._randrange(100)
            for bound, candidate in mapping.destinations:
                if draw < bound:
                    transform = candidate
                    break
            else:
                return NOWHERE
        # A literal source passes no tokens, as nats-server's (a partition without
        # wildcards hashes the empty string then).
        return transform.transform_tokens(tokens)


def _order(mapping: _Mapping) -> int:
    return mapping.order


def _compile(source: str, destinations: Sequence[MapDestination], order: int) -> _Mapping:
    """nats-server's AddWeightedMappings: its checks in its order, then the destinations
    without a cluster as (cumulative weight, transform). Raises TransformError or a
    ValueError with its text."""
    src = source.encode("utf-8", "surrogateescape")
    seen: set[str] = set()
    totals: dict[str, int] = {}
    plain: list[tuple[int, SubjectTransform]] = []
    scoped: dict[str, list[tuple[int, SubjectTransform]]] = {}
    for dest in destinations:
        if dest.subject in seen:
            raise ValueError(f'duplicate entry for "{dest.subject}"')
        seen.add(dest.subject)
        if dest.weight > 100:
            raise ValueError("individual weights need to be <= 100")
        totals[dest.cluster] = totals.get(dest.cluster, 0) + dest.weight
        if totals[dest.cluster] > 100:
            raise ValueError("total weight needs to be <= 100")
        validate_mapping(source, dest.subject)
        transform = SubjectTransform.compile(src, dest.subject)
        if transform is None:
            raise ValueError("a mapping needs a destination subject")
        (scoped.setdefault(dest.cluster, []) if dest.cluster else plain).append(
            (dest.weight, transform)
        )
    for group in scoped.values():  # checked as nats-server checks them, never chosen
        _cumulative(src, group, source in seen)
    return _Mapping(order, _cumulative(src, plain, source in seen))


def _cumulative(
    src: bytes, destinations: list[tuple[int, SubjectTransform]], source_listed: bool
) -> list[tuple[int, SubjectTransform]]:
    """Weights short of 100 go to the source itself unless it is listed; then sorted
    by weight and added up, so that a draw below a bound picks its destination."""
    total = sum(weight for weight, _ in destinations)
    if total != 100 and not source_listed:
        identity = SubjectTransform.compile(src, tokenized(src))
        assert identity is not None
        destinations = [*destinations, (100 - total if destinations else 100, identity)]
    destinations = sorted(destinations, key=_weight)
    bound = 0
    added = []
    for weight, transform in destinations:
        bound += weight
        added.append((bound, transform))
    return added


def _weight(destination: tuple[int, SubjectTransform]) -> int:
    return destination[0]
